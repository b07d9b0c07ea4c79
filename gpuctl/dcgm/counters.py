"""The dcgm-exporter counters file gpuctl's GPU stack ships: the fields every gpuctl view
reads, with the profiling (DCP) fields that measure work turned on. Pure.

dcgm-exporter reads a CSV of `DCGM field, Prometheus type, help` lines (`#` starts a
comment; etc/default-counters.csv and etc/dcp-metrics-included.csv in NVIDIA/dcgm-exporter
are its examples). Both ship DCGM_FI_PROF_SM_ACTIVE and DCGM_FI_PROF_SM_OCCUPANCY
commented out, so without a file of one's own the best busy signal is a duty cycle
(gpuctl.dcgm.busy). The GPU Operator takes the file as a ConfigMap named in its values
(`dcgmExporter.config`, key `dcgm-metrics.csv`); the dcgm-exporter chart as a mounted file
named by `-f`. Profiling fields need a GPU that has them (data-center GPUs from Volta on)
and cost a little DCGM overhead; on a GPU without them dcgm-exporter leaves them out.
"""

from __future__ import annotations

from gpuctl.dcgm import metrics

CONFIG_MAP = "gpuctl-dcgm-counters"
KEY = "dcgm-metrics.csv"  # the key the GPU Operator reads the file from

# (field, Prometheus type, help), grouped as dcgm-exporter's own files group them
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock (MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock (MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (C)."),
    (metrics.TEMP, "gauge", "GPU temperature (C)."),
    (metrics.POWER, "gauge", "Power draw (W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Energy since boot (mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "PCIe retries."),
    (metrics.UTIL, "gauge", "Duty cycle: share of time a kernel ran (%)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory copy utilization (%)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (%)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (%)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Last XID error code."),
    (metrics.FB_FREE, "gauge", "Framebuffer free (MiB)."),
    (metrics.FB_USED, "gauge", "Framebuffer used (MiB)."),
    (metrics.FB_RESERVED, "gauge", "Framebuffer reserved (MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter", "Pages retired for single-bit errors."),
    ("DCGM_FI_DEV_RETIRED_DBE", "counter", "Pages retired for double-bit errors."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "NVLink bandwidth counters of all lanes."),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Rows remapped for uncorrectable errors.",
    ),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped for correctable errors."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether a row remapping failed."),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver version."),
    # profiling (DCP) fields, ratios 0..1: what gpuctl's busy signal reads first
    (metrics.SM_ACTIVE, "gauge", "Share of cycles an SM had at least one warp."),
    (metrics.SM_OCCUPANCY, "gauge", "Resident warps over the SMs' maximum."),
    (metrics.GR_ACTIVE, "gauge", "Share of time the graphics/compute engine was active."),
    (metrics.TENSOR_ACTIVE, "gauge", "Share of cycles the tensor pipes were active."),
    (metrics.DRAM_ACTIVE, "gauge", "Share of cycles device memory was sending or receiving."),
)


def csv_text() -> str:
    """The counters file as dcgm-exporter reads it (three fields a line: no comma in a
    help text)."""
    lines = ["# gpuctl's dcgm-exporter counters: DCGM field, Prometheus type, help"]
    lines += [f"{name}, {kind}, {help_text}" for name, kind, help_text in COUNTERS]
    return "\n".join(lines) + "\n"


def enabled(text: str) -> list[str]:
    """The fields a counters file turns on (its lines that are not comments)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line.split(",", 1)[0].strip())
    return out
