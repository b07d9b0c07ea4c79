"""DCGM-exporter's metrics as Prometheus holds them: the names gpuctl reads, and the labels
that tell one GPU or MIG device from another whatever the scrape setup. Pure."""

from __future__ import annotations

from typing import Any

UTIL = (
    "DCGM_FI_DEV_GPU_UTIL"  # percent; absent or a constant 0 for MIG devices: never used for them
)
GR_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0..1; what MIG devices report
# Profiling (DCP) fields, ratios 0..1, per GPU or MIG device. dcgm-exporter's default
# counters file (etc/default-counters.csv) ships SM_ACTIVE and SM_OCCUPANCY commented out:
# they are there only where a counters file enables them (provision's GPU stack does).
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"  # share of cycles an SM has at least one warp
SM_OCCUPANCY = "DCGM_FI_PROF_SM_OCCUPANCY"  # resident warps / the SMs' maximum
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
DRAM_ACTIVE = "DCGM_FI_PROF_DRAM_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"  # MiB, dcgm-exporter 4.3.1-4.4.0 and later
TEMP = "DCGM_FI_DEV_GPU_TEMP"  # Celsius
POWER = "DCGM_FI_DEV_POWER_USAGE"  # Watts
METRICS = (UTIL, GR_ACTIVE, SM_ACTIVE, FB_USED, FB_FREE, FB_RESERVED, TEMP, POWER)

# Labels that tell one device from another: its UUID (and MIG instance) where the
# exporter gives one, else its node and index. Grouping by exactly these on the server
# drops the scrape's own labels (instance, job, driver version...), which both shrinks
# the answer and folds together the same GPU scraped twice.
BY_UUID = ("UUID", "GPU_I_ID")
BY_HOST = ("Hostname", "hostname", "gpu", "GPU_I_ID")
IDENTITY = ("Hostname", "hostname", "gpu", "UUID", "GPU_I_ID")
WHOLE = 'GPU_I_ID=""'  # a whole GPU: a series without a GPU instance

Key = tuple[str, ...]  # values of IDENTITY, "" where absent


def key_of(labels: dict[str, Any]) -> Key:
    """The device a series is about; the MIG instance (or "") is always last."""
    get = labels.get  # spelled out: this runs once per sample, tens of thousands per frame
    uuid = get("UUID")
    if uuid:
        return (uuid, get("GPU_I_ID", ""))
    return ("", get("Hostname", ""), get("hostname", ""), get("gpu", ""), get("GPU_I_ID", ""))
