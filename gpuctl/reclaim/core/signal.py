"""Is each held GPU idle, and since when? The questions put to Prometheus and their
answers read per holding pod. Pure: the queries are text, the answers samples.

Every decision uses the ground floor's busy rule (gpuctl.dcgm.busy). Per device and holder:

- `newest`: the time of its newest sample (absent: no sample in Prometheus's 5-minute
  lookback, the GPU's state is unknown);
- `last_busy`: the last step of the lookback at which the busy signal reached the policy's
  threshold; each step looks at the whole step before it (max_over_time), so a burst
  between two steps still counts;
- `covered[window]`: at how many steps of each rule's window the device had a sample: a
  gap (an exporter down for an hour) is not an idle hour;
- `measured[window]` and `finite[window]`: at how many steps of the window the busy signal
  itself had a value, and a finite one: a device the rule gives no signal (a MIG device
  without GR_ENGINE_ACTIVE) or one whose signal is NaN or ±Inf at some step (which no
  threshold tells from idle) is not known to be idle.

An answer that is itself not finite (NaN or ±Inf where a time or a count belongs) leaves its
device unknown, and Prometheus's warnings (a partial answer: a remote store that did not
answer) leave every device unknown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuctl.dcgm import busy, exporters, holders
from gpuctl.dcgm.metrics import GR_ACTIVE, IDENTITY, SM_ACTIVE, UTIL, Key, key_of
from gpuctl.dcgm.promql import per_metric

STEPS = 1440  # the lookback is read at this many steps at most
MIN_STEP_S = 60
SIGNAL = f"100 × {SM_ACTIVE}, else 100 × {GR_ACTIVE}, else {UTIL} (whole GPUs)"

Sample = tuple[dict[str, Any], float]
Pod = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Queries:
    step_s: int
    lookback_s: int
    newest: str
    last_busy: str
    covered: dict[int, str]  # window (s) -> query
    measured: dict[int, str] = field(default_factory=dict)  # window (s) -> query
    finite: dict[int, str] = field(default_factory=dict)  # window (s) -> query

    def all(self) -> list[str]:
        return [
            self.newest,
            self.last_busy,
            *self.covered.values(),
            *self.measured.values(),
            *self.finite.values(),
        ]


def step_for(lookback_s: int) -> int:
    return max(MIN_STEP_S, -(-lookback_s // STEPS))


def queries(windows: Iterable[int], busy_percent: int) -> Queries:
    """WINDOWS: the idle periods of the policy's rules, in seconds. The lookback is twice
    the longest one and at least a day, so that 'idle since' reaches back beyond it."""
    windows = sorted(set(windows))
    lookback = max(2 * windows[-1], 86400)
    step = step_for(lookback)
    by = ", ".join(IDENTITY + holders.LABELS + (exporters.PLAIN_HOLDER,))

    def busy_over_step(metric: str, matcher: str) -> str:
        return f"max by ({by}) (max_over_time({metric}{{{matcher}}}[{step}s]))"

    # other vendors' held devices (gpuctl.dcgm.exporters) after DCGM's, in its labels
    busy_now = (
        f"{busy.promql(busy_over_step)} or "
        f"{exporters.held_promql(lambda sel: f'max_over_time({sel}[{step}s])', by, True)}"
    )
    # a sample of any busy-signal field, each field's series kept apart (see per_metric)
    last = per_metric(lambda m: f"last_over_time({m}[{step}s])", busy.SIGNALS)
    last += f" or {exporters.held_promql(lambda sel: f'last_over_time({sel}[{step}s])', by, False)}"
    newest = per_metric(lambda m: f"timestamp({m})", busy.SIGNALS)
    newest += f" or {exporters.held_promql(lambda sel: f'timestamp({sel})', by, False)}"
    present = f"max by ({by}) ({last})"
    return Queries(
        step_s=step,
        lookback_s=lookback,
        newest=f"max by ({by}) ({newest})",
        last_busy=(
            f"max by ({by}) (max_over_time(timestamp(({busy_now}) >= {busy_percent})"
            f"[{lookback}s:{step}s]))"
        ),
        covered={w: f"count_over_time(({present})[{w}s:{step}s])" for w in windows},
        measured={w: f"count_over_time(({busy_now})[{w}s:{step}s])" for w in windows},
        finite={w: f"count_over_time((({busy_now}) > -Inf < +Inf)[{w}s:{step}s])" for w in windows},
    )


@dataclass
class Device:
    key: Key
    node: str
    newest: float | None = None  # time of the newest sample
    last_busy: float | None = None  # None: not busy within the lookback
    covered: dict[int, float] = field(default_factory=dict)  # window -> steps with a sample
    measured: dict[int, float] = field(default_factory=dict)  # window -> steps with a signal
    finite: dict[int, float] = field(default_factory=dict)  # window -> steps it was finite
    unknown: list[str] = field(default_factory=list)  # answers about it that were no number
    # its holder is another vendor's plain `pod` (exporters.held_promql): trusted only on
    # the holding pod's own node
    on_node_only: bool = False


@dataclass
class Readings:
    """Per holding pod, the devices Prometheus says it holds."""

    queries: Queries
    by_pod: dict[Pod, dict[Key, Device]]
    warnings: list[str] = field(default_factory=list)  # Prometheus's: a partial answer

    def devices(self, pod: Pod) -> list[Device]:
        return list(self.by_pod.get(pod, {}).values())


def read(
    q: Queries,
    answers: list[list[Sample]],
    exporter: holders.Exporter,
    warnings: list[str] | None = None,
    claimed: Mapping[str, Pod] | None = None,
    claimed_mig: Mapping[tuple[str, str], Pod] | None = None,
) -> Readings:
    """The answers to q.all(), in order, per holding pod and device; WARNINGS: what
    Prometheus warned of while answering them. A series that names no holder is its DRA
    claim's pod's, where CLAIMED (device UUID → pod) has it, or for a MIG series,
    CLAIMED_MIG ((parent UUID, profile) → pod: gpuctl.gpus.dra.DraView.mig_holders)."""
    by_pod: dict[Pod, dict[Key, Device]] = {}
    newest, last_busy, *counts = answers
    windows = len(q.covered)
    if claimed or claimed_mig:
        exporter = replace(exporter, claimed=claimed or {}, claimed_mig=claimed_mig or {})

    def device(labels: dict[str, Any]) -> Device | None:
        h = holders.holder(labels, exporter)
        pod = (h.namespace, h.pod) if h is not None and h.namespace else None
        if pod is None:
            return None
        key = key_of(labels)
        devices = by_pod.setdefault(pod, {})
        if key not in devices:
            node = labels.get("Hostname") or labels.get("hostname") or ""
            devices[key] = Device(key, node)
        if labels.get(exporters.PLAIN_HOLDER):
            devices[key].on_node_only = True
        return devices[key]

    def numbers(samples: list[Sample], what: str) -> Iterator[tuple[Device, float]]:
        for labels, value in samples:
            d = device(labels)
            if d is None:
                continue
            if math.isfinite(value):
                yield d, value
            else:
                d.unknown.append(f"Prometheus answered {value} for {what}")

    for d, value in numbers(newest, "its newest sample's time"):
        d.newest = max(value, d.newest or value)
    for d, value in numbers(last_busy, "the last time it was busy"):
        d.last_busy = max(value, d.last_busy or value)
    tallies = (
        ("covered", "its samples in the window"),
        ("measured", "the steps with a busy signal"),
        ("finite", "the steps with a finite busy signal"),
    )
    for i, (name, what) in enumerate(tallies):
        for window, samples in zip(q.covered, counts[i * windows : (i + 1) * windows]):
            for d, value in numbers(samples, what):
                tally = getattr(d, name)
                tally[window] = max(value, tally.get(window, 0.0))
    return Readings(q, by_pod, list(warnings or []))
