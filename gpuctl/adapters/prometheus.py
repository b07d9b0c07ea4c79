"""Prometheus HTTP API client (instant and range queries), with every failure turned into one
actionable gpuctl error. Standard library only: a query is one POST and a JSON answer."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterator
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

from gpuctl.adapters.core import vector_stream
from gpuctl.common.errors import BackendError, UsageError
from gpuctl.common.text import printable

Sample = tuple[dict[str, Any], float]
Series = tuple[dict[str, Any], list[tuple[float, float]]]  # a range query's: labels, points
T = TypeVar("T")
_TEXT = {str}
_METRIC, _VALUE, _SECOND = itemgetter("metric"), itemgetter("value"), itemgetter(1)
DEFAULT_TIMEOUT = 10.0  # seconds per query, the whole answer included
HINT_URL = "pass the Prometheus base URL with --prometheus or GPUCTL_PROMETHEUS_URL, e.g. http://prometheus.monitoring:9090"


class QueryTooLong(BackendError):
    """A query Prometheus could not finish in time or in memory (its --query.timeout or
    --query.max-samples, or gpuctl's own timeout): the same over a shorter range may pass."""


class Prometheus:
    """One Prometheus server. `queries_sent` counts the HTTP queries made so far."""

    def __init__(self, url: str, timeout: float | None = None):
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
        if timeout is None:
            from gpuctl.runtime.config import request_timeout

            timeout = request_timeout(DEFAULT_TIMEOUT)
        self.timeout = timeout
        self.queries_sent = 0
        self._count_lock = threading.Lock()
        self._in_flight: list[_Exchange] = []  # the queries under way
        self._cutting = False  # query_all was interrupted: no query may start or go on

    def query(
        self,
        expr: str,
        consume: Callable[[Iterator[Sample]], T] = list,  # type: ignore[assignment]
        at: float | None = None,
        warnings: list[str] | None = None,
    ) -> T:
        """An instant query: its samples (labels, value), value a float (NaN kept as NaN),
        passed to `consume` as they are decoded; what it returns is returned (by default
        the list of samples). Memory holds a slice of the answer, not all of it. The whole
        exchange, redirects and consume included, has `timeout` seconds. Evaluated at the
        server's now, or at the time `at` (Unix seconds). `warnings` gets the answer's
        warnings (a partial answer: a remote store that did not answer), as printable text."""

        def handle(response) -> tuple[bool, Any]:
            try:
                return True, consume(self._samples(response.read, warnings))
            except vector_stream.NotAVectorStream as e:  # an error, another shape
                return False, e.head + response.read()

        form = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        done, result = self._post("/api/v1/query", form, handle)
        if done:
            return result
        return consume(iter(self._vector(result, warnings)))

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """A range query: per series its labels and its (time, value) points, values floats.
        Meant for aggregated answers (a few series): the answer is decoded whole."""
        form = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        _, body = self._post("/api/v1/query_range", form, lambda r: (True, r.read()))
        out: list[Series] = []
        result = self._result(body, "matrix")
        if not isinstance(result, list):
            raise BackendError(f"Prometheus at {self.url} gave a malformed answer (result)")
        for item in result:
            labels = item.get("metric") if isinstance(item, dict) else None
            points = item.get("values") if isinstance(item, dict) else None
            try:
                if not isinstance(labels or {}, dict) or not isinstance(points, list):
                    raise TypeError
                out.append((labels or {}, [(float(t), float(v)) for t, v in points]))
            except (TypeError, ValueError):
                raise BackendError(
                    f"Prometheus at {self.url} gave a malformed series: {_text(repr(item))}"
                ) from None
        return out

    def _post(self, path: str, form: dict, handle: Callable[[Any], tuple[bool, Any]]):
        """POST a form to the API; `handle(response)` reads the answer. Every failure is one
        BackendError; the whole exchange has `timeout` seconds."""
        import http.client
        import urllib.error
        import urllib.parse
        import urllib.request

        request = urllib.request.Request(
            self.url + path,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
                "User-Agent": "gpuctl",
            },
            method="POST",
        )
        if self._auth:
            request.add_header("Authorization", self._auth)
        exchange = _Exchange()
        expired = threading.Event()

        def expire() -> None:  # a trickling server must not hold gpuctl: cut it off
            expired.set()
            exchange.cut_off()

        timer = threading.Timer(self.timeout, expire)
        timer.daemon = True
        with self._count_lock:
            if self._cutting:  # started after the others were cut off: not sent at all
                raise BackendError(f"query to Prometheus at {self.url} not sent: interrupted")
            self.queries_sent += 1
            self._in_flight.append(exchange)
        timer.start()
        try:
            with _opener(exchange).open(request, timeout=self.timeout) as response:
                done, result = handle(response)
        except urllib.error.HTTPError as e:
            raise self._http_error(e, str(form.get("query", ""))) from None
        except BackendError:
            if expired.is_set():  # cut off mid-answer, the decoder saw an answer cut short
                raise self._too_slow() from None
            raise
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            # A socket's own timeout (also `timeout`, on one step begun after the timer) means
            # the deadline passed too: under load it can fire before the timer's thread runs.
            if expired.is_set() or isinstance(e, TimeoutError) or isinstance(reason, TimeoutError):
                raise self._too_slow() from None
            what = getattr(reason, "strerror", None) or str(reason) or type(e).__name__
            raise BackendError(
                f"cannot reach Prometheus at {self.url}: {what}",
                hint="check the URL and that Prometheus is running; " + HINT_URL,
            ) from None
        finally:
            timer.cancel()
            with self._count_lock:
                self._in_flight.remove(exchange)
        if expired.is_set() and not done:
            raise self._too_slow()
        return done, result

    def _too_slow(self) -> BackendError:
        return QueryTooLong(
            f"Prometheus at {self.url} did not answer within {self.timeout:g} s",
            hint="check that Prometheus is healthy and the network path to it "
            "(a proxy that holds the connection?)",
        )

    def _samples(self, read, warnings: list[str] | None = None) -> Iterator[Sample]:
        """A successful vector answer's samples, a slice of the answer at a time (chained
        in C: no generator step per sample, hundreds of thousands at 40,000 GPUs)."""
        return chain.from_iterable(self._slices(read, warnings))

    def _slices(self, read, warnings: list[str] | None) -> Iterator[Iterator[Sample]]:
        """The samples of each slice of a successful vector answer."""
        decode, typed = _typed_decoder()
        tail = None if warnings is None else functools.partial(_warned, warnings)
        try:
            for batch in vector_stream.batches(read, decode=decode, tail=tail):
                try:
                    if batch and type(batch[0]) is typed:
                        try:
                            labels, values = _decoded_typed(batch)
                        except ValueError:  # a value that is no number: named below
                            batch = [{"metric": t.metric, "value": list(t.value)} for t in batch]
                        else:
                            yield zip(labels, values)
                            continue
                    labels, values = _decoded(batch)
                except (AttributeError, TypeError, KeyError, IndexError, ValueError):
                    problem = next(filter(None, map(_sample_problem, batch)), "not a sample")
                    raise BackendError(
                        f"Prometheus at {self.url} gave a malformed sample: {problem}"
                    ) from None
                yield zip(labels, values)
        except (ValueError, RecursionError):  # not JSON, or cut short
            raise BackendError(
                f"Prometheus at {self.url} gave a malformed answer (not JSON, or cut short)"
            ) from None

    def _http_error(self, e, query: str) -> BackendError:
        detail, kind, said = "", "", ""
        try:
            answer = json.loads(e.read() or b"null")
            if isinstance(answer, dict) and answer.get("error"):
                kind, said = str(answer.get("errorType", "error")), str(answer["error"])
                detail = f": {_text(kind)}: {_text(said)}"
        except (ValueError, OSError, RecursionError):
            pass
        hints = {
            401: "Prometheus wants credentials: put them in the URL (https://user:pass@host)",
            403: "Prometheus refused these credentials",
            404: f"no /api/v1/query under {self.url}: is this the Prometheus base URL?",
        }
        hint = hints.get(e.code, HINT_URL if e.code < 500 else None)
        # Prometheus's query timeout (errorType timeout) and its sample limit
        too_long = kind == "timeout" or "too many samples" in said
        if kind == "bad_data":  # the URL is right, the query is not
            hint = (
                "Prometheus could not evaluate gpuctl's query: a bug in gpuctl; please report "
                f"it with the query: {_text(query, 300)}"
            )
        elif kind == "execution" and not too_long:  # e.g. its storage, or series it holds
            hint = (
                "Prometheus failed evaluating the query (its storage, or series of an "
                "unexpected shape): see its log; if it persists, report it with the query: "
                f"{_text(query, 300)}"
            )
        return (QueryTooLong if too_long else BackendError)(
            f"Prometheus at {self.url} answered HTTP {e.code} {_text(e.reason)}{detail}", hint=hint
        )

    def _vector(self, body: bytes, warnings: list[str] | None = None) -> list:
        samples = []
        for item in self._result(body, "vector", warnings):
            problem = _sample_problem(item)
            if problem:
                raise BackendError(f"Prometheus at {self.url} gave a malformed sample: {problem}")
            samples.append((item.get("metric") or {}, float(item["value"][1])))
        return samples

    def _result(self, body: bytes, kind: str, warnings: list[str] | None = None) -> Any:
        """The `result` of a successful answer of this resultType; a BackendError otherwise.
        Its warnings go to WARNINGS."""
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):  # HTML, or JSON nested past any sense
            answer = None
        if not isinstance(answer, dict) or "status" not in answer:
            raise BackendError(
                f"{self.url} did not answer like a Prometheus server "
                "(no JSON status from /api/v1/query)",
                hint=HINT_URL,
            )
        if answer["status"] != "success":
            raise BackendError(
                f"Prometheus at {self.url} rejected a query: "
                f"{_text(answer.get('errorType', 'error'))}: {_text(answer.get('error', '?'))}"
            )
        if warnings is not None:
            _warned(warnings, answer)
        data = answer.get("data")
        if not isinstance(data, dict) or data.get("resultType") != kind:
            found = data.get("resultType") if isinstance(data, dict) else None
            raise BackendError(
                f"Prometheus at {self.url} gave an unexpected answer (resultType {_text(found)})"
            )
        return data.get("result") or []  # anything but a list of samples: named by the caller

    def query_all(
        self, exprs: list, consumers: list | None = None, warnings: list[str] | None = None
    ) -> list:
        """Several instant queries, sent concurrently (each evaluated at the server's now);
        each answer goes to its consumer (see `query`), by default into a list; their
        warnings to `warnings`. Ctrl-C, or one query's failure, cuts every one off at once:
        those under way, and those whose thread had not connected yet or not started (under
        load, one may not have)."""
        from concurrent.futures import ThreadPoolExecutor

        try:
            with ThreadPoolExecutor(max_workers=len(exprs)) as pool:
                try:
                    futures = [
                        pool.submit(
                            self.query, e, consumers[i] if consumers else list, warnings=warnings
                        )
                        for i, e in enumerate(exprs)
                    ]
                    return [f.result() for f in futures]
                except BaseException:
                    with self._count_lock:
                        self._cutting = True
                        in_flight = list(self._in_flight)
                    for exchange in in_flight:
                        exchange.cut_off()
                    raise
        finally:  # every query of this call has ended: later calls may query again
            with self._count_lock:
                self._cutting = False


