"""Prometheus HTTP API client (instant queries), with every failure turned into one
actionable gpuctl error. Standard library only: a query is one POST and a JSON answer."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any, TypeVar

from gpuctl.adapters import vector_stream
from gpuctl.common.errors import BackendError, UsageError

Sample = tuple[dict[str, Any], float]
_TEXT = {str}
T = TypeVar("T")

HINT_URL = "pass the Prometheus base URL with --prometheus or GPUCTL_PROMETHEUS_URL, e.g. http://prometheus.monitoring:9090"


class Prometheus:
    """One Prometheus server. `queries_sent` counts the HTTP queries made so far."""

    def __init__(self, url: str, timeout: float = 10.0):
        from urllib.parse import urlsplit, urlunsplit

        text = (url or "").strip()
        if any(c.isspace() or not c.isprintable() for c in text):
            raise UsageError(
                f"bad Prometheus URL {text!r}: spaces or control characters", hint=HINT_URL
            )
        try:
            parts = urlsplit(text)
            _ = parts.port  # raises ValueError on a bad port
        except ValueError as e:
            raise UsageError(f"bad Prometheus URL {text!r}: {e}", hint=HINT_URL) from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(
                f"bad Prometheus URL {text!r}: expected http(s)://HOST[:PORT][/PATH]", hint=HINT_URL
            )
        if parts.query or parts.fragment:
            raise UsageError(
                f"bad Prometheus URL {text!r}: no query string or fragment expected", hint=HINT_URL
            )
        self._auth = None
        if parts.username is not None:
            import base64

            pair = f"{parts.username}:{parts.password or ''}".encode()
            self._auth = "Basic " + base64.b64encode(pair).decode()
        netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        if parts.port:
            netloc += f":{parts.port}"
        # Shown in messages: never the credentials.
        self.url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.timeout = timeout
        self.queries_sent = 0
        self._count_lock = threading.Lock()

    def query(self, expr: str, consume: Callable[[Iterator[Sample]], T] = list) -> T:  # type: ignore[assignment]
        """An instant query: its samples (labels, value), value a float (NaN kept as NaN),
        passed to `consume` as they are decoded; what it returns is returned (by default
        the list of samples). Memory holds a slice of the answer, not all of it."""
        import urllib.error
        import urllib.parse
        import urllib.request

        request = urllib.request.Request(
            self.url + "/api/v1/query",
            data=urllib.parse.urlencode({"query": expr}).encode(),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
                "User-Agent": "gpuctl",
            },
        )
        if self._auth:
            request.add_header("Authorization", self._auth)
        with self._count_lock:
            self.queries_sent += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                try:
                    return consume(self._samples(response.read))
                except vector_stream.NotAVectorStream as e:
                    body = e.head + response.read()
        except urllib.error.HTTPError as e:
            raise self._http_error(e) from None
        except urllib.error.URLError as e:
            reason = getattr(e.reason, "strerror", None) or str(e.reason)
            raise BackendError(
                f"cannot reach Prometheus at {self.url}: {reason}",
                hint="check the URL and that Prometheus is running; " + HINT_URL,
            ) from None
        except (TimeoutError, OSError) as e:
            what = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
            raise BackendError(
                f"cannot reach Prometheus at {self.url}: {what} (after {self.timeout:g} s)",
                hint="check the URL and that Prometheus is running",
            ) from None
        return consume(iter(self._vector(body)))

    def _samples(self, read) -> Iterator[Sample]:
        try:
            for batch in vector_stream.batches(read):
                labels = [item["metric"] for item in batch]
                values = [float(item["value"][1]) for item in batch]
                # Every label set an object (else dict.values raises) of text (C speed).
                if not _TEXT.issuperset(map(type, chain.from_iterable(map(dict.values, labels)))):
                    raise TypeError
                yield from zip(labels, values)
        except (ValueError, TypeError, KeyError, IndexError, RecursionError):
            raise BackendError(f"Prometheus at {self.url} gave a malformed sample") from None

    def _http_error(self, e) -> BackendError:
        detail = ""
        try:
            answer = json.loads(e.read() or b"null")
            if isinstance(answer, dict) and answer.get("error"):
                detail = f": {answer.get('errorType', 'error')}: {answer['error']}"
        except (ValueError, OSError):
            pass
        hints = {
            401: "Prometheus wants credentials: put them in the URL (https://user:pass@host)",
            403: "Prometheus refused these credentials",
            404: f"no /api/v1/query under {self.url}: is this the Prometheus base URL?",
        }
        return BackendError(
            f"Prometheus at {self.url} answered HTTP {e.code} {e.reason}{detail}",
            hint=hints.get(e.code, HINT_URL if e.code < 500 else None),
        )

    def _vector(self, body: bytes) -> list:
        try:
            answer = json.loads(body)
            status, data = answer["status"], answer.get("data")
        except (ValueError, TypeError, KeyError):
            raise BackendError(
                f"{self.url} did not answer like a Prometheus server "
                "(no JSON status from /api/v1/query)",
                hint=HINT_URL,
            ) from None
        if status != "success":
            raise BackendError(
                f"Prometheus at {self.url} rejected a query: "
                f"{answer.get('errorType', 'error')}: {answer.get('error', '?')}"
            )
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise BackendError(
                f"Prometheus at {self.url} gave an unexpected answer "
                f"(resultType {data.get('resultType') if isinstance(data, dict) else None!r})"
            )
        try:
            return [(item["metric"], float(item["value"][1])) for item in data.get("result") or ()]
        except (KeyError, IndexError, TypeError, ValueError):
            raise BackendError(f"Prometheus at {self.url} gave a malformed sample") from None

    def query_all(self, exprs: list, consumers: list | None = None) -> list:
        """Several instant queries, sent concurrently (each evaluated at the server's now);
        each answer goes to its consumer (see `query`), by default into a list."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(exprs)) as pool:
            futures = [
                pool.submit(self.query, e, *([consumers[i]] if consumers else []))
                for i, e in enumerate(exprs)
            ]
            return [f.result() for f in futures]
