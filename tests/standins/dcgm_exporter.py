"""The dcgm-exporter stand-in the tests use: gpuctl.sim.dcgm_exporter (shipped for
`gpuctl sandbox`)."""

from gpuctl.sim.dcgm_exporter import (
    DEFAULT_COUNTERS,
    FIELDS,
    GPU_OPERATOR,
    HELM_CHART,
    PER_PROCESS,
    Deployment,
    Device,
    ExporterServer,
    Holder,
    Release,
    ThreadedServer,
    default_values,
    metrics_text,
    servicemonitor_scrape_config,
    static_scrape_config,
)

__all__ = [
    "DEFAULT_COUNTERS",
    "FIELDS",
    "GPU_OPERATOR",
    "HELM_CHART",
    "PER_PROCESS",
    "Deployment",
    "Device",
    "ExporterServer",
    "Holder",
    "Release",
    "ThreadedServer",
    "default_values",
    "metrics_text",
    "servicemonitor_scrape_config",
    "static_scrape_config",
]
