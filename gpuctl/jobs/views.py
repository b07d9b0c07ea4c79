"""How `gpuctl render`, `submit` and `jobs …` show what the jobs services return: the fit
table, the jobs table, a job's fields, `jobs why` in words, the `render --explain` tables,
what submit found and did, and the status lines of `submit --wait`. CLI-side (rich)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gpuctl.cli.output import (
    DataFormat,
    dump,
    dump_documents,
    echo,
    err_console,
    inform,
    out_console,
)

if TYPE_CHECKING:
    from gpuctl.gpus.topology import Constraint
    from gpuctl.jobs.core.submit import SubmitPlan
    from gpuctl.jobs.diagnose import Diagnosis
    from gpuctl.k8s.fit import FitReport
    from gpuctl.k8s.placement import Placement

JOBS_COLUMNS = ("NAMESPACE", "NAME", "KIND", "WORKERS", "GPUS/WORKER", "STATUS")
COUNTS = ("ACTIVE", "SUCCEEDED", "FAILED")
WIDE = ("RESTARTS", "QUEUE", "IMAGE", "AGE")  # -o wide, as kubectl adds columns
# `jobs get`'s fields, in order (the row has more, for -o json/yaml)
FIELDS = (
    "namespace", "name", "kind", "workers", "gpus_per_worker", "status",
    "active", "succeeded", "failed", "restarts",
)  # fmt: skip


def warn(text: str) -> None:
    err_console().print(f"warning: {text}", style="yellow", markup=False)


def fit_table(report: FitReport) -> Any:
    from gpuctl.cli.output import new_table as Table

    table = Table(
        title=f"Fit: {report.workers} × {report.per_worker} {report.resource}", title_justify="left"
    )
    for col in ("node", "gpu type", "allocatable", "free", "workers now", "why"):
        table.add_column(col)
    for n in report.nodes:
        table.add_row(
            n.name, n.gpu_type or "-", str(n.allocatable), str(n.free), str(n.slots_now), n.reason
        )
    if not report.nodes:
        table.add_row("(no GPU nodes)", "", "", "", "", "")
    return table


def domain_table(report: FitReport) -> Any:
    """The fit per domain of the topology the workers must share."""
    from gpuctl.cli.output import new_table as Table

    table = Table(title=f"Fit {report.within}", title_justify="left")
    for col in ("domain", "nodes", "free", "workers now", "workers when empty"):
        table.add_column(col)
    for d in report.domains:
        table.add_row(d.value, str(len(d.nodes)), str(d.free), str(d.slots_now), str(d.slots_ever))
    if not report.domains:
        table.add_row(f"(no GPU node carries {report.key})", "", "", "", "")
    return table


def submit_findings(plan: SubmitPlan) -> None:
    """What planning the submit found, on stderr: the queue note, a fit check not made, the
    fit table when the job does not fit now, and the warnings."""
    if (c := plan.spec.topology) is not None:
        from gpuctl.jobs.core.topology import how

        note = f"{c.assumed}; " if c.assumed else ""
        domain = f", sharing NVLink through ComputeDomain {plan.spec.name}" if plan.spec.compute_domain else ""  # fmt: skip
        err_console().print(f"{note}pods kept {c.words()} by {how(c)}{domain}", markup=False)
    if plan.queue_note:
        err_console().print(f"[yellow]{plan.queue_note}[/]", highlight=False)
    if plan.fit_skipped:
        err_console().print(
            f"warning: no fit check: {plan.fit_skipped}", style="yellow", markup=False
        )
    if plan.shows_fit and plan.fit is not None:
        err_console().print(fit_table(plan.fit))
        if plan.fit.key is not None:
            err_console().print(domain_table(plan.fit))
    if plan.waits_for_room and plan.fit is not None:
        err_console().print(
            f"No room right now: {plan.spec.name} waits ({plan.fit.waiting_reason()}).",
            style="yellow",
            markup=False,
        )
    for warning in plan.warnings:
        err_console().print(f"warning: {warning}", style="yellow", markup=False)
    if plan.adapter_rule is not None:
        adapter_rule(plan.adapter_rule)


def placement_notes(
    name: str, where: Placement, topology: Constraint | None = None, domain: bool = False
) -> None:
    """What render assumed of the cluster's labels for job NAME (stderr); DOMAIN: whether
    it renders a ComputeDomain."""
    if where.scheme:
        inform(f"{name}: its accelerator type selects nodes under {where.scheme}")
    for note in where.notes:
        inform(f"{name}: {note}")
    if topology is not None:
        from gpuctl.gpus.topology import CLIQUE
        from gpuctl.jobs.core.topology import how

        note = f"{topology.assumed}; " if topology.assumed else ""
        inform(f"{name}: {note}pods kept {topology.words()} by {how(topology)}")
        if topology.key == CLIQUE and topology.required and not domain:
            inform(
                f"{name}: submit adds a ComputeDomain where the cluster serves them on "
                "DRA-managed trays (compute_domain: true renders one here)"
            )


def adapter_rule(rule: dict) -> None:
    """A prometheus-adapter rule to add to the adapter's config, on stderr (the objects
    may be on stdout)."""
    text = dump({"externalRules": [rule]}, "yaml")
    err_console().print(
        f"# prometheus-adapter: add to its config (Helm: rules.external):\n{text}",
        markup=False,
        highlight=False,
    )


def objects(plan: SubmitPlan, output: DataFormat) -> None:
    echo(dump_documents(list(plan.objects), output.value))


def dry_run(plan: SubmitPlan, output: DataFormat | None) -> None:
    inform(f"create {plan.names} in namespace {plan.namespace}")
    objects(plan, output or DataFormat.yaml)


def submitted(plan: SubmitPlan, output: DataFormat | None) -> None:
    """What was created (or validated by a server dry run), and where it goes next."""
    verb = "validated (server dry run)" if plan.server_dry_run else "created"
    err_console().print(f"{plan.names} {verb} in namespace {plan.namespace}")
    if output is not None:
        objects(plan, output)
    spec = plan.spec
    if spec.queue and not plan.server_dry_run:
        inform(
            f"queued in LocalQueue {spec.queue}: Kueue starts it when there is quota for "
            f"all {spec.nodes} worker(s); gpuctl jobs why {spec.name} -n {plan.namespace} "
            "tells why not"
        )


@contextmanager
def wait_status(plan: SubmitPlan) -> Iterator[Callable[[dict], None]]:
    """A spinner while waiting for the job, and a line for each change of its status."""
    kind, name = plan.kind, plan.spec.name
    err = err_console()
    shown: list[str] = []  # the lines printed so far
    with err.status(f"waiting for {kind} {name}") as status:

        def update(row: dict) -> None:
            text = (
                f"{kind} {name}: {row['status']} — {row['active']} running, "
                f"{row['succeeded']}/{row['workers']} succeeded, {row['failed']} failed"
            )
            status.update(text)
            # A watch re-sends the current state; print each change once, as a plain line
            # (rich's log() would add a timestamp and this file's name and line).
            if shown[-1:] != [text]:
                shown.append(text)
                err.print(text, highlight=False)

        yield update


def jobs_table(rows: list[dict], wide: bool = False) -> None:
    import time

    from gpuctl.cli.output import new_table as Table
    from gpuctl.k8s.times import age

    table = Table(box=None)
    for col in JOBS_COLUMNS + COUNTS + (WIDE if wide else ()):
        table.add_column(col)
    now = time.time()
    for r in rows:
        more = (str(r["restarts"]), r["queue"] or "-", r["image"] or "-", age(r["created"], now))
        table.add_row(
            r["namespace"],
            r["name"],
            r["kind"],
            str(r["workers"]),
            gpus_text(r),
            r["status"],
            *(str(r[col.lower()]) for col in COUNTS),
            *(more if wide else ()),
        )
    out_console().print(table if rows else "No gpuctl jobs found.")


def gpus_text(row: dict) -> str:
    """A worker's GPUs as the tables say it: '8 × nvidia.com/gpu', or '-'."""
    return f"{row['gpus_per_worker']} × {row['gpu_resource']}" if row["gpu_resource"] else "-"


