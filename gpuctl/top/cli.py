"""`gpuctl top`: live GPU tables, from NVML on this node or from Prometheus for a cluster."""

from __future__ import annotations

import typer

from gpuctl.cli import options
from gpuctl.cli.output import Format

SIMULATE = options.listed(
    None,
    "--simulate",
    envvar="GPUCTL_SIMULATE",
    metavar="SPEC",
    help="Use a simulated node instead of the NVML driver, e.g. 8xH100-80GB or 2xH200,2xA30; "
    "8xMI300X simulates AMD GPUs read through AMD SMI.",
)
PROMETHEUS = options.prometheus(
    "Cluster-wide view from DCGM-exporter metrics in this Prometheus "
    "(also prometheus_url in the config file)."
)
DELAY = options.seconds(2.0, "-d", "--delay", low=0.1, high=3600, help="Seconds between refreshes.")
ONCE = typer.Option(False, "--once", help="Print one frame and exit.")
SORT = typer.Option(
    "index",
    "--sort",
    metavar="KEY",
    help="Order GPUs by index (node view) or node (cluster view), or highest first by "
    "util, memory, temp or power; cluster view also idle (lowest mean over --window first).",
)
WINDOW = options.duration(
    "10m", "--window", help="Cluster view: window over which a GPU's mean utilization is taken."
)
IDLE_THRESHOLD = options.percent(
    5.0, "--idle-threshold", help="Cluster view: a GPU under this mean utilization is idle."
)


def _cluster_view(simulate: str | None, prometheus: str | None) -> bool:
    """Which view: the one an option names (both: a usage error), else the one the
    environment names (GPUCTL_PROMETHEUS_URL before GPUCTL_SIMULATE), else the config
    file's prometheus_url; else this node's."""
    from gpuctl.cli.application import application
    from gpuctl.common.errors import UsageError

    if options.given("simulate") and options.given("prometheus"):
        raise UsageError(
            "--simulate and --prometheus ask for two views: the node's and the cluster's",
            hint="give one of them",
        )
    if options.given("simulate") or options.given("prometheus"):
        return options.given("prometheus")
    if prometheus:  # GPUCTL_PROMETHEUS_URL
        return True
    return not simulate and application().names_prometheus(None)


def register(app: typer.Typer) -> None:
    app.command("top")(top)


def top(
    simulate: str | None = SIMULATE,
    prometheus: str | None = PROMETHEUS,
    delay: float = DELAY,
    once: bool = ONCE,
    output: Format = options.output(),
    sort: str = SORT,
    window: str = WINDOW,
    idle_threshold: float = IDLE_THRESHOLD,
    exporter_container: list[str] = options.exporter_containers(),
    exporter_job: list[str] = options.exporter_jobs(),
) -> None:
    """Show GPU utilization, memory, temperature, power and processes."""
    from gpuctl.runtime.config import setting_list

    if not _cluster_view(simulate, prometheus):
        from gpuctl.top.node import cli as top_node

        top_node.run(simulate, delay=delay, once=once, output=output.value, sort=sort)
        return
    from gpuctl.dcgm import holders
    from gpuctl.top.cluster import cli as top_cluster

    exporter = holders.exporter(
        setting_list("exporter_containers", exporter_container),
        setting_list("exporter_jobs", exporter_job),
    )
    top_cluster.run(
        prometheus,
        delay=delay,
        once=once,
        output=output.value,
        window=window,
        idle_threshold=idle_threshold,
        exporter=exporter,
        sort=sort,
    )
