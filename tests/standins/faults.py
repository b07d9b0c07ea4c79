"""A fault-injecting HTTP proxy: a real HTTP/1.1 server in front of a real stand-in (the
Kubernetes API emulator, Prometheus) that passes requests through, except those a rule
picks, which it delays, drops, trickles or answers itself.

    proxy = fault_proxy(kube.url)
    proxy.on("POST", "/apis/batch/v1/.*/jobs", drop_answer())  # the Job is made, no answer
    proxy.on("GET", "/api/v1/query", trickle(b"{...}", every_s=2))

A rule applies to the n-th matching request (`nth`, 1 = the first) or to every one
(`nth=None`); `times` limits how often. `proxy.requests` records what arrived (method,
path, headers), `rule.fired` is an Event set once the rule has acted.
"""

from __future__ import annotations

import http.client
import http.server
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host"}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Action:
    """What a rule does with a request: `forward` it upstream first (the server processes
    it), then `respond` to the client (or not)."""

    forward: bool
    respond: Callable[[Handler, Answer | None], None]


@dataclass
class Rule:
    method: str
    path: re.Pattern
    action: Action
    nth: int | None = 1
    times: int | None = None
    seen: int = 0
    applied: int = 0
    fired: threading.Event = field(default_factory=threading.Event)

    def picks(self, method: str, path: str) -> bool:
        if method != self.method or not self.path.fullmatch(path):
            return False
        self.seen += 1
        if self.times is not None and self.applied >= self.times:
            return False
        return self.nth is None or self.seen == self.nth


# ---- actions ------------------------------------------------------------------------------


def drop_answer() -> Action:
    """Forward the request (the server carries it out), then close the connection without
    a word: the client never learns the outcome."""
    return Action(True, lambda h, answer: h.drop())


def drop_request() -> Action:
    """Close the connection without forwarding anything."""
    return Action(False, lambda h, answer: h.drop())


def delay(seconds: float, forward: bool = True) -> Action:
    """Forward, then hold the answer `seconds` before sending it."""

    def respond(h: Handler, answer: Answer | None) -> None:
        h.proxy.sleep(seconds)
        h.send(answer or Answer(504, {}, b"held"))

    return Action(forward, respond)


def reply(status: int, body: bytes | str, headers: dict | None = None, forward: bool = False):
    """Answer with this instead (after forwarding when `forward`: a change is made, and the
    client is told something else, e.g. a gateway's HTML error page)."""
    data = body.encode() if isinstance(body, str) else body
    fixed = Answer(status, {"Content-Type": "application/json", **(headers or {})}, data)
    return Action(forward, lambda h, answer: h.send(fixed))


def race_creator(create: Callable[[dict], object]) -> Action:
    """Another client wins a race: before gpuctl's create reaches the server, CREATE makes an
    object from what gpuctl sent, less gpuctl's annotations (the same name, the same data);
    gpuctl's request is then dropped unanswered, so it must read back to learn the outcome."""

    def respond(h: Handler, answer: Answer | None) -> None:
        theirs = json.loads(h.request_body)
        theirs["metadata"].pop("annotations", None)
        create(theirs)
        h.drop()

    return Action(False, respond)


def meanwhile(change: Callable[[], object]) -> Action:
    """Another client changes the object first: CHANGE runs, then gpuctl's request goes
    upstream and its answer back, as the server gives it."""

    def respond(h: Handler, answer: Answer | None) -> None:
        change()
        h.send(h.forward(h.request_body) or Answer(504, {}, b"no upstream"))

    return Action(False, respond)


def redirect(location: str, status: int = 307) -> Action:
    return reply(status, b"", {"Location": location, "Content-Type": "text/plain"})


def trickle(body: bytes | None = None, every_s: float = 2.0, forward: bool = False) -> Action:
    """Send the answer (this body, or the server's) one byte every `every_s` seconds."""

    def respond(h: Handler, answer: Answer | None) -> None:
        data = body if body is not None else (answer.body if answer else b"")
        status = 200 if body is not None or answer is None else answer.status
        h.send(Answer(status, {"Content-Type": "application/json"}, data), every_s=every_s)

    return Action(forward, respond)