@functools.cache
def _typed_decoder() -> tuple[Callable[[bytes], list], type]:
    """A decoder of a slice of a vector answer's `result` into typed samples (msgspec,
    in C: each label checked to be text and each value a [time, text] pair while
    decoding, ~3x faster than json.loads), and their type. A slice it refuses (a label
    that is not text, `"metric": null`, a number as value) is decoded by json.loads and
    read by _decoded, which accepts what may be accepted and names what may not."""
    import msgspec

    class Typed(msgspec.Struct, gc=False):  # acyclic: nothing for the cycle collector
        metric: dict[str, str] = {}
        value: tuple[float, str] = (0.0, "")

    typed = msgspec.json.Decoder(list[Typed])

    def decode(data: bytes) -> list:
        try:
            return typed.decode(data)
        except msgspec.ValidationError:
            return json.loads(data)
        except msgspec.DecodeError as e:  # not JSON: as json.loads would say
            raise ValueError(str(e)) from None

    return decode, Typed


_LABELS, _PAIR = attrgetter("metric"), attrgetter("value")


def _decoded_typed(batch: list) -> tuple[list[dict[str, Any]], list[float]]:
    """The labels and values of typed samples, by C-level operations only."""
    return list(map(_LABELS, batch)), list(map(float, map(_SECOND, map(_PAIR, batch))))


