"""`gpuctl sched extender`: kube-scheduler's HTTP extender, serving the verbs of
gpuctl/sched/core/extender.py over a view of the cluster kept by two watches (nodes, pods),
never listed per request.

The view is kept as client-go's informers keep theirs (gpuctl.k8s.informer): one list of
nodes and one of pods, then watches from the lists' resourceVersion with bookmarks, each
resuming from the newest resourceVersion seen when the server ends it; only a 410 Gone
(the server no longer keeps events that old) lists that kind again, which also drops what
was deleted meanwhile. /healthz answers 200 once the first lists are in (the readiness
probe), 503 before. Known limit: a pod
bound by kube-scheduler is in the view only when its watch event arrives (milliseconds), so
a pod scored in between does not see it.

What kube-scheduler does with an answer (pkg/scheduler/extender.go, schedule_one.go): any
status but 200, or a filter result with an Error, fails that pod's scheduling cycle (the pod
is tried again later; an `ignorable` extender is skipped instead); a failed prioritize only
leaves the extender's scores out. So a request no Go extender could decode is answered 400
with the reason (one log line, never a dropped connection), a request before the first
resync gets an Error (filter) or 503 (prioritize), and a fault of gpuctl's own 500.
"""

from __future__ import annotations

import errno
import json
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from typing import TYPE_CHECKING, Any, TypeVar

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.common.text import printable
from gpuctl.sched.core import wire
from gpuctl.sched.core.extender import ClusterView, pod_of, slim_node, slim_pod

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube
    from gpuctl.k8s.informer import Informer

T = TypeVar("T")

VERBS = {"/filter": "filter", "/prioritize": "prioritize"}
HEALTHZ = "/healthz"
RETRY_S = 1.0
# an ExtenderArgs with every node's name of a 5,000-node cluster is ~100 kB; with Node
# objects (nodeCacheCapable: false) each node is 5–30 kB: 64 MiB holds 2,000 or more
MAX_BODY = 64 << 20
DRAIN_S = 2.0  # how long a body left unread is drained before the connection is closed
NOT_SYNCED = "gpuctl extender: cluster view not synced yet"


@dataclass(frozen=True)
class Log:
    """Where the extender's lines go: one line each, outside text made printable; debug
    lines only when `debug`."""

    write: Callable[[str], None]
    debug_on: bool = False

    def info(self, text: str) -> None:
        self.write(printable(text))

    def debug(self, text: str) -> None:
        if self.debug_on:
            self.write(printable(text))


