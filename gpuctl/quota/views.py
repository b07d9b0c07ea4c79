"""How `gpuctl quota` shows what it plans, does and finds: the plan of `quota set` with the
fields that change, the confirmation rule, and the tables of `quota list` and `quota lint`.
CLI side (rich)."""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, Any

from gpuctl.cli.output import Format, dump, dump_documents, echo, err_console, out_console

if TYPE_CHECKING:  # `quota list` shows no plan, and has no need of the planning modules
    from gpuctl.quota.core.plans import SetPlan


def show_set_plan(plan: SetPlan, output: Format | None) -> None:
    """The notes and the plan on stderr, per object what is done with it and the fields that
    change; with -o yaml|json the objects on stdout."""
    from gpuctl.quota.core.plans import KueuePlan

    err = err_console()
    for note in plan.notes:
        err.print(note, style="yellow", markup=False, highlight=False)
    if isinstance(plan, KueuePlan):
        err.print(f"engine: kueue (kueue.x-k8s.io/{plan.version})", highlight=False)
        for step in plan.steps:
            label = "namespace" if step.kind == "Namespace" else step.kind
            err.print(f"{label} {step.name}: {step.action}", highlight=False, markup=False)
            _print_changes(step.changes)
    else:
        err.print(f"namespace {plan.team}: {'create' if plan.create_namespace else 'exists'}")
        err.print(f"ResourceQuota {plan.quota_name}: {plan.quota_action}")
        _print_changes(plan.changes)
    if output is not None and output != Format.table:
        echo(dump_documents(plan.objects(), output.value))


def _print_changes(changes: list[tuple[str, str | None, str | None]]) -> None:
    from gpuctl.quota.core.plans import change_text

    for change in changes:
        err_console().print(f"  {change_text(change)}", highlight=False, markup=False)


def show_done(plan: SetPlan) -> None:
    from gpuctl.quota.core.plans import KueuePlan

    if not isinstance(plan, KueuePlan):
        hard = plan.desired
        terms = [f"{hard[k]} {k.removeprefix('requests.')}" for k in hard]
        err_console().print(f"[green]done[/]: {plan.team} may request " + ", ".join(terms))
        return
    q = plan.quota
    flavors = ", ".join(f.name for f in plan.flavors)
    terms = [f"{q.gpus} nvidia.com/gpu", *(f"{k} {r}" for r, k in sorted(q.mig.items()))]
    sharing = (
        f"; cohort {q.cohort}"
        + (f", borrows up to {q.borrowing_limit}" if q.borrowing_limit is not None else "")
        + (f", lends up to {q.lending_limit}" if q.lending_limit is not None else "")
        if q.cohort
        else ""
    )
    err_console().print(
        f"[green]done[/]: {q.team} may use {', '.join(terms)} on each of: {flavors}{sharing}; "
        f"jobs go to LocalQueue {q.team} in namespace {q.team}",
        highlight=False,
    )


def show_queues(rows: list[Any], output: Format) -> None:
    """`quota list` with Kueue: per ClusterQueue its workloads and a table of its flavors."""
    if output != Format.table:
        echo(dump({"clusterQueues": [r.to_dict() for r in rows]}, output.value))
        return
    from rich.markup import escape

    from gpuctl.cli.output import new_table as Table

    console = out_console()
    if not rows:
        console.print("No ClusterQueues found.")
    for name, group in groupby(rows, key=lambda r: r.cluster_queue):
        mine = list(group)
        first = mine[0]
        cohort = f"  cohort {first.cohort}" if first.cohort else ""
        console.print(
            escape(
                f"ClusterQueue {name}{cohort}  workloads: {first.pending} pending, "
                f"{first.admitted} admitted"
            ),
            highlight=False,
        )
        table = Table(box=None)
        for col in ("FLAVOR", "RESOURCE", "NOMINAL", "IN USE", "BORROWED", "LENT"):
            table.add_column(col)
        table.add_column("MAX BORROW")
        table.add_column("MAX LEND")
        for r in mine:
            table.add_row(
                r.flavor,
                r.resource,
                r.nominal,
                r.in_use,
                r.borrowed,
                r.lent,
                r.borrowing_limit or "-",
                r.lending_limit or "-",
            )
        console.print(table)


def show_resource_quotas(rows: list[dict[str, Any]], output: Format) -> None:
    """`quota list` without Kueue: GPUs used and allowed per namespace and resource."""
    if output != Format.table:
        echo(dump({"quotas": rows}, output.value))
        return
    from gpuctl.cli.output import new_table as Table

    table = Table(box=None)
    for col in ("NAMESPACE", "RESOURCE", "USED", "HARD", "FREE", "QUOTA", "USED FROM"):
        table.add_column(col)
    for r in rows:
        hard = "-" if r["hard"] is None else str(r["hard"])
        free = "-" if r["hard"] is None else str(max(r["hard"] - r["used"], 0))
        used = (
            f"[red]{r['used']}[/]"
            if r["hard"] is not None and r["used"] > r["hard"]
            else str(r["used"])
        )
        table.add_row(
            r["namespace"], r["resource"], used, hard, free, r["quota"] or "(none)", r["source"]
        )
    out_console().print(table if rows else "No GPU quotas and no GPU pods found.")


def show_lint(rows: list[Any], findings: list[Any], ok: bool, output: Format) -> None:
    """`quota lint`: nominal quota against allocatable per flavor, then the findings."""
    if output != Format.table:
        data = {
            "ok": ok,
            "capacity": [r.to_dict() for r in rows],
            "findings": [f.to_dict() for f in findings],
        }
        echo(dump(data, output.value))
        return
    from rich.markup import escape

    from gpuctl.cli.output import new_table as Table

    table = Table(box=None)
    for col in ("FLAVOR", "RESOURCE", "NOMINAL (SUM)", "ALLOCATABLE", "QUEUES"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.flavor, r.resource, r.nominal, r.allocatable, str(r.queues))
    console = out_console()
    console.print(table if rows else "No GPU quota in any ClusterQueue.")
    style = {"error": "red", "warning": "yellow"}
    for f in findings:
        console.print(f"[{style[f.level]}]{f.level}[/]: {escape(f.message)}", highlight=False)
    if not findings and rows:
        console.print("[green]ok[/]: every nominal quota fits what its flavor's nodes have")
