"""`gpuctl doctor`: is this cluster ready for GPU work?"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import Format, dump, echo, out_console

if TYPE_CHECKING:
    from gpuctl.k8s.placement import GpuRequest

# A job spec file's GPU request, loaded as `submit` loads it (with its templates). The job
# capability holds that loader, and capabilities do not import each other: gpuctl.app,
# above both, hands it over when it registers the command.
JobLoader = Callable[[str], "GpuRequest"]
_load_job: list[JobLoader] = []


def register(app: typer.Typer, load_job: JobLoader | None = None) -> None:
    if load_job is not None:
        _load_job[:] = [load_job]
    app.command("doctor")(doctor)


_STYLE = {"pass": "green", "warn": "yellow", "fail": "red"}
PROMETHEUS = options.prometheus(
    "Also check which busy signal this Prometheus has (SM activity or only a duty cycle)."
)
SPECS = typer.Option(
    [],
    "--spec",
    metavar="PATH",
    help="Also check that this job spec's GPU request (gpu_type, mig, shared) selects a node, "
    "as submit places it; a directory: its .yaml/.yml files (repeatable).",
)


@uses_cluster
def doctor(
    node: list[str] = options.nodes(
        "Check only this node (repeat it, or separate names with commas)."
    ),
    output: Format = options.output(),
    prometheus: str | None = PROMETHEUS,
    spec: list[str] = SPECS,
    gpu_label_key: str | None = options.gpu_label_key(),
) -> None:
    """Check the cluster's GPU stack: GPU nodes, feature discovery labels, the device plugin,
    MIG, sharing configs, DCGM exporter; Kueue and JobSet (versions), Kueue's all-or-nothing
    admission (waitForPodsReady), GPU resources covered by ClusterQueues; with a Prometheus,
    the busy signal its DCGM series give; with --spec, whether each job spec's GPUs select a
    node. Exits 1 if any check fails."""
    from gpuctl.doctor import service as run_doctor
    from gpuctl.doctor.core.checks import failed

    key = options.resolve_gpu_label_key(gpu_label_key)
    specs = [(path, _load_job[0](path)) for path in _spec_files(spec)] if spec else []
    with application().kube() as kube:
        checks = run_doctor.run(kube, options.node_names(node), specs, key)
    if application().names_prometheus(prometheus):
        checks.append(run_doctor.busy_signal(application().prometheus(prometheus)))
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


def _spec_files(paths: list[str]) -> list[str]:
    """Each PATH, a directory replaced by its .yaml/.yml files (in name order)."""
    import os

    from gpuctl.common.errors import UsageError

    out: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            out.append(path)
            continue
        found = sorted(f for f in os.listdir(path) if f.endswith((".yaml", ".yml")))
        if not found:
            raise UsageError(f"--spec {path}: the directory holds no .yaml or .yml file")
        out += [os.path.join(path, f) for f in found]
    return out
