"""`gpuctl sched extender`: kube-scheduler's HTTP extender, serving the verbs of
gpuctl/sched/core/extender.py over a view of the cluster kept by two watches (nodes, pods),
never listed per request.

Each watch round starts with a full list (a resync that also drops what was deleted while
no watch ran), then follows the changes until the server ends the watch. /healthz answers
200 once the first resync is done (the readiness probe), 503 before. Known limit: a pod
bound by kube-scheduler is in the view only when its watch event arrives (milliseconds), so
a pod scored in between does not see it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from gpuctl.common.errors import GpuctlError
from gpuctl.sched.core.extender import ClusterView

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube

FILTER, PRIORITIZE, HEALTHZ = "/filter", "/prioritize", "/healthz"
RETRY_S = 1.0
MAX_BODY = 64 << 20  # an ExtenderArgs with every node of a 5,000-node cluster fits well


class Extender:
    """The view and the lock every verb and watch event takes."""

    def __init__(self, view: ClusterView):
        self.view = view
        self.lock = threading.Lock()
        self.ready = threading.Event()

    def answer(self, path: str, args: dict[str, Any]) -> Any:
        with self.lock:
            if path == FILTER:
                return self.view.filter(args)
            return self.view.prioritize(args)


def server(extender: Extender, host: str, port: int) -> ThreadingHTTPServer:
    """The HTTP server (not yet serving): POST /filter, /prioritize; GET /healthz."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # kube-scheduler's client keeps connections alive
        # headers and body go out in two writes: with Nagle's algorithm the second waits
        # for the client's delayed ACK (40 ms on Linux)
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            if self.path != HEALTHZ:
                return self._send(404, {"error": "not found"})
            self._send(200 if extender.ready.is_set() else 503, {"ready": extender.ready.is_set()})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path not in (FILTER, PRIORITIZE) or not 0 < length <= MAX_BODY:
                return self._send(404 if self.path not in (FILTER, PRIORITIZE) else 400, {})
            try:
                args = json.loads(self.rfile.read(length))
            except ValueError as e:
                return self._send(400, {"error": f"not JSON: {e}"})
            if not extender.ready.is_set():
                # an error makes kube-scheduler retry the pod later (or, ignorable, skip us)
                return self._send(200, {"error": "gpuctl extender: cluster view not synced yet"})
            self._send(200, extender.answer(self.path, args if isinstance(args, dict) else {}))

        def _send(self, code: int, body: Any) -> None:
            data = json.dumps(body, separators=(",", ":")).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would flood the log: kube-scheduler calls per pod

    return ThreadingHTTPServer((host, port), Handler)


def keep_in_sync(
    extender: Extender, connect: Callable[[], Kube], stop: threading.Event, quiet_s: int = 60
) -> None:
    """Resync, then follow nodes and pods, round after round, until `stop` is set."""
    while not stop.is_set():
        try:
            _round(extender, connect, stop, quiet_s)
        except GpuctlError:
            stop.wait(RETRY_S)  # the API server is away: serve the last view, try again


def _round(
    extender: Extender, connect: Callable[[], Kube], stop: threading.Event, quiet_s: int
) -> None:
    view = extender.view
    with connect() as kube:
        nodes, pods = kube.list_objects("Node"), kube.list_objects("Pod")
        with extender.lock:
            view.replace(nodes, pods)
            _ = view.placement  # built now, not in the first request
        extender.ready.set()
        pod_watch = threading.Thread(
            target=_follow,
            args=(extender, kube, "Pod", view.pod_event, stop, quiet_s),
            daemon=True,
        )
        pod_watch.start()
        _follow(extender, kube, "Node", view.node_event, stop, quiet_s)
        pod_watch.join()


def _follow(
    extender: Extender,
    kube: Kube,
    kind: str,
    apply: Callable[[str, dict[str, Any]], None],
    stop: threading.Event,
    quiet_s: int,
) -> None:
    try:
        for event in kube.watch(kind, timeout_seconds=quiet_s):
            if stop.is_set():
                return
            if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                with extender.lock:
                    apply(event["type"], event["object"])
    except GpuctlError:
        return  # the round ends; the next one resyncs
