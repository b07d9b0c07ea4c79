"""The batcher's metrics in Prometheus' text exposition format (version 0.0.4), and a small
HTTP endpoint that serves them.

Written by hand rather than with prometheus_client: the batcher imports only the standard
library, so an inference server gets metrics without one more dependency (and without
prometheus_client's process-wide registry, which two batchers in one process, or a test
that makes many, would collide in). The names are gpuctl.common.batcher_metrics', which
the autoscaler of a `kind: Service` spec queries.

In an asyncio web framework, answer GET /metrics with `exposition(batcher)` and
`CONTENT_TYPE`; anywhere else, `serve_metrics(batcher, port=9400)` starts a thread that
serves them on http://0.0.0.0:9400/metrics.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterable, Mapping, Sequence

from gpuctl.batching.metrics import BatcherMetrics
from gpuctl.common import batcher_metrics as names

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_PORT = 9400


def exposition(*batchers: object, labels: Mapping[str, str] | None = None) -> str:
    """The metrics of BATCHERS (each with a `metrics()` method, or a BatcherMetrics) as
    exposition text. Several batchers in one process need a label telling them apart:
    give each as (batcher, {"model": "a"}) pairs, or LABELS for one."""
    pairs: list[tuple[BatcherMetrics, dict[str, str]]] = []
    for item in batchers:
        source, own = item if isinstance(item, tuple) else (item, dict(labels or {}))
        snapshot = source if isinstance(source, BatcherMetrics) else source.metrics()
        pairs.append((snapshot, dict(own)))
    return "".join(_families(pairs))


def _families(pairs: list[tuple[BatcherMetrics, dict[str, str]]]) -> Iterable[str]:
    gauges = (
        (names.QUEUE_DEPTH, "Requests waiting for a batch.", lambda m: m.queue_depth),
        (names.IN_FLIGHT, "Requests inside the batch being run.", lambda m: m.in_flight),
    )
    for name, text, value in gauges:
        yield f"# HELP {name} {text}\n# TYPE {name} gauge\n"
        yield from (f"{name}{_labels(lab)} {_number(value(m))}\n" for m, lab in pairs)
    counters = (
        (names.REQUESTS, "Requests sent to the batch function.", lambda m: m.requests),
        (names.BATCHES, "Calls of the batch function.", lambda m: m.batches),
        (names.FAILED_BATCHES, "Batches whose function raised.", lambda m: m.failed_batches),
        (names.CANCELLED, "Requests cancelled while queued.", lambda m: m.cancelled),
    )
    for name, text, value in counters:
        yield f"# HELP {name} {text}\n# TYPE {name} counter\n"
        yield from (f"{name}{_labels(lab)} {_number(value(m))}\n" for m, lab in pairs)
    yield from _histogram(
        names.BATCH_SIZE,
        "Requests per batch.",
        [(_size_buckets(m), m.requests, m.batches, lab) for m, lab in pairs],
    )
    times = (
        (names.WAIT, "Per request: queued until its batch was dispatched.", "wait"),
        (names.RUN, "Per batch: time inside the batch function.", "run"),
        (names.LATENCY, "Per request: queued until its result.", "latency"),
    )
    for name, text, which in times:
        rows = []
        for m, lab in pairs:
            counts = getattr(m, f"{which}_buckets") or (0,) * (len(names.TIME_BUCKETS) + 1)
            total = {
                "wait": m.wait_seconds_sum,
                "run": m.run_seconds_sum,
                "latency": m.latency_seconds_sum,
            }[which]
            bounds = list(zip(names.TIME_BUCKETS, counts))
            rows.append((bounds, total, sum(counts), lab))
        yield from _histogram(name, text, rows)


def _size_buckets(m: BatcherMetrics) -> list[tuple[float, int]]:
    """Batch sizes by powers of two up to the largest seen (each bucket not cumulative)."""
    largest = max(m.batch_sizes, default=1)
    bounds = [1]
    while bounds[-1] < largest:
        bounds.append(bounds[-1] * 2)
    counts = [0] * len(bounds)
    for size, batches in m.batch_sizes.items():
        counts[next(i for i, b in enumerate(bounds) if size <= b)] += batches
    return list(zip(map(float, bounds), counts))


def _histogram(
    name: str,
    text: str,
    rows: Sequence[tuple[Sequence[tuple[float, int]], float, int, dict[str, str]]],
) -> Iterable[str]:
    yield f"# HELP {name} {text}\n# TYPE {name} histogram\n"
    for bounds, total, count, lab in rows:
        cumulative = 0
        for bound, n in bounds:
            cumulative += n
            yield f"{name}_bucket{_labels({**lab, 'le': _number(bound)})} {cumulative}\n"
        yield f"{name}_bucket{_labels({**lab, 'le': '+Inf'})} {count}\n"
        yield f"{name}_sum{_labels(lab)} {_number(total)}\n"
        yield f"{name}_count{_labels(lab)} {count}\n"


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""

    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{escape(str(v))}"' for k, v in labels.items()) + "}"


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def serve_metrics(
    *batchers: object, port: int = DEFAULT_PORT, address: str = "0.0.0.0"
) -> http.server.ThreadingHTTPServer:
    """Serve `exposition(*batchers)` at /metrics on ADDRESS:PORT from a daemon thread
    (port 0: any free one, read it from `server.server_address`); `server.shutdown()`
    stops it. Snapshots are read without a lock (DynamicBatcher.metrics)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "metrics are at /metrics")
                return
            body = exposition(*batchers).encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # a scrape every 15 s is no news

    server = http.server.ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="gpuctl-metrics", daemon=True).start()
    return server
