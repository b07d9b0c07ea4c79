"""`gpuctl advise --prometheus URL`: what each workload's GPUs should become."""

from __future__ import annotations

from typing import Any

import typer

from gpuctl.cli import options
from gpuctl.cli.output import Format, dump, echo, out_console


def register(app: typer.Typer) -> None:
    app.command("advise")(advise)


def advise(
    prometheus: str | None = options.prometheus(),
    window: str = options.duration(
        "7d", "--window", help="How far back to look: peak memory, p95 and max utilization."
    ),
    namespace: str | None = options.namespace("Only workloads in this namespace."),
    idle_threshold: float = options.percent(
        5.0,
        "--idle-threshold",
        help="A workload whose GPUs stayed under this utilization the whole window is "
        "advised to release them.",
    ),
    output: Format = options.output(),
    exporter_container: list[str] = options.exporter_containers(),
    exporter_job: list[str] = options.exporter_jobs(),
) -> None:
    """Rightsizing advice per workload: keep its GPUs, move it to a MIG profile or a
    time-sliced share, or release them; and how many GPUs the cluster would free."""
    from gpuctl.advise import service
    from gpuctl.cli.application import application
    from gpuctl.dcgm import holders
    from gpuctl.runtime.config import setting_list

    client = application().prometheus(prometheus)
    exporter = holders.exporter(
        setting_list("exporter_containers", exporter_container),
        setting_list("exporter_jobs", exporter_job),
    )
    exporter = application().cluster_exporter(exporter)
    kube = application().cluster_if_any()  # who owns the pods, where there is a cluster
    result = service.advise(client, window, idle_threshold, namespace, exporter, kube)
    if output.value != "table":
        echo(dump(to_dict(result, window), output.value))
    else:
        out_console().print(table(result, window))


def to_dict(result, window: str) -> dict[str, Any]:
    def rounded(value):
        return None if value is None else round(value, 1)

    return {
        "window": window,
        "workloads": [
            {
                "namespace": r.workload.namespace,
                "kind": r.workload.kind,
                "name": r.workload.name,
                "owner_from": r.workload.source,
                "pods": r.pods,
                "vendor": r.vendor,
                "model": r.model,
                "gpus_held": r.gpus,
                "gpus_per_pod": r.gpus_per_pod,
                "peak_memory_mib": None if r.peak_memory_mib is None else round(r.peak_memory_mib),
                "p95_utilization": rounded(r.p95_utilization),
                "max_utilization": rounded(r.max_utilization),
                "advice": r.advice,
                "mig_profile": r.mig_profile,
                "share": r.share,
                "reason": r.reason,
            }
            for r in result.workloads
        ],
        "totals": {
            "gpus_held": result.totals.gpus_held,
            "gpus_needed": result.totals.gpus_needed,
            "gpus_freed": result.totals.gpus_freed,
            "signal": result.signal,
            # what the advice would free by the duty cycles alone (null: no SM_ACTIVE)
            "gpus_freed_by_duty_cycle": None
            if result.duty_cycle_totals is None
            else result.duty_cycle_totals.gpus_freed,
        },
    }


def _advice_text(r) -> str:
    if r.advice == "mig":
        return f"MIG {r.mig_profile}" + (f" ×{r.gpus}" if r.gpus > 1 else "")
    if r.advice == "time-slice":
        return f"time-slice 1/{r.share}"
    return r.advice


def table(result, window: str):
    """A rich table (label values pass through Text, which drops control characters) and
    the totals line."""
    from rich.console import Group
    from rich.text import Text

    from gpuctl.cli.output import new_table as Table

    def pct(v) -> str:
        return "-" if v is None else f"{v:.0f}%"

    t = Table(box=None, header_style="bold", pad_edge=False)
    numbers = ("GPUS", "PEAK MEM GiB", f"P95 {window}", "MAX")
    for name in ("NAMESPACE", "WORKLOAD", "MODEL", *numbers, "ADVICE", "WHY"):
        t.add_column(name, justify="right" if name in numbers else "left", overflow="fold")
    for r in result.workloads:
        t.add_row(
            Text(r.workload.namespace or "-"),
            Text(f"{r.workload.kind or '?'}/{r.workload.name}"),
            Text((r.model or "-").removeprefix("NVIDIA ")),
            str(r.gpus),
            "-" if r.peak_memory_mib is None else f"{r.peak_memory_mib / 1024:.1f}",
            pct(r.p95_utilization),
            pct(r.max_utilization),
            Text(_advice_text(r), style="" if r.advice == "keep" else "bold"),
            Text(r.reason),
        )
    totals = result.totals
    duty = result.duty_cycle_totals
    signal = f"busy signal {result.signal}" + (
        "" if duty is None else f" (by the duty cycle alone: {duty.gpus_freed} freed)"
    )
    return Group(
        t,
        Text(
            f"\nGPUs held now {totals.gpus_held} · needed after the advice "
            f"{totals.gpus_needed} · freed {totals.gpus_freed}",
            style="bold",
        ),
        Text(signal),
    )
