"""`gpuctl render`, `gpuctl submit` and `gpuctl jobs …`."""

from __future__ import annotations

import enum

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import (
    DataFormat,
    Format,
    confirm,
    dump,
    dump_documents,
    echo,
    err_console,
    out_console,
)
from gpuctl.common.errors import GpuctlError, Interrupted

jobs_app = typer.Typer(
    help="List, inspect, follow and delete jobs that gpuctl submitted.", no_args_is_help=True
)


class Multinode(str, enum.Enum):
    jobset = "jobset"
    indexed_job = "indexed-job"


def _multinode_option(default_help: str):
    return typer.Option(
        None,
        "--multinode",
        help="How a multi-node job is made: jobset (a JobSet, restarted as one) or "
        f"indexed-job (an Indexed Job and a headless Service). {default_help}",
    )


# `submit --dry-run=server` arrives as `--dry-run` and this hidden flag: gpuctl.app rewrites
# it, as click cannot give `--dry-run` an optional value without taking the job file after
# it as that value.
SERVER_DRY_RUN = "--dry-run-server-side"

FOLLOW_START_TIMEOUT = 600  # seconds `jobs logs -f` waits for a pod to start


def register(app: typer.Typer) -> None:
    app.command("render")(render)
    app.command("submit")(submit)
    app.add_typer(jobs_app, name="jobs")


TEMPLATE_HELP = (
    "Site template: a name (looked up in the settings' templates_dir, then in gpuctl's own "
    "templates) or a path to a YAML file. Replaces the spec's own template:."
)


def _load(paths: list[str], label_key: str, template: str | None = None):
    """(spec, merge with its templates) for each job spec file; a warning on stderr for each
    gpu_type value that may match no node."""
    from gpuctl.jobs.core.spec import gpu_type_warnings
    from gpuctl.jobs.sources import load_job

    loaded = [load_job(p, template) for p in paths]
    for spec, merged in loaded:
        for warning in gpu_type_warnings(merged.doc, spec, label_key):
            err_console().print(f"warning: {warning}", style="yellow", markup=False, soft_wrap=True)
    return loaded


def _positive(value: float) -> float:
    from gpuctl.common.errors import UsageError

    if not value > 0:  # also refuses nan
        raise UsageError(f"--timeout must be a number of seconds above 0, got {value}")
    return value


def render(
    files: list[str] | None = typer.Argument(
        None, metavar="[JOB.yaml...]", help="Job spec files (or -f).", show_default=False
    ),
    file_options: list[str] = typer.Option(
        [], "-f", "--file", metavar="JOB.yaml", help="Job spec file (repeatable)."
    ),
    output: DataFormat | None = typer.Option(
        None,
        "-o",
        "--output",
        help="yaml (the default) or json; with --explain, a table unless given.",
    ),
    gpu_label_key: str | None = options.gpu_label_key(),
    template: str | None = typer.Option(
        None, "--template", metavar="NAME|PATH", help=TEMPLATE_HELP
    ),
    explain: bool = typer.Option(
        False,
        "--explain",
        help="Instead of manifests: each field's value and where it came from "
        "(the job, which template, or a default).",
    ),
    multinode: Multinode | None = _multinode_option(
        "Default: the spec's multinode:, else indexed-job (submit asks the cluster)."
    ),
) -> None:
    """Print the Kubernetes manifests for job specs. Needs no cluster."""
    from gpuctl.jobs.admission import multinode as decide_multinode
    from gpuctl.jobs.core.manifests import render as render_job

    key = options.resolve_gpu_label_key(gpu_label_key)
    loaded = _load(options.spec_files(file_options, files or [], "job spec"), key, template)
    if explain:
        _explain(loaded, output)
        return
    form = multinode.value if multinode else None
    docs = [
        obj for spec, _ in loaded for obj in render_job(decide_multinode(None, spec, form), key)
    ]
    echo(dump_documents(docs, (output or DataFormat.yaml).value))


def _explain(loaded: list, output: DataFormat | None) -> None:
    from gpuctl.jobs.core.templates import explain

    reports = [
        {
            "file": merged.doc.file,
            "layers": [{"from": layer.source, "file": layer.doc.file} for layer in merged.layers],
            "fields": explain(merged, spec),
        }
        for spec, merged in loaded
    ]
    if output is not None:
        echo(dump(reports, output.value))
        return
    from rich.table import Table
    from rich.text import Text

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
    import os

    if not os.path.isabs(at):
        return at
    relative = os.path.relpath(at)
    return at if relative.startswith("..") else relative


