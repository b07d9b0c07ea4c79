"""The busy signal: how busy a GPU or a MIG device is, in percent, by one rule for every
view, alert, piece of advice, reclaim decision and report. Pure.

Best available first, per device (so a cluster of nodes with and without the profiling
fields works):

1. 100 × DCGM_FI_PROF_SM_ACTIVE: the share of cycles the SMs had work. It measures how
   much of the GPU is used; dcgm-exporter's default counters file ships it commented out.
2. else 100 × DCGM_FI_PROF_GR_ENGINE_ACTIVE: the share of time the graphics/compute
   engines were active (a kernel on one SM of 132 reads 100 %); missing on some
   H100/H200 nodes.
3. else, and never for a MIG device (whose GPU_UTIL is absent, or with dcgm-exporter
   3.x a constant 0), DCGM_FI_DEV_GPU_UTIL: the driver's duty cycle, "a kernel was
   running", with the same blind spot as 2.

`SIGNALS` names each; a view says which one it used (`signal`, `signal_label`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from gpuctl.dcgm.metrics import GR_ACTIVE, SM_ACTIVE, UTIL, WHOLE

# metric -> the name views and JSON give the signal, best first
SIGNALS = {SM_ACTIVE: "sm_active", GR_ACTIVE: "gr_engine_active", UTIL: "gpu_util"}
DUTY_CYCLE = ("gr_engine_active", "gpu_util")  # the signals blind to how much of a GPU is used
DUTY_FIELDS = (GR_ACTIVE, UTIL)  # their metrics
LABEL = "signal"  # the label `promql(..., labelled=True)` adds to each series
_SCALE = {SM_ACTIVE: 100.0, GR_ACTIVE: 100.0, UTIL: 1.0}  # to percent
# The rule as data, best first: (metric, its name, its scale to percent, whether MIG
# devices are judged by it), for code that keeps readings otherwise than by metric name.
RULE = tuple((m, name, _SCALE[m], m != UTIL) for m, name in SIGNALS.items())


def promql(
    side: Callable[[str, str], str],
    whole_only: bool = False,
    labelled: bool = False,
    fields: Iterable[str] | None = None,
) -> str:
    """The rule as PromQL. `side(metric, matcher)` is the expression over one metric's
    series (e.g. their mean over a window, per device), `matcher` one more label matcher
    for them ("" for none). The sides are joined by `or`, which keeps the left one where
    several have a series with the same labels: so that a device reporting several is
    judged by the best, each side must give a device the same labels (aggregate them all
    by device, or keep the series' own labels on all, the metric name dropped).
    whole_only: whole GPUs only, MIG devices left out. labelled: each series carries
    a `signal` label naming the field it came from (SIGNALS' values). fields: only these
    of SIGNALS' metrics, in the rule's order (e.g. DUTY_FIELDS: what a view would say
    without the profiling fields)."""
    parts = []
    chosen = SIGNALS.keys() if fields is None else set(fields)
    for metric, name in SIGNALS.items():
        if metric not in chosen:
            continue
        expr = f"({side(metric, WHOLE if whole_only or metric == UTIL else '')})"
        if _SCALE[metric] != 1.0:
            expr = f"100 * {expr}"
        if labelled:
            expr = f'label_replace({expr}, "{LABEL}", "{name}", "", "")'
        parts.append(expr)
    return (f" or ignoring ({LABEL}) " if labelled else " or ").join(parts)


def best(values: Mapping[str, float], mig: bool) -> tuple[str, float] | None:
    """The rule on one device's latest readings (metric name -> value): the signal's
    metric and the percent; None without any of them."""
    for metric, _, scale, for_mig in RULE:
        value = values.get(metric)
        if value is not None and (for_mig or not mig):
            return metric, scale * value
    return None


def percent(values: Mapping[str, float], mig: bool) -> float | None:
    """The rule on one device's latest readings (metric name -> value); None without any
    of the metrics."""
    found = best(values, mig)
    return None if found is None else found[1]


def signal(values: Mapping[str, float], mig: bool) -> str | None:
    """The name of the signal `percent` reads for these readings (SIGNALS' values)."""
    found = best(values, mig)
    return None if found is None else SIGNALS[found[0]]


def summary(used: Iterable[str | None]) -> str:
    """What a view says about the signals its devices were judged by, e.g.
    "sm_active" or "sm_active 12, gpu_util 4", best first; "none" without any."""
    counts: dict[str, int] = {}
    for name in used:
        if name:
            counts[name] = counts.get(name, 0) + 1
    return summary_of(counts)


def summary_of(counts: Mapping[str, int]) -> str:
    """summary() from how many devices each signal judged: DCGM's best first, then other
    vendors' (gpuctl.dcgm.exporters) by name."""
    names = [n for n in SIGNALS.values() if counts.get(n)]
    names += sorted(n for n in counts if n and counts[n] and n not in SIGNALS.values())
    if len(names) <= 1:
        return names[0] if names else "none"
    return ", ".join(f"{n} {counts[n]}" for n in names)


def duty_cycle_only(used: Iterable[str | None]) -> bool:
    """Whether no device was judged by SM activity (only a duty cycle, or nothing)."""
    return SIGNALS[SM_ACTIVE] not in set(used)
