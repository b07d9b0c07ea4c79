"""A Prometheus instant-vector answer decoded while it arrives, a batch of samples at a time.

At 40,000 GPUs one answer is tens of megabytes of JSON; reading it whole and decoding it
with json.loads holds the text and every decoded object at once. Here a C decoder does all
the decoding, on slices of the `result` array cut at element boundaries: memory
holds one slice, and the cost stays that of the decoder (json.loads, or a faster one the
caller passes: the Prometheus adapter's decodes into typed structs with msgspec).

The boundary is the byte sequence `},{"metric":`. In valid JSON it cannot lie inside a
string (a quote inside a string is escaped, and a string closed by that quote could not be
followed by `metric":`), so it always ends one element of an array of objects and starts
the next; in a vector answer the only such array is `result`. A slice that is not valid
JSON (a malformed or truncated answer) fails json.loads like a whole answer would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

CHUNK = 1 << 16  # bytes read at a time (a slice decodes to ~5x that in objects)
# A successful vector answer as Prometheus writes it (whitespace tolerated). Anything
# else (an error, another key order) is decoded whole by the caller.
_HEAD = re.compile(
    rb'\s*\{\s*"status"\s*:\s*"success"\s*,\s*"data"\s*:\s*\{\s*"resultType"\s*:\s*"vector"'
    rb'\s*,\s*"result"\s*:\s*\['
)
_HEAD_MAX = 256  # bytes enough to hold _HEAD with generous whitespace
_BOUNDARY = b'},{"metric":'


class NotAVectorStream(Exception):
    """The answer does not start like a successful vector answer; `head` is what was read."""

    def __init__(self, head: bytes):
        super().__init__("not a streamable vector answer")
        self.head = head


def batches(
    read: Callable[[int], bytes],
    chunk: int = CHUNK,
    decode: Callable[[bytes], list[Any]] = json.loads,
    tail: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[list[Any]]:
    """The `result` elements, a list per slice of the answer: every slice but the last as
    `decode` makes them of the JSON array it is given (json.loads by default), the last
    as json.loads does. `tail` gets what follows `data` in the answer (its `warnings`,
    `infos`) once the answer is read. Raises NotAVectorStream before yielding anything when
    the answer is not a successful vector answer, ValueError when it is not valid JSON."""
    buf = b""
    while len(buf) < _HEAD_MAX:
        data = read(chunk)
        if not data:
            break
        buf += data
    head = _HEAD.match(buf)
    if head is None:
        raise NotAVectorStream(buf)
    buf = buf[head.end() :]
    while True:
        data = read(chunk)
        if not data:
            break
        search_from = max(0, len(buf) - len(_BOUNDARY))
        buf += data
        cut = buf.rfind(_BOUNDARY, search_from)
        if cut < 0:
            continue  # one element longer than what is read so far
        yield decode(b"[" + buf[: cut + 1] + b"]")
        buf = buf[cut + 2 :]
    items, rest = _last(buf.decode("utf-8"))
    if tail is not None:
        tail(rest)
    yield items


def _last(tail: str) -> tuple[list[Any], dict[str, Any]]:
    """The elements left at the end, and the rest of the answer (checking that it closes
    it): `{"data": {"result": []}, "warnings": […]}`."""
    items: list[Any]
    items, end = json.JSONDecoder().raw_decode("[" + tail)
    rest = json.loads('{"data":{"result":[]' + tail[end - 1 :])  # `}` + warnings/infos + `}`
    return items, rest
