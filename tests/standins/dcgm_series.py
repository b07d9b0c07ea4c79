"""Backfilled DCGM series as dcgm-exporter emits them by default: every field its default
counters file turns on (tests/dcgm/upstream/default-counters.csv), for one device, with the
values gpuctl.sim.dcgm_exporter.default_values makes up from how busy the device is.

- profiling "default": the default file's profiling fields (GR_ENGINE_ACTIVE, tensor, DRAM,
  PCIe) beside GPU_UTIL; "off": a GPU or exporter without them (GPU_UTIL alone judges);
  "sm": a counters file that turns SM_ACTIVE on (gpuctl's own, gpuctl.dcgm.counters).
- A MIG device (labels with GPU_I_ID and GPU_I_PROFILE) reports GPU_UTIL as 0 and its GPU's
  board readings (temperature, power, clocks): pass the GPU's `temp` and `power`.
- The busy-signal fields and the memory fields have the whole history; the others (clocks,
  power, errors, ...) the last minute only: what `now` reads, at a fraction of the samples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache

from gpuctl.dcgm import busy as busy_rule
from gpuctl.dcgm.metrics import FB_FREE, FB_USED
from gpuctl.sim.dcgm_exporter import PER_PROCESS, XID_TEXT, default_values
from tests.standins.prometheus import STEP_S, Series

Value = float | Callable[[float], float]
LONG = (*busy_rule.SIGNALS, FB_USED, FB_FREE)  # fields with the whole history
SHORT_S = 60
XID = "DCGM_FI_DEV_XID_ERRORS"


def _at(value: Value) -> Callable[[float], float]:
    return value if callable(value) else (lambda _age: value)


def device_series(
    labels: dict,
    busy: Value,
    used: Value,
    total: int,
    *,
    reserved: int = 0,
    temp: int | None = None,
    power: float | None = None,
    profiling: str = "default",
    overrides: dict[str, Value] | None = None,
    history_s: int = 1800,
    newest_s: int = 5,
    step_s: int = STEP_S,
) -> list[Series]:
    """Every default field of one device. busy: percent; used: MiB of `total` (reserved
    apart); each a constant or a function of the sample's age in seconds. overrides: a
    field's own value instead of the made-up one (e.g. SM_ACTIVE well below GR_ENGINE_ACTIVE)."""
    busy_at, used_at = _at(busy), _at(used)
    mig = "GPU_I_ID" in labels

    @cache
    def values(age: float) -> dict:
        u = int(used_at(age))
        return default_values(
            busy_at(age),
            u,
            total - reserved - u,
            reserved,
            temp=temp,
            power=power,
            mig=mig,
            profiling=profiling,
        )

    out = []
    for field in values(0):
        value = (overrides or {}).get(field)
        at = _at(value) if value is not None else (lambda age, f=field: values(age)[f])
        long = field in LONG or value is not None
        own = labels
        if field == XID:  # the exporter adds the code and its text (gpu_collector.go)
            own = {**labels, "err_code": "0", "err_msg": XID_TEXT[0]}
        out.append(
            Series(
                field,
                own,
                at,
                history_s=history_s if long else max(newest_s, min(history_s, SHORT_S)),
                newest_s=newest_s,
                step_s=step_s,
            )
        )
    return out


def shared_device_series(
    labels: dict, holders: Sequence[tuple[dict, float]], busy: Value, used: Value, total: int, **kw
) -> list[Series]:
    """A GPU several pods share (dcgm-exporter --kubernetes-virtual-gpus, time-slicing or
    MPS): every field copied on each pod's series (holders: (the pod's labels, its share
    of GPU_UTIL)), and for the per-process fields GPU_UTIL and FB_USED also the device's own
    series, without pod labels (internal/pkg/transformation/kubernetes.go)."""
    own = device_series(labels, busy, used, total, **kw)
    out = [s for s in own if s.name in PER_PROCESS]
    for pod_labels, share in holders:
        copies = device_series({**labels, **pod_labels}, busy, used, total, **kw)
        out += [replace(s, value=share) if s.name == "DCGM_FI_DEV_GPU_UTIL" else s for s in copies]
    return out
