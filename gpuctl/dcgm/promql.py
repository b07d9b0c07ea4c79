"""What every PromQL text gpuctl writes shares: Prometheus durations, checked before they
reach a query or a rule file, and series of several metrics kept apart. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from gpuctl.common.errors import UsageError
from gpuctl.common.numbers import whole_number

_DURATION = re.compile(
    r"^(?:[0-9]+y)?(?:[0-9]+w)?(?:[0-9]+d)?(?:[0-9]+h)?(?:[0-9]+m)?(?:[0-9]+s)?(?:[0-9]+ms)?\Z"
)
_UNIT_SECONDS = {
    "y": 365 * 86400,
    "w": 7 * 86400,
    "d": 86400,
    "h": 3600,
    "m": 60,
    "s": 1,
    "ms": 0.001,
}


# The longest window gpuctl asks for: beyond it no Prometheus (or long-term store) holds
# DCGM history, and its range selectors and steps stop being meaningful numbers.
MAX_SECONDS = 5 * _UNIT_SECONDS["y"]


def duration_seconds(text: str, option: str) -> float:
    """Seconds in a Prometheus duration ("10m", "1h30m"); a UsageError naming the option
    otherwise, so nothing malformed ever reaches a query or a rule file."""
    parts = re.findall(r"([0-9]+)(ms|[ywdhms])", text) if isinstance(text, str) else []
    if not text or not _DURATION.match(text) or any(whole_number(n) is None for n, _ in parts):
        raise UsageError(
            f"{option}: {text!r} is not a Prometheus duration",
            hint="use a number with a unit, e.g. 30s, 10m, 1h or 1h30m",
        )
    seconds = sum((whole_number(n) or 0) * _UNIT_SECONDS[u] for n, u in parts)  # none is None
    if seconds <= 0:
        raise UsageError(f"{option}: {text!r} must be longer than zero")
    if seconds > MAX_SECONDS:
        raise UsageError(f"{option}: {text!r} is longer than the most gpuctl looks back, 5y")
    return seconds


METRIC = "metric"  # the label per_metric keeps each series' metric name in


def per_metric(expr: Callable[[str], str], metrics: Iterable[str]) -> str:
    """The union of expr(m) over METRICS, each series labelled `metric="<m>"`. A function
    over a selector (timestamp, *_over_time, rate) drops the metric name, so over a selector
    of several metrics (`{__name__=~"A|B"}`) the series of one device that exports A and B
    would have the same labels, which Prometheus refuses ("vector cannot contain metrics
    with the same labelset"), and `or` would silently keep one of them. Aggregate the union
    by device afterwards (`max by (...)`)."""
    return " or ".join(f'label_replace({expr(m)}, "{METRIC}", "{m}", "", "")' for m in metrics)
