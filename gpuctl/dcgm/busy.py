"""The busy signal: how busy a GPU or a MIG device is, in percent, by one rule for every
view, alert and piece of advice. Pure.

A whole GPU's is DCGM_FI_DEV_GPU_UTIL; else, and always for a MIG device (whose GPU_UTIL is
absent, or with dcgm-exporter 3.x a constant 0), 100 × DCGM_FI_PROF_GR_ENGINE_ACTIVE, the
share of time its graphics engines were active (0..1)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gpuctl.dcgm.metrics import GR_ACTIVE, UTIL, WHOLE


def promql(side: Callable[[str, str], str], whole_only: bool = False) -> str:
    """The rule as PromQL. `side(metric, matcher)` is the expression over one metric's
    series (e.g. their mean over a window, per device), `matcher` one more label matcher
    for them ("" for none). The two sides are joined by `or`, which keeps the left one where
    both have a series with the same labels: so that a GPU reporting both is judged by its
    GPU_UTIL, each side must give a device the same labels (aggregate both by device, or
    keep the series' own labels on both). whole_only: whole GPUs only, MIG devices left out."""
    return f"({side(UTIL, WHOLE)}) or 100 * ({side(GR_ACTIVE, WHOLE if whole_only else '')})"


def percent(values: Mapping[str, float], mig: bool) -> float | None:
    """The rule on one device's latest readings (metric name -> value); None without either
    metric."""
    util = None if mig else values.get(UTIL)
    if util is None and values.get(GR_ACTIVE) is not None:
        util = 100.0 * values[GR_ACTIVE]
    return util
