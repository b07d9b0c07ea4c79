"""`gpuctl nodes`: per node, the accelerators it offers (any vendor; device plugin or DRA),
allocated and free."""

from __future__ import annotations

import enum

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster


class Output(str, enum.Enum):
    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"


OUTPUT = typer.Option(
    Output.table,
    "-o",
    "--output",
    help="table, wide (adds memory, partition, sharing, unhealthy, product), json or yaml.",
)
ALL = typer.Option(False, "--all", help="Also list the nodes without accelerators.")
TOPOLOGY = typer.Option(
    False,
    "--topology",
    help="Group the nodes and their free accelerators by each topology label they carry "
    "(zone, spine, block, NVLink clique; docs/topology.md).",
)


def register(app: typer.Typer) -> None:
    app.command("nodes")(nodes)


@uses_cluster
def nodes(
    selector: str | None = options.selector("Label selector for the nodes, e.g. pool=train."),
    output: Output = OUTPUT,
    everything: bool = ALL,
    topology: bool = TOPOLOGY,
) -> None:
    """List each node's accelerators: vendor, model, count, allocated and free, through which
    source (device plugin or DRA) and resource or DeviceClass. JSON and YAML are a stable
    contract (docs/nodes.md)."""
    from gpuctl.nodes import service, views

    found = service.inventory(application().kube(), selector, everything)
    views.show(found, output.value, everything, topology)