@uses_cluster
def submit(
    positional: str | None = typer.Argument(
        None, metavar="[JOB.yaml]", help="Job spec file (or -f).", show_default=False
    ),
    file: str | None = options.spec_file("JOB.yaml", "Job spec file."),
    namespace: str | None = options.namespace(
        f"Namespace (default: the spec's, else {options.NAMESPACE_DEFAULT})."
    ),
    dry_run: bool = options.dry_run(
        "Check fit and print the objects; create nothing. --dry-run=server: have the API "
        "server validate them too, without persisting."
    ),
    server_side: bool = typer.Option(False, SERVER_DRY_RUN, hidden=True),
    yes: bool = options.yes(
        "Accepted for scripts that pass it to every changing command: submit never asks "
        "(it only creates new objects; an existing job of that name is an error)."
    ),
    output: DataFormat | None = typer.Option(
        None,
        "-o",
        "--output",
        help="Print the objects created (or, with --dry-run, that would be) as yaml or json; "
        "--dry-run alone prints yaml.",
    ),
    wait: bool = typer.Option(
        False, "--wait", help="Follow the job to completion; exit 0 only if it succeeded."
    ),
    follow: bool = typer.Option(False, "--follow", help="Stream the logs of worker 0."),
    timeout: float = typer.Option(
        24 * 3600, "--timeout", callback=_positive, help="Seconds to --wait at most."
    ),
    gpu_label_key: str | None = options.gpu_label_key(),
    template: str | None = typer.Option(
        None, "--template", metavar="NAME|PATH", help=TEMPLATE_HELP
    ),
    multinode: Multinode | None = _multinode_option(
        "Default: the spec's multinode:, else jobset when the cluster has JobSet's CRD."
    ),
) -> None:
    """Check that a job fits the cluster and that the volumes and secrets it uses exist,
    then create it (all objects, or none). With Kueue, the job goes to its queue: (or the
    namespace's only LocalQueue) and starts when its ClusterQueue has quota for all of it."""
    from gpuctl.adapters.kube import Forbidden
    from gpuctl.jobs import admission
    from gpuctl.jobs import service as workloads
    from gpuctl.jobs.core.manifests import render as render_job

    key = options.resolve_gpu_label_key(gpu_label_key)
    named = options.spec_files(
        [file] if file else [], [positional] if positional else [], "job spec"
    )
    spec, _ = _load(named, key, template)[0]
    err = err_console()
    with application().kube() as kube:
        ns = namespace or spec.namespace or kube.namespace
        spec = admission.multinode(kube, spec, multinode.value if multinode else None)
        spec, note = admission.queue(kube, spec, ns)
        if note:
            err.print(f"[yellow]{note}[/]", highlight=False)
        manifests = render_job(spec, key)
        try:
            report = workloads.fit_report(kube, spec, key)
        except Forbidden as e:  # RBAC for one namespace only: the scheduler still decides
            err.print(f"warning: no fit check: {e.message}", style="yellow", markup=False)
            report = None
        if report and not report.can_ever_fit:
            err.print(_fit_table(report))
            raise GpuctlError(
                f"{spec.name} can never fit this cluster: "
                + report.never_fits_reason(key, spec.gpu_type),
                hint="change gpus / mig / gpu_type, or add capacity (gpuctl provision)",
            )
        if report and report.resource and not report.fits_now:
            err.print(_fit_table(report))
            err.print(
                f"[yellow]No room right now: {spec.name} will queue until "
                f"{report.workers} × {report.per_worker} {report.resource} are free.[/]"
            )
        for warning in workloads.check_references(kube, spec, ns):
            err.print(f"warning: {warning}", style="yellow", markup=False)
        admission.within_quota(kube, spec, ns)
        placed = [{**m, "metadata": {**m["metadata"], "namespace": ns}} for m in manifests]
        if dry_run and not server_side:
            err.print(f"dry run: would create {_names(manifests)} in namespace {ns}")
            echo(dump_documents(placed, (output or DataFormat.yaml).value))
            return
        workloads.create(kube, manifests, ns, "server" if server_side else None)
        verb = "validated (server dry run)" if server_side else "created"
        err.print(f"{_names(manifests)} {verb} in namespace {ns}")
        if output is not None:
            echo(dump_documents(placed, output.value))
        if server_side:
            return
        if spec.queue:
            err.print(
                f"queued in LocalQueue {spec.queue}: Kueue starts it when there is quota for "
                f"all {spec.nodes} worker(s); gpuctl jobs why {spec.name} -n {ns} tells why not",
                highlight=False,
            )
        kind = manifests[-1]["kind"]
        try:
            if follow:
                err.print(f"following the logs of {spec.name} once its first worker has started")
                for line in workloads.logs(kube, spec.name, ns, follow=True, start_timeout=timeout):
                    echo(line + "\n")
            if wait:
                final = _wait(kube, kind, spec.name, ns, timeout)
                if final != "Succeeded":
                    raise GpuctlError(
                        f"{kind} {ns}/{spec.name} {final.lower()}",
                        hint=f"gpuctl jobs logs {spec.name} -n {ns}",
                    )
        except KeyboardInterrupt:  # the job was submitted: only the watching stops
            raise Interrupted(
                f"interrupted; {kind} {ns}/{spec.name} keeps running",
                hint=f"gpuctl jobs delete {spec.name} -n {ns} stops it",
            ) from None


def _names(manifests: list[dict]) -> str:
    return ", ".join(f"{m['kind']}/{m['metadata']['name']}" for m in manifests)


def _wait(kube, kind: str, name: str, namespace: str, timeout: float) -> str:
    from gpuctl.jobs import service as workloads
    from gpuctl.jobs.core.status import status_of

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

        final = workloads.wait(kube, kind, name, namespace, timeout, update)
    return status_of(final)


