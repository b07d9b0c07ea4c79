"""The live cluster view's keys (gpuctl.common.keys) and what its filter matches. Pure.

`i` `u` `m` `t` `p` sort by node (index), util, memory, temp, power, `I` by idle (the lowest
mean first). `/` filters the GPUs on the columns NODE, NAMESPACE/POD and MODEL: `text`
matches a GPU whose node, holding pod, its namespace or its model contains it (whatever
the case); `node:text`, `pod:text`, `ns:text` or `model:text` looks in that column only.
"""

from __future__ import annotations

from gpuctl.common.keys import Keymap, matches
from gpuctl.dcgm import holders
from gpuctl.top.cluster.core import usage
from gpuctl.top.cluster.core.live import SORT_KEYS
from gpuctl.top.cluster.core.usage import ClusterGpuRow

KEYS = Keymap(
    SORT_KEYS,
    {"i": "index", "u": "util", "m": "memory", "t": "temp", "p": "power", "I": "idle"},
    "(GPUs by node, pod, namespace or model; node:, pod:, ns:, model: for one column)",
)
COLUMNS = ("node", "pod", "ns", "model")


def parse(wanted: str) -> tuple[str | None, str]:
    """(the column a filter names, or None for any, and the text it looks for)."""
    column, colon, text = wanted.partition(":")
    if colon and column.strip().lower() in COLUMNS:
        return column.strip().lower(), text.strip()
    return None, wanted.strip()


def row_matches(row: ClusterGpuRow, wanted: str) -> bool:
    """Whether the row is one the filter shows (its holders by the holder rule: the
    exporter's own pod is never a match)."""
    column, text = parse(wanted)
    values = {
        "node": [row.node],
        "pod": [h.pod for h in row.holders],
        "ns": [h.namespace or "" for h in row.holders],
        "model": [row.model or ""],
    }
    return any(matches(v, text) for c in ((column,) if column else COLUMNS) for v in values[c])


def matchers(wanted: str) -> tuple[str, ...]:
    """PromQL label matchers (alternatives) selecting at least the series of the GPUs the
    filter shows, and few others: the frame fetches only those, then row_matches decides."""
    column, text = parse(wanted)
    value = holders.containing(text)
    names = {
        "node": usage.node_matching(value),
        "pod": tuple(f"{labels[1]}=~{value}" for labels in _HOLDER_LABELS),
        "ns": tuple(f"{labels[0]}=~{value}" for labels in _HOLDER_LABELS),
        "model": (f"modelName=~{value}",),
    }
    if column is not None:
        return names[column]
    return tuple(m for c in COLUMNS for m in names[c])


_HOLDER_LABELS = (holders.EXPORTED, holders.OLD_NAMESPACE, holders.PLAIN)