def _decoded(batch: list) -> tuple[list[dict[str, Any]], list[float]]:
    """The labels and values of a batch of samples, by C-level operations only (they run
    for every series of every answer). Raises one of the exceptions _samples catches when
    a sample is malformed."""
    try:
        labels = list(map(_METRIC, batch))
    except (KeyError, TypeError):  # no "metric", or not an object: sorted out below
        labels = [item.get("metric") for item in batch]
    if not all(labels):  # a series without labels, or "metric": null
        labels = [m or {} for m in labels]
    values = list(map(float, map(_SECOND, map(_VALUE, batch))))
    # Every label set an object (else dict.values raises) of text.
    if not _TEXT.issuperset(map(type, chain.from_iterable(map(dict.values, labels)))):
        raise TypeError
    return labels, values


def _sample_problem(item) -> str | None:
    """Why one element of a vector result is not a Prometheus sample, or None."""
    if not isinstance(item, dict):
        return f"expected an object, got {type(item).__name__}"
    metric = item.get("metric") or {}
    if not isinstance(metric, dict):
        return f"labels are {type(metric).__name__}, not an object"
    for key, value in metric.items():
        if not isinstance(value, str):
            return f"label {_text(key)} is {type(value).__name__}, not text"
    value = item.get("value")
    if not isinstance(value, list) or len(value) != 2:
        return "value is not a [time, value] pair"
    number = value[1]
    if isinstance(number, bool) or not isinstance(number, (str, int, float)):
        return f"value is {type(number).__name__}, not a number"
    try:
        float(number)
    except (ValueError, OverflowError):
        return f"value {_text(repr(number))} is not a number"
    return None


