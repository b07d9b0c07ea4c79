"""Tables and documents of `gpuctl reclaim` and `gpuctl make-room`."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from gpuctl.cli.output import Format, dump, echo, err_console, out_console
from gpuctl.reclaim.core.decide import Finding, duration_text

if TYPE_CHECKING:
    from gpuctl.adapters.kube_guarded import Evictions


def show_finding(finding: Finding, output: Format) -> None:
    """The table, the signal and the plan; with -o json|yaml the plan alone, on stderr (the
    document comes at the end: `account`)."""
    if output != Format.table:
        _plan_to_stderr(finding.plan.lines() + list(finding.plan.notes))
        return
    from rich.table import Table

    table = Table(box=None)
    for column in ("WORKLOAD", "TEAM", "GPUS", "STATUS", "IDLE", "ACTION", "WHY"):
        table.add_column(column, overflow="fold")
    for r in finding.rows:
        idle = "-"
        if r.idle_since is not None:
            idle = duration_text(finding.now - r.idle_since) + ("" if r.idle_since_known else "+")
        w = r.workload
        table.add_row(w.target, w.team, str(w.gpus), r.status, idle, r.action or "-", r.why)
    console = out_console()
    if finding.rows:
        console.print(table)
    else:
        console.print("No pods hold GPUs.")
    console.print(f"signal: {finding.signal}; busy at ≥ {finding.policy.busy_percent} %")
    for line in finding.plan.lines() + list(finding.plan.notes):
        console.print(line, markup=False, highlight=False)


def _plan_to_stderr(lines: list[str]) -> None:
    err = err_console()
    for line in lines:
        err.print(line, markup=False, highlight=False)


def show_plan(plan: Any, output: Format, data: dict[str, Any] | None = None) -> None:
    if output != Format.table:
        echo(dump(data if data is not None else plan.to_dict(), output.value))
        _plan_to_stderr(plan.lines() + list(plan.notes))
        return
    console = out_console()
    for line in plan.lines() + list(plan.notes):
        console.print(line, markup=False, highlight=False)


def plan_text(plan: Any, output: Format) -> None:
    """The plan's text: on stdout, or on stderr when stdout carries -o json|yaml."""
    lines = plan.lines() + list(plan.notes)
    if output != Format.table:
        _plan_to_stderr(lines)
        return
    console = out_console()
    for line in lines:
        console.print(line, markup=False, highlight=False)


def account(
    data: dict[str, Any], output: Format, evictions: Evictions
) -> AbstractContextManager[None]:
    """Around carrying a plan out: the document (DATA and the pods evicted) at the end, or
    the pods evicted said at the end of a run that went through (gpuctl.cli.workflow)."""
    from gpuctl.cli.workflow import reported

    def summary() -> str | None:
        return evictions.account() if evictions.done else None

    return reported(output, lambda: {**data, **evictions.to_dict()}, summary)
