"""An inference server that batches its requests and exports the batcher's metrics: the
image behind examples/inference-service.yaml (built by examples/batched-server.Dockerfile).

The model is a NumPy matrix product (512 features -> 10 classes) standing in for a GPU
model: a call on 32 inputs costs little more than on one, which is what batching buys.

    POST /predict  {"input": [512 numbers]}  ->  {"class": 3}
    GET  /healthz  ->  200 once the batcher runs (the readiness probe)
    GET  :9400/metrics  ->  gpuctl_batcher_* in Prometheus' text format (the autoscaler's
                            queue_depth, latency_ms and rps signals)

Run it with `python examples/batched_server.py` (PORT, METRICS_PORT, MAX_BATCH and
MAX_WAIT_MS in the environment change the defaults)."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import threading

import numpy as np

from gpuctl.batching import DynamicBatcher
from gpuctl.batching.prometheus import serve_metrics
from gpuctl.batching.tensors import stack, unstack

FEATURES = 512
WEIGHTS = np.random.default_rng(0).standard_normal((FEATURES, 10)).astype(np.float32)


def model(items: list[np.ndarray]) -> list[np.ndarray]:
    """One call for the whole batch: a row of logits per input."""
    return unstack(stack(items) @ WEIGHTS)


def start(port: int, metrics_port: int, max_batch: int = 32, max_wait_ms: float = 5.0):
    """Start the batcher on an event loop of its own, its metrics endpoint and the HTTP
    server (each on a thread); return the HTTP server and the metrics server."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="batcher-loop", daemon=True).start()
    batcher = DynamicBatcher(model, max_batch_size=max_batch, max_wait_ms=max_wait_ms)

    async def begin() -> None:
        batcher.start()

    asyncio.run_coroutine_threadsafe(begin(), loop).result()
    metrics = serve_metrics(batcher, port=metrics_port)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._answer(200 if self.path == "/healthz" else 404, {"ok": self.path == "/healthz"})

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/predict":
                self._answer(404, {"error": "POST /predict"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                x = np.asarray(body["input"], dtype=np.float32)
                if x.shape != (FEATURES,):
                    raise ValueError(f"input must hold {FEATURES} numbers")
            except (ValueError, KeyError, TypeError) as e:
                self._answer(400, {"error": str(e)})
                return
            # this handler's thread waits; the batcher gathers the waiting requests
            logits = asyncio.run_coroutine_threadsafe(batcher.submit(x), loop).result()
            self._answer(200, {"class": int(logits.argmax())})

        def _answer(self, status: int, data: dict) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = Server(("0.0.0.0", port), Handler)
    server.daemon_threads = True
    return server, metrics


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 128  # clients at once: the default backlog of 5 resets the rest


if __name__ == "__main__":
    env = os.environ.get
    server, _ = start(
        int(env("PORT", "8000")),
        int(env("METRICS_PORT", "9400")),
        int(env("MAX_BATCH", "32")),
        float(env("MAX_WAIT_MS", "5")),
    )
    server.serve_forever()