def _warned(warnings: list[str], answer: dict[str, Any]) -> None:
    """Add the warnings of an answer to WARNINGS (list.append: safe across query threads)."""
    found = answer.get("warnings")
    for warning in found if isinstance(found, list) else []:
        warnings.append(printable(_text(warning, 300)))


def _text(value: object, limit: int = 120) -> str:
    """Something a server sent, shortened for one line of a message."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shut(sockets: list) -> None:
    for sock in sockets:
        try:
            sock.shutdown(2)  # SHUT_RDWR: a blocked connect or read returns at once
        except OSError:
            pass


class _Exchange:
    """The sockets of one query (each connection's, redirects included), and whether it was
    cut off. Cutting off is for good: a socket handed over after it is shut at once, so a
    query that was still connecting, or not yet connected, when Ctrl-C or its deadline came
    cannot run on until the deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list = []
        self._cut = False

    def add(self, sock) -> None:
        with self._lock:
            if not any(s is sock for s in self._sockets):
                self._sockets.append(sock)
            cut = self._cut
        if cut:  # shut again once connected: one shut while connecting had nothing to end
            _shut([sock])

    def cut_off(self) -> None:
        with self._lock:
            self._cut = True
            sockets = list(self._sockets)
        _shut(sockets)


def _connect(exchange: _Exchange, address, timeout, source_address=None):
    """socket.create_connection, with each socket handed to EXCHANGE before it connects, so
    that cutting the exchange off ends a connect under way too."""
    import socket

    host, port = address
    error: OSError | None = None
    for family, kind, proto, _, where in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            exchange.add(sock)
            if timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:  # type: ignore[attr-defined]
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(where)
            return sock
        except OSError as e:
            error = e
            sock.close()
    raise error or OSError(f"no address for {host}")


def _opener(exchange: _Exchange):
    """urllib with proxies from the environment as usual, the connections' sockets handed to
    `exchange` (so that a deadline or Ctrl-C can cut them off), and redirects that keep the
    POST and send basic-auth credentials only to the same origin."""
    import functools
    import http.client
    import urllib.request

    def tracked(cls, *args, **kwargs):
        conn = cls(*args, **kwargs)
        conn._create_connection = functools.partial(_connect, exchange)
        connect = conn.connect

        def connected() -> None:
            connect()
            exchange.add(conn.sock)  # HTTPS: the TLS socket that took the connected one over

        conn.connect = connected
        return conn

    class Plain(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(functools.partial(tracked, http.client.HTTPConnection), req)

    class Secure(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(
                functools.partial(tracked, http.client.HTTPSConnection),
                req,
                context=self._context,
            )

    return urllib.request.build_opener(Plain, Secure, _redirects())


def _origin(url: str) -> tuple:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def _redirects():
    import urllib.request

    class Redirects(urllib.request.HTTPRedirectHandler):
        """Follow a redirect with the same POST (a query is read-only); the Authorization
        header goes along only to the same scheme, host and port."""

        def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: V107 (urllib calls it so)
            if code not in (301, 302, 303, 307, 308):
                return None
            same_origin = _origin(newurl) == _origin(req.full_url)
            keep = {
                k: v
                for k, v in req.header_items()
                if k.lower() not in ("host", "content-length")
                and (same_origin or k.lower() not in ("authorization", "cookie"))
            }
            return urllib.request.Request(
                newurl,
                data=req.data,
                headers=keep,
                origin_req_host=req.origin_req_host,
                method="POST",
            )

    return Redirects