def stall_midway(seconds: float = 30) -> Action:
    """Forward, send the first half of the server's answer, then hold the rest `seconds`."""

    def respond(h: Handler, answer: Answer | None) -> None:
        assert answer is not None
        data = h.wire(answer)
        try:
            h.wfile.write(data[: len(data) - len(answer.body) // 2])
            h.wfile.flush()
        except OSError:
            return
        h.proxy.sleep(seconds)
        h.close_connection = True

    return Action(True, respond)


# ---- the server ---------------------------------------------------------------------------


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    proxy: FaultProxy  # set on the subclass made per proxy

    def log_message(self, *args) -> None:
        pass

    def _handle(self) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.request_body = body  # what the client sent, for an action to look at
        with self.proxy.lock:
            headers = dict(self.headers.items())
            if self.proxy.tls is not None:  # who the client's certificate says it is
                subject = dict(
                    x[0] for x in (self.connection.getpeercert() or {}).get("subject", ())
                )
                headers["x-client-certificate-cn"] = subject.get("commonName", "")
            self.proxy.requests.append((self.command, parsed.path, headers))
            rule = next((r for r in self.proxy.rules if r.picks(self.command, parsed.path)), None)
            if rule is not None:
                rule.applied += 1
        if rule is None:
            self.pass_through(body)
            return
        answer = self.forward(body) if rule.action.forward else None
        rule.fired.set()
        rule.action.respond(self, answer)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

    def forward(self, body: bytes) -> Answer | None:
        """The upstream's whole answer, or None when there is no upstream."""
        if self.proxy.upstream is None:
            return None
        conn = self.proxy.connect()
        try:
            conn.request(self.command, self.path, body=body or None, headers=self._headers())
            resp = conn.getresponse()
            data = resp.read()
            headers = {k: v for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP}
            headers.pop("Content-Length", None)
            return Answer(resp.status, headers, data)
        finally:
            conn.close()

    def pass_through(self, body: bytes) -> None:
        """Forward and stream the answer back as it comes (watches, followed logs)."""
        if self.proxy.upstream is None:
            self.send(Answer(404, {"Content-Type": "text/plain"}, b"no upstream"))
            return
        conn = self.proxy.connect(timeout=None)
        try:
            conn.request(self.command, self.path, body=body or None, headers=self._headers())
            resp = conn.getresponse()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while chunk := resp.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            conn.close()

    def _headers(self) -> dict[str, str]:
        return {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}

    @staticmethod
    def wire(answer: Answer) -> bytes:
        """The answer as it goes over the connection: status line, headers, body."""
        head = f"HTTP/1.1 {answer.status} {http.client.responses.get(answer.status, 'X')}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in answer.headers.items())
        head += f"Content-Length: {len(answer.body)}\r\n\r\n"
        return head.encode("latin-1") + answer.body

    def send(self, answer: Answer, every_s: float = 0) -> None:
        data = self.wire(answer)
        try:
            if not every_s:
                self.wfile.write(data)
                self.wfile.flush()
                return
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                if self.proxy.sleep(every_s):
                    break
        except OSError:  # the client gave up
            pass
        self.close_connection = True

    def drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(2)
        except OSError:
            pass


class FaultProxy:
    """A proxy in front of UPSTREAM (None: it answers only by its rules); with TLS (a
    server-side ssl.SSLContext) an https one, which records the common name of the client
    certificate a request came with (header x-client-certificate-cn)."""

    def __init__(self, upstream: str | None, tls=None):
        self.upstream = urllib.parse.urlsplit(upstream) if upstream else None
        self.tls = tls
        self.rules: list[Rule] = []
        self.requests: list[tuple[str, str, dict]] = []
        self.lock = threading.Lock()
        self._stopping = threading.Event()
        handler = type("ProxyHandler", (Handler,), {"proxy": self})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def on(
        self, method: str, path: str, action: Action, nth: int | None = 1, times: int | None = None
    ) -> Rule:
        """Apply `action` to the nth request (every one when None) of METHOD on a path
        matching the regular expression `path`."""
        rule = Rule(method.upper(), re.compile(path), action, nth, times)
        with self.lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()

    def seen(self, method: str, path: str) -> list[dict]:
        """Headers of each request of METHOD on a path matching `path`."""
        with self.lock:
            return [h for m, p, h in self.requests if m == method.upper() and re.fullmatch(path, p)]

    def connect(self, timeout: float | None = 30) -> http.client.HTTPConnection:
        assert self.upstream is not None and self.upstream.hostname
        return http.client.HTTPConnection(
            self.upstream.hostname, self.upstream.port, timeout=timeout
        )

    def sleep(self, seconds: float) -> bool:
        """Wait; True when the proxy is stopping."""
        return self._stopping.wait(seconds)

    def stop(self) -> None:
        self._stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


@pytest.fixture
def fault_proxy():
    """Factory: fault_proxy(upstream_url or None) -> a running FaultProxy."""
    proxies: list[FaultProxy] = []

    def start(upstream: str | None = None, tls=None) -> FaultProxy:
        proxy = FaultProxy(upstream, tls)
        proxies.append(proxy)
        return proxy

    yield start
    for p in proxies:
        p.stop()


@pytest.fixture
def proxied_kube(kube, fault_proxy, monkeypatch, tmp_path):
    """A fault proxy in front of the API emulator; gpuctl's KUBECONFIG points at the proxy
    (tests read and seed the emulator directly)."""
    from tests.standins.kube import write_kubeconfig

    proxy = fault_proxy(kube.url)
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "via-proxy", proxy.url))
    return proxy


def wait_until(condition: Callable[[], bool], seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False
