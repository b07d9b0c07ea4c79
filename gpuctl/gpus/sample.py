"""Plain records of what NVML reports about a node: one NodeSample per refresh of `top`,
and the MIG layout (GPU and compute instances) that `mig` reads and changes.

A field NVML does not support on a GPU is None (shown `N/A`, `null` in JSON)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ComputeInstance:
    ci_id: int
    profile_id: int  # NVML_COMPUTE_INSTANCE_PROFILE_* value (0 = 1 slice, 1 = 2 slices, ...)


@dataclass(frozen=True)
class GpuInstance:
    gi_id: int
    profile_id: int  # the GPU-instance profile *id* (19, 14, 9, ...), not the index constant
    start: int  # placement, in memory slices
    size: int
    compute_instances: list[ComputeInstance] = field(default_factory=list)
    profile_index: int | None = None  # its NVML_GPU_INSTANCE_PROFILE_* constant, where known


@dataclass(frozen=True)
class Process:
    pid: int
    name: str | None
    user: str | None
    used_memory_mib: int | None
    gi_id: int | None = None  # set when the process runs on a MIG device
    ci_id: int | None = None


@dataclass(frozen=True)
class MigDevice:
    gi_id: int
    ci_id: int
    uuid: str | None
    profile: (
        str | None
    )  # e.g. "3g.40gb", or "1c.3g.40gb" for a compute instance smaller than its GI
    memory_used_mib: int | None
    memory_total_mib: int | None
    placement_start: int | None
    placement_size: int | None


@dataclass(frozen=True)
class GpuSample:
    index: int
    uuid: str | None
    name: str | None
    utilization_gpu: int | None  # percent; None on MIG-enabled GPUs, as NVML reports it
    utilization_memory: int | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    temperature_c: int | None
    power_w: float | None
    power_limit_w: float | None
    fan_percent: int | None
    clock_sm_mhz: int | None
    clock_mem_mhz: int | None
    mig_mode: int | None  # current; None if the GPU has no MIG
    mig_mode_pending: int | None
    mig_devices: list[MigDevice] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)


@dataclass(frozen=True)
class NodeSample:
    gpus: list[GpuSample]
    driver_version: str | None = None
    simulated: bool = False


def to_dict(sample: NodeSample) -> dict[str, Any]:
    """The JSON shape `gpuctl top -o json` prints (stable field names)."""
    return {
        "driver_version": sample.driver_version,
        "simulated": sample.simulated,
        "gpus": [asdict(g) for g in sample.gpus],
    }
