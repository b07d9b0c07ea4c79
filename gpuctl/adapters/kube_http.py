"""The lean transport to the API server: the standard library's http.client, its connections
kept for reuse, with the kubeconfig's TLS settings and credentials (gpuctl.adapters.kubeconfig),
bodies encoded with msgspec. It sends what client-go would send for the same context.

Its failures, which gpuctl.adapters.kube maps to messages (the official client's transport,
gpuctl.adapters.kube_client, raises the same): HttpFailure, an answer that is not 2xx;
Unsent, no connection was made, so the request never reached the server; TimeoutError, no
answer in time after it was sent; Broken, the connection broke after it was sent."""

from __future__ import annotations

import base64
import http.client
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

from gpuctl.adapters import kube_auth, kube_credentials
from gpuctl.adapters.kubeconfig import Problem, Target

# Only connection set-up is retried (twice, after 0.2 and 0.4 s): a request that reached the
# server is never sent again.
CONNECT_RETRIES, BACKOFF_S = 2, 0.2
# Connections kept idle for reuse: a command's parallel lists, watches and abandoned
# (timed-out) requests stay well under this.
KEPT = 10


class HttpFailure(Exception):
    """A non-2xx answer: its status, reason phrase and body (a Status, usually)."""

    def __init__(self, status: int, reason: str | None, body: bytes | None = None):
        super().__init__(f"HTTP {status}: {reason}")
        self.status, self.reason, self.body = status, reason, body


class Unsent(Exception):
    """No connection to the server could be made (name resolution, connection, a proxy or
    the TLS handshake failed): the request never reached it. `tls` when the handshake did."""

    def __init__(self, reason: str, tls: bool = False):
        super().__init__(reason)
        self.tls = tls


class Broken(Exception):
    """The connection broke after the request went out: it may have been acted on."""


class Response:
    """A 2xx answer being read: `data` (the whole body) or `stream` (its chunks as they
    come); its connection goes back for reuse once the body is read whole."""

    def __init__(self, answer: http.client.HTTPResponse, done: Callable[[bool], None]):
        self.status, self.reason = answer.status, answer.reason
        self._answer, self._give_back = answer, done

    @property
    def data(self) -> bytes:
        try:
            body = self._answer.read()
        except TimeoutError:
            self._done(False)
            raise
        except (OSError, http.client.HTTPException) as e:
            self._done(False)
            raise Broken(first_line(e) or type(e).__name__) from None
        self._done(True)
        return body

    def _done(self, whole: bool) -> None:
        """Hand the connection back, once (kept for reuse when the body was read WHOLE)."""
        give_back, self._give_back = self._give_back, lambda _: None
        give_back(whole)

    def stream(self, size: int) -> Iterator[bytes]:
        try:
            while chunk := self._answer.read1(size):
                yield chunk
        except TimeoutError:
            raise
        except (OSError, http.client.HTTPException) as e:
            raise Broken(first_line(e) or type(e).__name__) from None

    def release_conn(self) -> None:
        """Done with the answer: its connection is kept when the body was read whole."""
        self._done(self._answer.isclosed())


class _Connection(http.client.HTTPConnection):
    """One connection to the API server, or to its HTTP proxy (the server's URL then goes in
    the request line, or through a CONNECT tunnel for https); over a SOCKS proxy when `dial`
    is one; TLS when `tls` is given, checked against `server_name` (the server's through a
    tunnel, else the kubeconfig's tls-server-name) or the host."""

    def __init__(self, host: str, port: int, tls: Any, server_name: str | None, dial: Any):
        super().__init__(host, port)
        self.tls, self.server_name = tls, server_name
        if dial is not None:
            self._create_connection = dial

    def connect(self) -> None:
        super().connect()
        if self.tls is not None:
            name = self.server_name or self.host
            self.sock = self.tls.wrap_socket(self.sock, server_hostname=name)


