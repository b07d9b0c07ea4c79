"""Rightsizing advice from DCGM-exporter samples over a window: per workload (the pods'
owner), the GPUs it holds now, its peak framebuffer use and 95th-percentile utilization,
and what would do: keep, a MIG profile, a time-sliced share, or release. Cluster totals
pack the MIG demand with the exact planner. Pure: samples in, advice out.

Only whole GPUs are advised on: a pod on a MIG device already holds a slice.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuctl.advise.core import owners
from gpuctl.advise.core.owners import Holder, Workload
from gpuctl.common.ordering import natural_key
from gpuctl.dcgm import busy, exporters, holders
from gpuctl.dcgm.metrics import FB_FREE, FB_USED, IDENTITY, WHOLE, Key, key_of
from gpuctl.dcgm.promql import duration_seconds
from gpuctl.gpus import geometry
from gpuctl.gpus.geometry import GpuModel, Profile

MEMORY_HEADROOM = 1.1  # a MIG profile or share must hold the peak framebuffer use + 10 %
QUANTILE = 0.95
# Time-slicing isolates neither memory nor faults: at most this many pods share one GPU.
MAX_SHARE = 8
KEEP, MIG, SHARE, RELEASE = "keep", "mig", "time-slice", "release"

Sample = tuple[dict[str, Any], float]


@dataclass(frozen=True)
class Queries:
    now: str  # who holds each whole GPU now, its model and memory (used, free)
    peak_memory: str  # per device and holder: max framebuffer used over the window
    p95_utilization: str  # per device and holder: 95th percentile of utilization
    max_utilization: str  # per device and holder: max utilization (idle the whole window?)
    owners: str  # kube-state-metrics' owner series over the window

    p95_duty_cycle: str = ""  # p95_utilization by the duty cycles alone (no SM_ACTIVE)
    max_duty_cycle: str = ""

    def all(self) -> list[str]:
        return [self.now, self.peak_memory, self.p95_utilization, self.max_utilization, self.owners]


def queries(window: str) -> Queries:
    """Five instant queries, whatever the cluster size: the window's statistics are
    computed by Prometheus, one series per device and holder."""
    duration_seconds(window, "--window")
    by = ", ".join(IDENTITY + holders.LABELS)

    def utilization(over: str, fields: tuple[str, ...] | None = None) -> str:
        def side(metric: str, matcher: str) -> str:
            return f"max by ({by}) ({over.format(f'{metric}{{{matcher}}}[{window}]')})"

        return busy.promql(side, whole_only=True, labelled=True, fields=fields)

    # other vendors' series (gpuctl.dcgm.exporters) after DCGM's: put in its shape by advise()
    p95 = f"quantile_over_time({QUANTILE}, {{}})"
    return Queries(
        now=f'max by (__name__, modelName, {by}) ({{__name__=~"{FB_USED}|{FB_FREE}", {WHOLE}}})'
        f" or {exporters.current_query()}",
        peak_memory=f"max by ({by}) (max_over_time({FB_USED}{{{WHOLE}}}[{window}]))"
        f" or {exporters.over_window('max_over_time({})', exporters.memory_used_metrics(), window)}",
        p95_utilization=f"{utilization(p95)} or {exporters.over_window(p95, exporters.BUSY, window)}",
        max_utilization=f"{utilization('max_over_time({})')} or "
        f"{exporters.over_window('max_over_time({})', exporters.BUSY, window)}",
        owners=owners.query(window),
        p95_duty_cycle=utilization(f"quantile_over_time({QUANTILE}, {{}})", busy.DUTY_FIELDS),
        max_duty_cycle=utilization("max_over_time({})", busy.DUTY_FIELDS),
    )


@dataclass
class WorkloadAdvice:
    workload: Workload
    pods: list[str]
    model: str | None
    gpus: int  # whole GPUs its pods hold now
    gpus_per_pod: int
    peak_memory_mib: float | None
    p95_utilization: float | None  # percent
    max_utilization: float | None  # percent
    advice: str = KEEP
    mig_profile: str | None = None
    share: int | None = None  # pods per time-sliced GPU
    reason: str = ""
    vendor: str = "nvidia"  # whose devices (gpuctl.gpus.vendors' names)


@dataclass(frozen=True)
class Totals:
    gpus_held: int
    gpus_needed: int

    @property
    def gpus_freed(self) -> int:
        return self.gpus_held - self.gpus_needed


@dataclass
class Advice:
    workloads: list[WorkloadAdvice]
    totals: Totals
    signal: str = "none"  # the busy signals the GPUs were judged by (busy.summary)
    duty_cycle_totals: Totals | None = None  # what the duty cycles alone would have advised


@dataclass
class _Stats:
    peak: float | None = None
    p95: float | None = None
    top: float | None = None


def _max(a: float | None, b: float) -> float:
    return b if a is None else max(a, b)


def advise(
    now: Iterable[Sample],
    peak_memory: Iterable[Sample],
    p95_utilization: Iterable[Sample],
    max_utilization: Iterable[Sample],
    owner_samples: Iterable[Sample],
    idle_threshold: float,
    namespace: str | None = None,
    exporter: holders.Exporter = holders.Exporter(),
    cluster: owners.Owners | None = None,
) -> Advice:
    """The advice; CLUSTER: the pods' owners as the cluster's objects say, for the pods
    kube-state-metrics' series do not name."""

    def holder_of(labels: dict[str, Any]) -> Holder | None:
        """The cluster view's rule for who holds a GPU (holders.holder)."""
        h = holders.holder(labels, exporter)
        return None if h is None else (h.namespace or "", h.pod)

    # other vendors' devices in DCGM's shape (their series carry `vendor`)
    now, peak_memory, p95_utilization, max_utilization = (
        exporters.per_series(s, exporter.models)
        for s in (now, peak_memory, p95_utilization, max_utilization)
    )
    devices: dict[Key, dict[str, Any]] = {}  # whole GPUs held now
    for labels, value in now:
        holder = holder_of(labels)
        if holder is None or not math.isfinite(value):
            continue
        d = devices.setdefault(key_of(labels), {"holder": holder})
        d[labels.get("__name__", "")] = value
        d["model"] = labels.get("modelName") or d.get("model")
        d["vendor"] = labels.get("vendor", "nvidia")
    lookup = dataclasses.replace(owners.parse(owner_samples), then=cluster)
    workload_of = {h: lookup.workload(h) for h in {d["holder"] for d in devices.values()}}

    held: dict[Workload, list[dict[str, Any]]] = {}
    for d in devices.values():
        w = workload_of[d["holder"]]
        if namespace is None or w.namespace == namespace:
            held.setdefault(w, []).append(d)

    stats: dict[Workload, _Stats] = {w: _Stats() for w in held}
    signals: dict[str, int] = {}  # per busy signal, the held GPUs' p95 series it gave
    for samples, slot in (
        (peak_memory, "peak"),
        (p95_utilization, "p95"),
        (max_utilization, "top"),
    ):
        for labels, value in samples:
            holder = holder_of(labels)
            if holder is None or not math.isfinite(value):
                continue
            if holder not in workload_of:  # a pod gone since: its workload may be held now
                workload_of[holder] = lookup.workload(holder)
            w = workload_of[holder]
            if w in stats:
                setattr(stats[w], slot, _max(getattr(stats[w], slot), value))
                if slot == "p95" and (name := labels.get(busy.LABEL)):
                    signals[name] = signals.get(name, 0) + 1

    rows = [_row(w, ds, stats[w], idle_threshold) for w, ds in held.items()]
    rows.sort(key=lambda r: (r.workload.namespace, r.workload.name, r.workload.kind or ""))
    totals = Totals(sum(r.gpus for r in rows), gpus_needed(rows))
    return Advice(rows, totals, busy.summary_of(signals))