class Extender:
    """The view, the lock every verb and watch event takes, and the log."""

    def __init__(self, view: ClusterView, log: Log):
        self.view = view
        self.log = log
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self._since: list[tuple[bool, str, dict[str, Any]]] | None = None  # see rebuild

    # --- what the watches tell (each under self.lock) ---------------------------------------

    def node_event(self, kind: str, obj: dict[str, Any]) -> None:
        self.view.node_event(kind, obj)
        if self._since is not None:
            self._since.append((True, kind, obj))

    def pod_event(self, kind: str, obj: dict[str, Any]) -> None:
        self.view.pod_event(kind, obj)
        if self._since is not None:
            self._since.append((False, kind, obj))

    def replace(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        """The view made again from these lists, in place (after a list: the served view
        must not miss what the list dropped); a rebuild under way is dropped."""
        self._since = None
        self.view.replace(nodes, pods)
        _ = self.view.placement  # built now, not in the next request
        self.log.debug(self.synced())

    def rebuild(
        self, nodes: Callable[[], Iterable[Any]], pods: Callable[[], Iterable[Any]]
    ) -> None:
        """The view made again from the objects NODES and PODS give (read under the lock),
        built outside the lock so that requests are not held behind it (seconds at 100,000
        pods); the events that arrive meanwhile go to the served view and are replayed onto
        the new one, which is then swapped in. A list meanwhile (`replace`) wins."""
        with self.lock:
            node_objects, pod_objects = nodes(), pods()
            self._since = []
        view = ClusterView(self.view.label_key)
        try:
            view.replace(node_objects, pod_objects)
            _ = view.placement
        except BaseException:
            with self.lock:
                self._since = None
            raise
        with self.lock:
            since, self._since = self._since, None
            if since is None:
                return
            for is_node, kind, obj in since:
                (view.node_event if is_node else view.pod_event)(kind, obj)
            _ = view.placement  # made again if a node changed meanwhile
            self.view = view
            self.log.debug(self.synced())

    def synced(self) -> str:
        view = self.view
        return f"cluster view synced: {len(view.nodes)} nodes, {len(view.pods)} bound pods"

    def answer(self, verb: str, request: wire.Request) -> tuple[int, Any]:
        """The HTTP status and body that answer VERB for REQUEST."""
        if not self.ready.is_set():
            self.log.debug(f"{verb}: {NOT_SYNCED}")
            if verb == "filter":
                return 200, wire.filter_error(NOT_SYNCED)
            return 503, _error(NOT_SYNCED)
        pod = pod_of(request.pod, self.view.label_key)
        if not pod.asks_gpu:
            self.log.debug(
                f"{verb}: pod {pod.key} asks for no GPU: all {len(request.names)} candidates "
                "pass, unscored (the extender's managedResources should keep it away)"
            )
        with self.lock:
            if verb == "filter":
                return 200, self.view.filter(request)
            return 200, self.view.prioritize(request)


def server(
    extender: Extender, host: str, port: int, max_body: int = MAX_BODY
) -> ThreadingHTTPServer:
    """The HTTP server, bound but not yet serving: POST /filter, /prioritize; GET /healthz.
    GpuctlError, exit code as docs/errors.md says, when it cannot listen there."""
    log = extender.log

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # kube-scheduler's client keeps connections alive
        # headers and body go out in two writes: with Nagle's algorithm the second waits
        # for the client's delayed ACK (40 ms on Linux)
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            if path in VERBS:
                return self._refuse(405, f"{path} takes POST", Allow="POST")
            if path != HEALTHZ:
                return self._refuse(404, f"no {path}: POST /filter or /prioritize, GET /healthz")
            ready = extender.ready.is_set()
            self._send(200 if ready else 503, {"ready": ready})

        def do_POST(self) -> None:
            path = self.path.partition("?")[0]
            verb = VERBS.get(path)
            if verb is None:
                self._discard()
                return self._refuse(404, f"no verb {path}: POST /filter or /prioritize")
            try:
                request = wire.decode(self._body())
            except wire.BadRequest as e:
                return self._refuse(400, e.reason)
            try:
                status, body = extender.answer(verb, request)
            except Exception as e:  # a fault of gpuctl's own: one line, the pod tried again
                log.debug(traceback.format_exc())
                return self._refuse(500, f"unexpected {type(e).__name__}: {e} (a bug in gpuctl)")
            self._send(status, body)

        def _body(self) -> bytes:
            """The request's body, or BadRequest (the connection then closes unless the
            body was read whole)."""
            if self.headers.get("Transfer-Encoding") is not None:
                self.close_connection = True
                raise wire.BadRequest("a chunked body is not read: send a Content-Length")
            text = self.headers.get("Content-Length")
            if text is None or not (text.isascii() and text.isdigit()):
                self.close_connection = True
                raise wire.BadRequest(f"Content-Length {text!r}: expected a number of bytes")
            length = int(text)
            if length > max_body:
                self._discard(length)
                raise wire.BadRequest(f"a body of {length:,} bytes: the limit is {max_body:,}")
            body = self.rfile.read(length)
            if len(body) < length:
                self.close_connection = True
                raise wire.BadRequest(f"the body ended after {len(body):,} of {length:,} bytes")
            content_type = self.headers.get("Content-Type", "application/json")
            if content_type.partition(";")[0].strip().lower() != "application/json":
                raise wire.BadRequest(f"Content-Type {content_type!r}: send application/json")
            return body

        def _discard(self, length: int | None = None) -> None:
            """Read and drop a body left unread (for DRAIN_S at most), then close: closed
            with data unread, the socket would reset and lose the answer."""
            self.close_connection = True
            if length is None:
                text = self.headers.get("Content-Length") or "0"
                length = int(text) if text.isascii() and text.isdigit() else 0
            self.connection.settimeout(DRAIN_S)
            try:
                while length > 0 and (chunk := self.rfile.read1(min(length, 1 << 20))):
                    length -= len(chunk)
            except OSError:
                pass

        def _refuse(self, code: int, reason: str, **headers: str) -> None:
            log.info(f"{self.command} {self.path} from {self.client_address[0]}: {code} {reason}")
            self._send(code, _error(reason), **headers)

        def _send(self, code: int, body: Any, **headers: str) -> None:
            data = json.dumps(body, separators=(",", ":")).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would flood the log: kube-scheduler calls per pod

        def log_error(self, format: str, *args: Any) -> None:
            # what http.server refuses itself (a malformed request line or headers)
            log.info(f"from {self.client_address[0]}: {format % args}")

    class Server(ThreadingHTTPServer):
        def server_bind(self) -> None:
            # HTTPServer's own would look this address's name up (reverse DNS): not needed
            TCPServer.server_bind(self)
            self.server_name, self.server_port = host, self.server_address[1]

        def handle_error(self, request: Any, client_address: Any) -> None:
            # a fault in http.server, or a client gone (usual: at debug level): one line
            error = sys.exc_info()[1]
            gone = isinstance(error, ConnectionError)
            say = log.debug if gone else log.info
            say(f"connection from {client_address[0]}: {type(error).__name__}: {error}")

    try:
        Server.address_family = _family(host, port)
        return Server((host, port), Handler)
    except OSError as e:
        raise _listen_error(host, port, e) from None


def url(host: str, port: int) -> str:
    return f"http://{_address(host, port)}"


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _error(reason: str) -> dict[str, str]:
    return {"Error": reason}


def _family(host: str, port: int) -> socket.AddressFamily:
    """The address family of HOST (IPv4 or IPv6), as the socket will bind it."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return found[0][0]


def _listen_error(host: str, port: int, e: OSError) -> GpuctlError:
    where = _address(host, port)
    if isinstance(e, socket.gaierror):
        if e.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)):
            return UsageError(f"--host {host!r}: no such address ({e.strerror})")
        return GpuctlError(f"cannot look up --host {host!r}: {e.strerror}")
    if e.errno == errno.EADDRNOTAVAIL:
        return UsageError(
            f"--host {host!r} is not an address of this machine",
            hint="127.0.0.1 listens on this machine only, 0.0.0.0 on every interface",
        )
    if e.errno == errno.EADDRINUSE:
        return GpuctlError(
            f"cannot listen on {where}: the port is in use",
            hint="stop what listens there, or give another --port",
        )
    if e.errno == errno.EACCES:
        return GpuctlError(
            f"cannot listen on {where}: permission denied",
            hint="ports below 1024 need root (or CAP_NET_BIND_SERVICE): give --port 1024 or above",
        )
    return GpuctlError(f"cannot listen on {where}: {e.strerror or e}")


def keep_in_sync(
    extender: Extender, connect: Callable[[], Kube], stop: threading.Event, quiet_s: int = 60
) -> None:
    """List nodes and pods once, then follow both until `stop` is set, as client-go's
    informers do (gpuctl.k8s.informer): each watch resumes from the newest resourceVersion
    seen; only a 410 Gone lists again. The stores keep of each object only what the view
    reads (slim_pod, slim_node). The typical shapes are made again from the pods kept each
    time a pod watch ends, outside the lock (Extender.rebuild). A failure is logged once
    (until another one) and retried every RETRY_S; the last view is served meanwhile."""
    retry = _Retry(extender.log, stop)
    kube = retry.until_done(connect)
    if kube is None:
        return
    with kube:

        def replace(_: object) -> None:  # under extender.lock, by either informer
            if pods.lists:  # not at the nodes' first list: the view waits for the pods'
                extender.replace(nodes.objects(), pods.objects())

        nodes, pods = (
            kube.informer(
                kind, timeout_seconds=quiet_s, on_change=apply, on_replace=replace,
                guard=extender.lock, transform=slim,
            )
            for kind, apply, slim in (
                ("Node", extender.node_event, slim_node), ("Pod", extender.pod_event, slim_pod)
            )
        )  # fmt: skip
        if retry.until_done(lambda: _sync(extender, nodes, pods)) is None:
            return

        def refresh() -> None:  # the typical shapes again, from the pods kept: no list
            extender.rebuild(nodes.objects, pods.objects)

        pod_watch = threading.Thread(target=_follow, args=(pods, retry, stop, refresh), daemon=True)
        pod_watch.start()
        _follow(nodes, retry, stop)
        pod_watch.join()


def _sync(extender: Extender, nodes: Informer, pods: Informer) -> bool:
    nodes.relist()
    pods.relist()
    extender.log.info(extender.synced())
    extender.ready.set()
    return True


def _follow(
    informer: Informer,
    retry: _Retry,
    stop: threading.Event,
    after: Callable[[], None] = lambda: None,
) -> None:
    """One watch after another, each from where the last one ended; AFTER each."""
    while not stop.is_set():
        if retry.until_done(lambda: informer.follow(stop.is_set)) is not None:
            after()


class _Retry:
    """Runs a step until it succeeds or `stop` is set: a failure is logged once (until
    another one) and the step retried every RETRY_S."""

    def __init__(self, log: Log, stop: threading.Event):
        self.log, self.stop, self.said = log, stop, ""

    def until_done(self, step: Callable[[], T]) -> T | None:
        while not self.stop.is_set():
            try:
                done = step()
                self.said = ""
                return done
            except GpuctlError as e:
                if str(e) != self.said:  # the API server is away: serve the last view
                    self.said = str(e)
                    self.log.info(f"cannot read the cluster (retrying every {RETRY_S:g} s): {e}")
                self.stop.wait(RETRY_S)
        return None