class Transport:
    """Requests to one API server, as the kubeconfig target says to make them."""

    def __init__(
        self,
        target: Target,
        deadline: float,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ):
        """CLOCK times a tokenFile's reads, WALL_CLOCK a plugin credential's expiry."""
        self.host = target.server
        self._prefix = urlsplit(target.server).path.rstrip("/")  # e.g. behind Rancher's proxy
        # a name may come more than once (Impersonate-Group)
        self.headers = [("Accept", "application/json"), ("User-Agent", _user_agent())]
        self.headers += target.headers
        self._authorization: str | None = None  # a credential that does not change
        self._bearer: Callable[[], str] | None = None
        self._plugin: kube_credentials.Plugin | None = None
        self._plugin_cert: dict[str, str] | None = None  # the plugin credential connecting
        if target.exec_config is not None:  # the user's only credential (client-go's rule)
            exec_config = target.exec_config
            self._plugin = kube_credentials.Plugin(
                lambda: kube_auth.run_plugin(
                    exec_config, target.cluster_info, target.base, deadline, target.user
                ),
                wall_clock,
            )
            self._plugin_cert = _with_certificate(target, self._plugin())
        elif target.token_file:  # read again as it changes: client-go's cachingTokenSource
            self._bearer = kube_credentials.TokenFile(target.token_file, target.token, clock)
        elif target.token:
            self._authorization = f"Bearer {target.token}"
        elif target.basic:
            self._authorization = _basic(*target.basic)
        self._target, self._lock = target, threading.Lock()
        self._kept: list[_Connection] = []
        self._proxy_headers: list[tuple[str, str]] = []
        self._absolute = False  # the request line carries the whole URL (to an HTTP proxy)
        self._new = self._connector()

    def _connector(self) -> Callable[[], _Connection]:
        """How a new connection is made: to the server or through its proxy, with the
        target's TLS settings and client certificate."""
        target = self._target
        url = urlsplit(target.server)
        https = url.scheme == "https"
        host, port = url.hostname or "", url.port or (443 if https else 80)
        tls = _tls(target) if https else None
        proxy = proxy_of(target)
        if proxy is None:
            return lambda: _Connection(host, port, tls, target.tls_server_name, None)
        if proxy.scheme.startswith("socks"):
            dial = _socks(proxy, target)
            return lambda: _Connection(host, port, tls, target.tls_server_name, dial)
        # an http:// proxy (an https:// one is the official client's)
        auth = [("Proxy-Authorization", _basic(*_credentials(proxy)))] if proxy.username else []
        if not https:  # the proxy is sent the whole URL
            self._absolute, self._proxy_headers = True, auth

        def through_proxy() -> _Connection:
            conn = _Connection(proxy.hostname or "", proxy.port or 80, tls, None, None)
            if https:
                conn.set_tunnel(host, port, headers=dict(auth))
                conn.server_name = target.tls_server_name or host
            return conn

        return through_proxy

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, str | None] | None,
        body: Any,
        content_type: str,
        timeout: Any,
    ) -> Response:
        """Send one request; the unread response of a 2xx answer, else HttpFailure. TIMEOUT:
        (connect, read) seconds, or one figure for both, or None for none."""
        import msgspec

        target = self._prefix + path
        pairs = [(k, v) for k, v in (query or {}).items() if v is not None]
        if pairs:
            from urllib.parse import urlencode

            target += "?" + urlencode(pairs)
        if self._absolute:
            target = self.host.rstrip("/") + target[len(self._prefix) :]
        headers = self.headers + self._proxy_headers
        used = self._credential(headers)
        data = None
        if body is not None:
            headers.append(("Content-Type", content_type))
            data = msgspec.json.encode(body)
        connect_s, read_s = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        conn = self._connection(connect_s)
        try:
            conn.sock.settimeout(read_s)
            conn.putrequest(method, target)
            for name, value in headers:
                conn.putheader(name, value)
            if data is not None or method in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(data or b"")))
            conn.endheaders(data)
            answer = conn.getresponse()
        except TimeoutError:
            conn.close()
            raise
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise Broken(first_line(e) or type(e).__name__) from None
        response = Response(answer, lambda whole: self._give_back(conn, whole))
        if not 200 <= answer.status < 300:
            failure = HttpFailure(answer.status, answer.reason, response.data)
            if answer.status == 401 and self._plugin is not None and used is not None:
                self._plugin.rejected(used)
            raise failure
        return response

    def _credential(self, headers: list[tuple[str, str]]) -> dict[str, str] | None:
        """Add the current credential to HEADERS; with a plugin, return the credential
        used (a new client certificate takes new connections, as client-go closes those
        of the old one)."""
        if self._bearer is not None:
            headers.append(("Authorization", f"Bearer {self._bearer()}"))
            return None
        if self._plugin is None:
            if self._authorization:
                headers.append(("Authorization", self._authorization))
            return None
        fields = self._plugin()
        if "token" in fields:
            headers.append(("Authorization", f"Bearer {fields['token']}"))
        elif fields != self._plugin_cert:
            with self._lock:
                if fields != self._plugin_cert:
                    self._plugin_cert = _with_certificate(self._target, fields)
                    self._new = self._connector()
                    kept, self._kept = self._kept, []
                    for conn in kept:
                        conn.close()
        return fields

    def close(self) -> None:
        with self._lock:
            kept, self._kept = self._kept, []
        for conn in kept:
            conn.close()

    def _connection(self, timeout: float | None) -> _Connection:
        """A kept connection the server has not closed, else a new one (Unsent when none
        can be made after the retries)."""
        with self._lock:
            while self._kept:
                conn = self._kept.pop()
                if not _dropped(conn):
                    return conn
                conn.close()
        for attempt in range(CONNECT_RETRIES + 1):
            conn = self._new()
            conn.timeout = timeout
            try:
                conn.connect()
                return conn
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if isinstance(e, ssl.SSLError | ssl.CertificateError):
                    raise Unsent(str(e), tls=True) from None
                if attempt == CONNECT_RETRIES:
                    raise Unsent(first_line(e) or type(e).__name__) from None
            time.sleep(BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    def _give_back(self, conn: _Connection, whole: bool) -> None:
        with self._lock:
            if whole and conn.sock is not None and len(self._kept) < KEPT:
                self._kept.append(conn)
                return
        conn.close()


def _dropped(conn: _Connection) -> bool:
    """Whether the server closed the kept connection (or sent something unasked)."""
    import select

    if conn.sock is None:
        return True
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _with_certificate(target: Target, fields: dict[str, str]) -> dict[str, str] | None:
    """Put a plugin credential's client certificate and key, if it is one, in TARGET;
    the credential when it is one, else None."""
    if "client-certificate-data" not in fields:
        return None
    target.cert_data = base64.b64decode(fields["client-certificate-data"])
    target.key_data = base64.b64decode(fields["client-key-data"])
    target.cert_file = target.key_file = None
    return fields


def proxy_of(target: Target):
    """The proxy to reach the server through (urlsplit's parts): the cluster's proxy-url,
    else the environment's HTTPS_PROXY/HTTP_PROXY, less NO_PROXY, as Go's
    http.ProxyFromEnvironment; None for none."""
    proxy = target.proxy_url or _environment_proxy(target.server)
    return urlsplit(proxy) if proxy else None


def _socks(proxy: Any, target: Target) -> Callable[..., socket.socket]:
    """A dial through the SOCKS5 proxy (socks5h: the proxy resolves the name), by PySocks."""
    try:
        import socks  # type: ignore[import-untyped]
    except ImportError:
        raise Problem(
            f"cluster of context {target.context!r}: a socks5 proxy-url needs PySocks "
            "(pip install 'gpuctl[socks]')"
        ) from None
    user, password = _credentials(proxy) if proxy.username else (None, None)

    def dial(address: tuple[str, int], timeout: Any = None, source: Any = None) -> socket.socket:
        return socks.create_connection(
            address,
            timeout,
            source,
            proxy_type=socks.SOCKS5,
            proxy_addr=proxy.hostname,
            proxy_port=proxy.port or 1080,
            proxy_rdns=proxy.scheme == "socks5h",
            proxy_username=user,
            proxy_password=password,
        )

    return dial


def _credentials(url: Any) -> tuple[str, str]:
    return unquote(url.username or ""), unquote(url.password or "")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _user_agent() -> str:
    from gpuctl import __version__

    return f"gpuctl/{__version__}"


def _tls(target: Target):
    """The SSL context of the cluster's CA (or the system's) and the user's client
    certificate, TLS 1.2 at least as client-go asks; Problem when one cannot be loaded."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if target.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        try:
            if target.ca_data:
                ctx.load_verify_locations(cadata=target.ca_data.decode("ascii", "replace"))
            elif target.ca_file:
                ctx.load_verify_locations(cafile=target.ca_file)
            else:
                ctx.load_default_certs()
        except (ssl.SSLError, ValueError, OSError) as e:
            raise Problem(
                f"cluster of context {target.context!r}: its certificate-authority is not "
                f"a usable PEM certificate ({_reason(e)})"
            ) from None
    if target.cert_data or target.cert_file:
        _load_client_certificate(ctx, target)
    return ctx


def _load_client_certificate(ctx: Any, target: Target) -> None:
    """Load the user's certificate and key into CTX. Python's ssl reads them only from
    files: data is written to files of a private directory for the load, then removed."""
    import ssl
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gpuctl-tls-") as tmp:
        cert, key = target.cert_file, target.key_file
        for name, data in (("cert", target.cert_data), ("key", target.key_data)):
            if data:
                path = os.path.join(tmp, name)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                cert, key = (path, key) if name == "cert" else (cert, path)
        try:
            ctx.load_cert_chain(cert, key)
        except (ssl.SSLError, ValueError, OSError) as e:
            raise Problem(
                f"user of context {target.context!r}: its client certificate and key cannot "
                f"be used ({_reason(e)})"
            ) from None


def _reason(e: Exception) -> str:
    return getattr(e, "reason", None) or getattr(e, "strerror", None) or str(e) or type(e).__name__


def _environment_proxy(server: str) -> str | None:
    names = (
        ("https_proxy", "HTTPS_PROXY")
        if server.startswith("https:")
        else ("http_proxy", "HTTP_PROXY")
    )
    proxy = next((os.environ[n] for n in names if os.environ.get(n)), None)
    if not proxy:
        return None
    from urllib.request import proxy_bypass_environment  # type: ignore[attr-defined]

    host = urlsplit(server).hostname or ""
    if host == "localhost" or host.startswith("127.") or host == "::1":
        return None  # Go never proxies a loopback address
    return None if proxy_bypass_environment(host) else proxy


def first_line(e: object) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
