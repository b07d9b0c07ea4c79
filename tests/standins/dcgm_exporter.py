"""The dcgm-exporter stand-in the tests use: gpuctl.sim.dcgm_exporter (shipped for
`gpuctl sandbox`)."""

from gpuctl.sim.dcgm_exporter import (
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
    metrics_text,
    servicemonitor_scrape_config,
    static_scrape_config,
)

__all__ = [
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
    "metrics_text",
    "servicemonitor_scrape_config",
    "static_scrape_config",
]
