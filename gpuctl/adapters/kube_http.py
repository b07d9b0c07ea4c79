"""The lean transport to the API server: one urllib3 pool with the kubeconfig's TLS settings
and credentials (gpuctl.adapters.kubeconfig), requests encoded with msgspec. It sends what
client-go would send for the same context; gpuctl.adapters.kube maps its failures."""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuctl.adapters import kube_auth, kube_credentials
from gpuctl.adapters.kubeconfig import Problem, Target


class HttpFailure(Exception):
    """A non-2xx answer: its status, reason phrase and body (a Status, usually)."""

    def __init__(self, status: int, reason: str | None, body: bytes | None = None):
        super().__init__(f"HTTP {status}: {reason}")
        self.status, self.reason, self.body = status, reason, body


def _user_agent() -> str:
    from gpuctl import __version__

    return f"gpuctl/{__version__}"


class Transport:
    """Requests to one API server, as the kubeconfig target says to make them."""

    def __init__(
        self,
        target: Target,
        deadline: float,
        retries: Any,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ):
        """CLOCK times a tokenFile's reads, WALL_CLOCK a plugin credential's expiry."""
        import urllib3

        self.host = target.server
        self.headers = urllib3.HTTPHeaderDict(
            {"Accept": "application/json", "User-Agent": _user_agent()}
        )
        for name, value in target.headers:  # a name may come more than once
            self.headers.add(name, value)
        self._bearer: Callable[[], str] | None = None
        self._plugin: kube_credentials.Plugin | None = None
        self._plugin_cert: dict[str, str] | None = None  # the plugin credential in the pool
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
            self.headers["Authorization"] = f"Bearer {target.token}"
        elif target.basic:
            self.headers.update(urllib3.make_headers(basic_auth=":".join(target.basic)))
        self._target, self._retries, self._lock = target, retries, threading.Lock()
        self._pool = _pool(target, retries)

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, str | None] | None,
        body: Any,
        content_type: str,
        timeout: Any,
    ):
        """Send one request; the unread response of a 2xx answer, else HttpFailure."""
        import msgspec
        import urllib3

        url = self.host + path
        pairs = [(k, v) for k, v in (query or {}).items() if v is not None]
        if pairs:
            from urllib.parse import urlencode

            url += "?" + urlencode(pairs)
        headers = urllib3.HTTPHeaderDict(self.headers)
        used = self._credential(headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = msgspec.json.encode(body)
        if isinstance(timeout, tuple):
            timeout = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        elif timeout is not None:
            timeout = urllib3.Timeout(total=timeout)
        resp = self._pool.request(
            method, url, body=data, headers=headers, timeout=timeout, preload_content=False
        )
        if not 200 <= resp.status < 300:
            failure = HttpFailure(resp.status, resp.reason, resp.data)
            resp.release_conn()
            if resp.status == 401 and self._plugin is not None and used is not None:
                self._plugin.rejected(used)
            raise failure
        return resp

    def _credential(self, headers: Any) -> dict[str, str] | None:
        """Put the current bearer token in HEADERS; with a plugin, return the credential
        used (a new client certificate takes a new pool, as client-go closes the
        connections of the old one)."""
        if self._bearer is not None:
            headers["Authorization"] = f"Bearer {self._bearer()}"
            return None
        if self._plugin is None:
            return None
        fields = self._plugin()
        if "token" in fields:
            headers["Authorization"] = f"Bearer {fields['token']}"
        elif fields != self._plugin_cert:
            with self._lock:
                if fields != self._plugin_cert:
                    self._plugin_cert = _with_certificate(self._target, fields)
                    old, self._pool = self._pool, _pool(self._target, self._retries)
                    old.clear()
        return fields

    def close(self) -> None:
        self._pool.clear()


def _with_certificate(target: Target, fields: dict[str, str]) -> dict[str, str] | None:
    """Put a plugin credential's client certificate and key, if it is one, in TARGET;
    the credential when it is one, else None."""
    if "client-certificate-data" not in fields:
        return None
    target.cert_data = base64.b64decode(fields["client-certificate-data"])
    target.key_data = base64.b64decode(fields["client-key-data"])
    target.cert_file = target.key_file = None
    return fields


def _pool(target: Target, retries: Any):
    """The connection pool of TARGET's TLS settings (and client certificate)."""
    import urllib3

    # kept connections: the official client keeps 5 a core; a command's parallel lists,
    # watches and abandoned (timed-out) requests stay well under 10
    pool: dict[str, Any] = {"retries": retries, "maxsize": 10}
    if target.server.startswith("https:"):
        pool["ssl_context"] = _tls(target)
        if target.tls_server_name:
            pool["server_hostname"] = target.tls_server_name
        if target.insecure:
            pool["cert_reqs"] = "CERT_NONE"
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    return _manager(target, pool)


def _tls(target: Target):
    """The SSL context of the cluster's CA (or the system's) and the user's client
    certificate; Problem when one cannot be loaded."""
    import ssl

    from urllib3.util.ssl_ import create_urllib3_context

    ctx = create_urllib3_context()
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


def _manager(target: Target, pool: dict[str, Any]):
    """A PoolManager, or a ProxyManager for the cluster's proxy-url (else the environment's
    HTTPS_PROXY/HTTP_PROXY, less NO_PROXY, as Go's http.ProxyFromEnvironment)."""
    import urllib3

    proxy = target.proxy_url or _environment_proxy(target.server)
    if not proxy:
        return urllib3.PoolManager(**pool)
    if proxy.startswith("socks"):
        try:
            from urllib3.contrib.socks import SOCKSProxyManager
        except ImportError:
            raise Problem(
                f"cluster of context {target.context!r}: a socks5 proxy-url needs PySocks "
                "(pip install 'urllib3[socks]')"
            ) from None
        return SOCKSProxyManager(proxy, **pool)
    return urllib3.ProxyManager(proxy, **pool)


def _environment_proxy(server: str) -> str | None:
    names = (
        ("https_proxy", "HTTPS_PROXY")
        if server.startswith("https:")
        else ("http_proxy", "HTTP_PROXY")
    )
    proxy = next((os.environ[n] for n in names if os.environ.get(n)), None)
    if not proxy:
        return None
    from urllib.parse import urlsplit
    from urllib.request import proxy_bypass_environment  # type: ignore[attr-defined]

    host = urlsplit(server).hostname or ""
    if host == "localhost" or host.startswith("127.") or host == "::1":
        return None  # Go never proxies a loopback address
    return None if proxy_bypass_environment(host) else proxy


def first_line(e: object) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