def _row(w: Workload, devices: list[dict[str, Any]], s: _Stats, idle: float) -> WorkloadAdvice:
    per_pod = Counter(d["holder"] for d in devices)
    models = Counter(d.get("model") for d in devices)
    model = models.most_common(1)[0][0]
    totals = [d[FB_USED] + d[FB_FREE] for d in devices if FB_USED in d and FB_FREE in d]
    row = WorkloadAdvice(
        workload=w,
        pods=sorted({pod for _, pod in per_pod}, key=natural_key),
        model=model,
        gpus=len(devices),
        gpus_per_pod=max(per_pod.values()),
        peak_memory_mib=s.peak,
        p95_utilization=s.p95,
        max_utilization=s.top,
        vendor=devices[0].get("vendor", "nvidia"),
    )
    if len(models) > 1:
        row.reason = "its GPUs are of several models"
    else:
        decide(row, idle, min(totals) if totals else None)
    return row


def decide(row: WorkloadAdvice, idle_threshold: float, memory_total_mib: float | None) -> None:
    """Fill in row.advice (and its profile, share and reason) from its window statistics."""
    peak, p95, top = row.peak_memory_mib, row.p95_utilization, row.max_utilization
    if p95 is None or top is None:
        row.reason = "no utilization samples in the window"
        return
    if top < idle_threshold:
        row.advice, row.reason = (
            RELEASE,
            f"idle the whole window (max {top:.0f}% < {idle_threshold:g}%)",
        )
        return
    if row.gpus_per_pod > 1:
        row.reason = f"its pods use {row.gpus_per_pod} GPUs each"
        return
    if row.vendor != "nvidia":  # no MIG; its device plugin shares no device by time
        row.reason = f"busy at times; {row.vendor}'s devices are advised only to be released"
        return
    if peak is None:
        row.reason = "no framebuffer samples in the window"
        return
    if not row.model:
        row.reason = "its GPU model is unknown (no modelName label)"
        return
    need = peak * MEMORY_HEADROOM
    model = geometry.known_model(row.model)
    if model is not None:
        profile = smallest_profile(model, need, p95)
        if profile is None or profile.slices >= model.compute_slices:
            row.reason = f"needs a whole {model.short_name}"
            return
        row.advice, row.mig_profile = MIG, profile.name
        row.reason = (
            f"{profile.memory_mib} MiB >= peak x {MEMORY_HEADROOM:g}, "
            f"{profile.slices}/{model.compute_slices} of the compute >= p95"
        )
        return
    if not memory_total_mib or not math.isfinite(memory_total_mib) or not math.isfinite(need):
        # no figure, or one too large to be a GPU's (the exporter's sum overflowed)
        row.reason = "no MIG geometry for this GPU and its memory size is unknown"
        return
    by_memory = int(memory_total_mib // need) if need > 0 else MAX_SHARE
    by_compute = int(100 // p95) if p95 > 0 else MAX_SHARE
    share = min(MAX_SHARE, by_memory, by_compute)
    if share < 2:
        row.reason = "no MIG geometry for this model, and two would not fit one GPU"
        return
    row.advice, row.share = SHARE, share
    row.reason = f"no MIG geometry for this model; {share} fit one by memory and p95"


def smallest_profile(model: GpuModel, memory_mib: float, utilization: float) -> Profile | None:
    """The smallest plain MIG profile (no media-engine variant) with at least this much
    memory and a share of the compute ≥ utilization percent; None if there is none."""
    fitting = [
        p
        for p in model.profiles
        if "+" not in p.name
        and "-" not in p.name
        and p.memory_mib is not None
        and p.memory_mib >= memory_mib
        and 100 * p.slices / model.compute_slices >= utilization
    ]
    return min(fitting, key=lambda p: (p.size, p.slices, p.memory_mib or 0), default=None)


def gpus_needed(rows: list[WorkloadAdvice]) -> int:
    """GPUs the advice leaves in use: kept ones, MIG demand packed per model by the exact
    planner, time-sliced pods k to a GPU."""
    from gpuctl.gpus.mig_demand import Fleet, plan_demand

    needed = 0
    demand: dict[GpuModel, Counter[str]] = {}
    shared: Counter[tuple[str | None, int]] = Counter()
    for r in rows:
        if r.advice == KEEP:
            needed += r.gpus
        elif r.advice == MIG:
            model = geometry.find_model(r.model or "")
            demand.setdefault(model, Counter())[r.mig_profile or ""] += r.gpus
        elif r.advice == SHARE and r.share:
            shared[(r.model, r.share)] += r.gpus
    for model, profiles in demand.items():
        needed += plan_demand(dict(profiles), [Fleet(model, None)]).gpus
    needed += sum(-(-n // share) for (_, share), n in shared.items())
    return needed