def job_fields(row: dict) -> None:
    for key in FIELDS:
        value = gpus_text(row) if key == "gpus_per_worker" else row[key]
        echo(f"{key + ':':<17}{value}\n")


def why(d: Diagnosis) -> None:
    """`gpuctl jobs why` as text: the job, its queue, what Kueue says, its pods, the fit."""
    from rich.markup import escape

    out = out_console()
    out.print(escape(d.job), highlight=False)
    if d.queue:
        target = f" → ClusterQueue {d.cluster_queue}" if d.cluster_queue else ""
        out.print(escape(f"queue: LocalQueue {d.queue}{target}"), highlight=False)
    if d.kueue or d.position:
        out.print(escape(f"Kueue Workload {d.workload}:" if d.workload else "Kueue:"))
        for line in d.kueue + ([d.position] if d.position else []):
            out.print(escape(f"  {line}"), highlight=False)
    if d.pods:
        out.print("pods:")
        for line in d.pods:
            out.print(escape(f"  {line}"), highlight=False)
    for line in d.compute_domain:
        out.print(escape(line), highlight=False)
    if d.fit is not None:
        out.print(fit_table(d.fit))
        if d.fit.key is not None:
            out.print(domain_table(d.fit))
        if not d.fit.can_ever_fit:
            out.print(escape(f"it can never fit: {d.fit.never_fits_reason()}"))
        elif d.fit.fits_now:
            out.print("the nodes have room for it now")
        else:
            out.print(escape(f"not now: {d.fit.waiting_reason()}"))
    if d.make_room:
        out.print(escape(d.make_room), highlight=False)


def explain_tables(reports: list[dict]) -> None:
    """`render --explain` as a table a job file: each field, its value, where it came from."""
    from rich.text import Text

    from gpuctl.cli.output import new_table as Table

    for report in reports:
        chain = " ← ".join(layer["from"] for layer in report["layers"])
        title = Text(f"{report['file']}: {chain}")
        table = Table(title=title, title_justify="left", box=None)
        for col in ("FIELD", "VALUE", "FROM", "AT"):
            table.add_column(col, overflow="fold")
        for row in report["fields"]:
            at = _short_path(row["at"])
            table.add_row(Text(row["field"]), Text(row["value"]), Text(row["from"]), Text(at))
        out_console().print(table)


def _short_path(at: str) -> str:
    """FILE:LINE with FILE relative to the working directory when it is below it."""
    if not os.path.isabs(at):
        return at
    relative = os.path.relpath(at)
    return at if relative.startswith("..") else relative
