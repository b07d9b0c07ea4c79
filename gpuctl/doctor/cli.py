"""`gpuctl doctor`: is this cluster ready for GPU work?"""

from __future__ import annotations

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import Format, dump, echo, out_console


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


_STYLE = {"pass": "green", "warn": "yellow", "fail": "red"}
PROMETHEUS = typer.Option(
    None,
    "--prometheus",
    envvar="GPUCTL_PROMETHEUS_URL",
    metavar="URL",
    help="Also check which busy signal this Prometheus has (SM activity or only a duty cycle).",
)


@uses_cluster
def doctor(
    node: list[str] = options.nodes(
        "Check only this node (repeat it, or separate names with commas)."
    ),
    output: Format = options.output(),
    prometheus: str | None = PROMETHEUS,
) -> None:
    """Check the cluster's GPU stack: GPU nodes, feature discovery labels, the device plugin,
    MIG, sharing configs, DCGM exporter; Kueue and JobSet (versions), Kueue's all-or-nothing
    admission (waitForPodsReady), GPU resources covered by ClusterQueues; with a Prometheus,
    the busy signal its DCGM series give. Exits 1 if any check fails."""
    from gpuctl.doctor import service as run_doctor
    from gpuctl.doctor.core.checks import failed
    from gpuctl.runtime.config import setting

    with application().kube() as kube:
        checks = run_doctor.run(kube, options.node_names(node))
    url = setting("prometheus_url", prometheus)
    if url:
        from gpuctl.adapters.prometheus import Prometheus

        checks.append(run_doctor.busy_signal(Prometheus(url)))
    if output != Format.table:
        echo(
            dump({"ok": not failed(checks), "checks": [c.to_dict() for c in checks]}, output.value)
        )
    else:
        from rich.markup import escape

        from gpuctl.cli.output import new_table as Table

        table = Table(box=None, show_lines=False)
        for col in ("STATUS", "CHECK", "DETAIL", "FIX"):
            table.add_column(col, overflow="fold")
        for c in checks:
            table.add_row(
                f"[{_STYLE[c.status]}]{c.status}[/]", c.name, escape(c.detail), escape(c.fix)
            )
        out_console().print(table)
    if failed(checks):
        raise typer.Exit(1)