def _fit_table(report):
    from rich.table import Table

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


@jobs_app.command("list")
@uses_cluster
def jobs_list(
    namespace: str | None = options.namespace(),
    all_namespaces: bool = typer.Option(False, "-A", "--all-namespaces"),
    output: Format = options.output(),
) -> None:
    """List jobs gpuctl manages."""
    from gpuctl.jobs import service as workloads
    from gpuctl.jobs.core.status import row

    with application().kube() as kube:
        ns = None if all_namespaces else (namespace or kube.namespace)
        rows = sorted(
            (row(o) for o in workloads.list_jobs(kube, ns)),
            key=lambda r: (r["namespace"] or "", r["name"]),
        )
    if output != Format.table:
        echo(dump({"jobs": rows}, output.value))
        return
    from rich.table import Table

    table = Table(box=None)
    for col in (
        "NAMESPACE",
        "NAME",
        "KIND",
        "WORKERS",
        "GPUS/WORKER",
        "STATUS",
        "ACTIVE",
        "SUCCEEDED",
        "FAILED",
    ):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["namespace"],
            r["name"],
            r["kind"],
            str(r["workers"]),
            r["gpus_per_worker"],
            r["status"],
            str(r["active"]),
            str(r["succeeded"]),
            str(r["failed"]),
        )
    out_console().print(table if rows else "No gpuctl jobs found.")


@jobs_app.command("get")
@uses_cluster
def jobs_get(
    name: str,
    namespace: str | None = options.namespace(),
    output: Format = options.output(),
) -> None:
    """Show one job: its status, or the whole object with -o yaml|json."""
    from gpuctl.jobs import service as workloads
    from gpuctl.jobs.core.status import row

    with application().kube() as kube:
        obj = workloads.get_job(kube, name, namespace or kube.namespace)
    if output != Format.table:
        echo(dump(obj, output.value))
        return
    for key, value in row(obj).items():
        echo(f"{key + ':':<17}{value}\n")


@jobs_app.command("logs")
@uses_cluster
def jobs_logs(
    name: str,
    namespace: str | None = options.namespace(),
    follow: bool = typer.Option(False, "-f", "--follow", help="Keep streaming (worker 0)."),
) -> None:
    """Print a job's logs (every worker, prefixed, for a multi-node job)."""
    from gpuctl.jobs import service as workloads

    with application().kube() as kube:
        for line in workloads.logs(
            kube,
            name,
            namespace or kube.namespace,
            follow,
            start_timeout=FOLLOW_START_TIMEOUT if follow else 0,
        ):
            echo(line + "\n")


@jobs_app.command("delete")
@uses_cluster
def jobs_delete(
    name: str,
    namespace: str | None = options.namespace(),
    yes: bool = options.yes(),
    dry_run: bool = options.dry_run("Say what would be deleted; delete nothing."),
    output: Format = options.output("table, json or yaml: the objects deleted."),
) -> None:
    """Delete a job gpuctl manages: its Job (with the Job's pods) or bare Pod, and its
    headless Service, including one left alone by an earlier failure."""
    from gpuctl.jobs import service as workloads

    err = err_console()
    with application().kube() as kube:
        ns = namespace or kube.namespace
        objects = workloads.find_job_objects(kube, name, ns)
        names = ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in objects)
        pods = " and the Job's pods" if any(o["kind"] == "Job" for o in objects) else ""
        if dry_run:
            err.print(f"dry run: would delete {names}{pods} in namespace {ns}", highlight=False)
            deleted = [f"{o['kind']}/{o['metadata']['name']}" for o in objects]
        else:
            confirm(f"Delete {names}{pods} in namespace {ns}?", yes)
            deleted = workloads.delete_job(kube, name, ns, objects)
            err.print(f"deleted {', '.join(deleted)} in namespace {ns}", highlight=False)
    if output != Format.table:
        echo(dump({"namespace": ns, "deleted": deleted, "dryRun": dry_run}, output.value))


@jobs_app.command("why")
@uses_cluster
def jobs_why(
    name: str,
    namespace: str | None = options.namespace(),
    gpu_label_key: str | None = options.gpu_label_key(),
    output: Format = options.output(),
) -> None:
    """Why a job is not running: what Kueue says of its Workload (quota reserved?
    admitted? evicted, and why? waiting for its pods?), its place in the queue, why its
    pods wait, and which nodes it fits."""
    from rich.markup import escape

    from gpuctl.jobs.diagnose import diagnose

    key = options.resolve_gpu_label_key(gpu_label_key)
    with application().kube() as kube:
        d = diagnose(kube, name, namespace or kube.namespace, key)
    if output != Format.table:
        echo(dump(d.to_dict(), output.value))
        return
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
    if d.fit is not None:
        out.print(_fit_table(d.fit))
        if not d.fit.can_ever_fit:
            out.print(escape(f"it can never fit: {d.fit.never_fits_reason(key, ())}"))
        elif d.fit.fits_now:
            out.print("the nodes have room for it now")
