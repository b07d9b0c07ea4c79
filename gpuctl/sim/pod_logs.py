"""Pod logs for the Kubernetes API emulator: `GET /api/v1/namespaces/NS/pods/NAME/log`
answered as the API server and the kubelet answer it, from lines the simulated containers
wrote (gpuctl.sim.controllers' kubelet, or a test).

What is followed, as in kubernetes/kubernetes:
- pkg/registry/core/pod/strategy.go LogLocation: no `container` on a pod of several
  containers is 400 "a container name must be specified for pod NAME, choose one of:
  [a b]" (" or one of the init containers: [...]"); an unknown one 400 "container C is not
  valid for pod NAME"; a pod on no node yet answers an empty log;
- pkg/apis/core/validation ValidatePodLogOptions: tailLines ≥ 0, limitBytes and
  sinceSeconds ≥ 1, not both sinceSeconds and sinceTime (422 Invalid, kind PodLogOptions);
- the kubelet (pkg/kubelet/kubelet_pods.go validateContainerLogStatus): a container not
  started is 400 `container "C" in pod "NAME" is waiting to start: REASON`; `previous` of
  a container that never restarted is 400 `previous terminated container "C" in pod
  "NAME" not found`;
- the options: `follow` streams until the container ends (or the pod is deleted),
  `tailLines` the last N lines, `sinceSeconds` / `sinceTime`, `timestamps` (each line
  after its RFC 3339 time with nanoseconds and a space), `limitBytes`.
Lines are text/plain, one per write, newline-terminated.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Callable
from typing import Any

TRUE = ("1", "t", "T", "true", "TRUE", "True")  # Go's strconv.ParseBool
FALSE = ("0", "f", "F", "false", "FALSE", "False")


class LogError(Exception):
    """An answer other than the log: (HTTP status, reason, message)."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class ContainerLog:
    """What one container wrote, and whether it has ended. Touched on the emulator's loop."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []
        self.ended = False
        self._changed = asyncio.Event()

    def add(self, when: float, text: str) -> None:
        self.lines.append((when, text))
        self._wake()

    def end(self) -> None:
        self.ended = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass


def _bool(params: dict, key: str) -> bool:
    value = params.get(key, "false")
    if value not in TRUE + FALSE:
        raise LogError(400, "BadRequest", f'strconv.ParseBool: parsing "{value}": invalid syntax')
    return value in TRUE


def _int(params: dict, key: str) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise LogError(
            400, "BadRequest", f'strconv.ParseInt: parsing "{value}": invalid syntax'
        ) from None


def _since(params: dict, name: str) -> float | None:
    """The earliest time asked for (sinceSeconds or sinceTime), after validation."""
    problems = []
    seconds, tail = _int(params, "sinceSeconds"), _int(params, "tailLines")
    limit = _int(params, "limitBytes")
    if tail is not None and tail < 0:
        problems.append(f"tailLines: Invalid value: {tail}: must be greater than or equal to 0")
    if limit is not None and limit < 1:
        problems.append(f"limitBytes: Invalid value: {limit}: must be greater than 0")
    if seconds is not None and seconds < 1:
        problems.append(f"sinceSeconds: Invalid value: {seconds}: must be greater than 0")
    if seconds is not None and params.get("sinceTime"):
        problems.append("sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds`")
    if problems:
        raise LogError(422, "Invalid", f'PodLogOptions "{name}" is invalid: ' + ", ".join(problems))
    if seconds is not None:
        return datetime.datetime.now(datetime.timezone.utc).timestamp() - seconds
    text = params.get("sinceTime")
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise LogError(400, "BadRequest", f'parsing time "{text}" as RFC 3339: invalid') from None


def container_of(pod: dict, params: dict) -> str:
    """The container whose log is asked for, as the API server picks it."""
    name = (pod.get("metadata") or {}).get("name")
    spec = pod.get("spec") or {}
    containers = [c.get("name") for c in spec.get("containers") or []]
    inits = [c.get("name") for c in spec.get("initContainers") or []]
    asked = params.get("container") or ""
    if not asked:
        if len(containers) == 1:
            return str(containers[0])
        message = f"a container name must be specified for pod {name}"
        if containers:
            message += f", choose one of: [{' '.join(containers)}]"
            if inits:
                message += f" or one of the init containers: [{' '.join(inits)}]"
        raise LogError(400, "BadRequest", message)
    if asked not in containers + inits:
        raise LogError(400, "BadRequest", f"container {asked} is not valid for pod {name}")
    return asked


def check_started(pod: dict, container: str, params: dict) -> bool:
    """Whether the container has a log to read (False: the pod is on no node yet, an empty
    answer); LogError where the kubelet refuses."""
    name = (pod.get("metadata") or {}).get("name")
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if not spec.get("nodeName"):
        return False
    if _bool(params, "previous"):
        raise LogError(
            400,
            "BadRequest",
            f'previous terminated container "{container}" in pod "{name}" not found',
        )
    statuses = {
        s.get("name"): s.get("state") or {}
        for key in ("containerStatuses", "initContainerStatuses")
        for s in status.get(key) or []
    }
    state = statuses.get(container)
    if state is None and status.get("phase") in ("Running", "Succeeded", "Failed"):
        return True
    if state is None or "waiting" in state:
        reason = ((state or {}).get("waiting") or {}).get("reason") or "ContainerCreating"
        raise LogError(
            400,
            "BadRequest",
            f'container "{container}" in pod "{name}" is waiting to start: {reason}',
        )
    return True


def _line(when: float, text: str, timestamps: bool) -> bytes:
    if not timestamps:
        return (text + "\n").encode()
    moment = datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
    nanos = f"{moment:%Y-%m-%dT%H:%M:%S}.{int(when % 1 * 1e9):09d}Z"
    return f"{nanos} {text}\n".encode()


def serve(params: dict, pod: dict, log: ContainerLog | None, gone: Callable) -> Any:
    """The answer to a log request for POD with PARAMS (its container's LOG, None if it
    wrote nothing): the bytes, or for `follow` an async stream of them that ends when the
    container ends or GONE() tells that the pod was deleted. LogError for a refusal."""
    name = (pod.get("metadata") or {}).get("name") or ""
    container = container_of(pod, params)
    since = _since(params, name)
    follow, timestamps = _bool(params, "follow"), _bool(params, "timestamps")
    tail, limit = _int(params, "tailLines"), _int(params, "limitBytes")
    if not check_started(pod, container, params):
        return b""
    lines = [(w, t) for w, t in (log.lines if log else []) if since is None or w >= since]
    if tail is not None:
        lines = lines[len(lines) - tail :] if tail else []
    body = b"".join(_line(w, t, timestamps) for w, t in lines)
    if not follow or log is None:
        return body[:limit]
    return _follow(log, body, timestamps, limit, gone)


async def _follow(
    log: ContainerLog, body: bytes, timestamps: bool, limit: int | None, gone: Callable
) -> AsyncIterator[bytes]:
    """BODY (possibly empty: the answer starts at once), then each line as it is written."""
    written, sent = 0, len(log.lines)

    def cut(chunk: bytes) -> bytes:
        nonlocal written
        chunk = chunk if limit is None else chunk[: limit - written]
        written += len(chunk)
        return chunk

    yield cut(body)
    while not (log.ended and sent == len(log.lines)) and not gone():
        if limit is not None and written >= limit:
            return
        if sent == len(log.lines):
            await log.changed(1.0)
            continue
        new, sent = log.lines[sent:], len(log.lines)
        chunk = cut(b"".join(_line(w, t, timestamps) for w, t in new))
        if chunk:
            yield chunk
