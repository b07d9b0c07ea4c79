"""`gpuctl render`, `gpuctl submit` and `gpuctl jobs …`."""

from __future__ import annotations

import enum

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import (
    DataFormat,
    Format,
    ListFormat,
    dump,
    dump_documents,
    echo,
    err_console,
)
from gpuctl.cli.workflow import changes, go_ahead

jobs_app = typer.Typer(
    help="List, inspect, follow and delete jobs that gpuctl submitted.", no_args_is_help=True
)


class Multinode(str, enum.Enum):
    jobset = "jobset"
    indexed_job = "indexed-job"


class Autoscaler(str, enum.Enum):
    keda = "keda"
    hpa = "hpa"


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
    from gpuctl.jobs import views
    from gpuctl.jobs.core.spec import gpu_type_warnings
    from gpuctl.jobs.sources import load_job

    loaded = [load_job(p, template) for p in paths]
    for spec, merged in loaded:
        for warning in gpu_type_warnings(merged.doc, spec, label_key):
            views.warn(warning)
    return loaded


# Options, declared once so that each command's signature holds one line a parameter.
FILES = typer.Argument(
    None, metavar="[JOB.yaml...]", help="Job spec files (or -f).", show_default=False
)
FILE_OPTIONS = typer.Option(
    [], "-f", "--file", metavar="JOB.yaml", help="Job spec file (repeatable)."
)
RENDER_OUTPUT = typer.Option(
    None, "-o", "--output", help="yaml (the default) or json; with --explain, a table unless given."
)
TEMPLATE = typer.Option(None, "--template", metavar="NAME|PATH", help=TEMPLATE_HELP)
EXPLAIN = typer.Option(
    False,
    "--explain",
    help="Instead of manifests: each field's value and where it came from "
    "(the job, which template, or a default).",
)
RENDER_MULTINODE = _multinode_option(
    "Default: the spec's multinode:, else indexed-job (submit asks the cluster)."
)
JOB_FILE = typer.Argument(
    None, metavar="[JOB.yaml]", help="Job spec file (or -f).", show_default=False
)
SUBMIT_NAMESPACE = options.namespace(
    f"Namespace (default: the spec's, else {options.NAMESPACE_DEFAULT})."
)
SUBMIT_DRY_RUN = options.dry_run(
    "Check fit and print the objects; create nothing. --dry-run=server: have the API "
    "server validate them too, without persisting."
)
SERVER_SIDE = typer.Option(False, SERVER_DRY_RUN, hidden=True)
SUBMIT_YES = options.yes(
    "Accepted for scripts that pass it to every changing command: submit never asks "
    "(it only creates new objects; an existing job of that name is an error)."
)
SUBMIT_OUTPUT = typer.Option(
    None,
    "-o",
    "--output",
    help="Print the objects created (or, with --dry-run, that would be) as yaml or json; "
    "--dry-run alone prints yaml.",
)
WAIT = typer.Option(
    False, "--wait", help="Follow the job to completion; exit 0 only if it succeeded."
)
FOLLOW = typer.Option(False, "--follow", help="Stream the logs of worker 0.")
TIMEOUT = options.seconds(24 * 3600, "--timeout", low=0, help="Seconds to --wait at most.")
SUBMIT_MULTINODE = _multinode_option(
    "Default: the spec's multinode:, else jobset when the cluster has JobSet's CRD."
)
RENDER_AUTOSCALER = typer.Option(
    None,
    "--autoscaler",
    help="A service's autoscaler: keda (a ScaledObject, the default) or hpa (an "
    "autoscaling/v2 HPA; the prometheus-adapter rule it needs goes to stderr).",
)
SUBMIT_AUTOSCALER = typer.Option(
    None,
    "--autoscaler",
    help="A service's autoscaler: keda (a ScaledObject) or hpa (an autoscaling/v2 HPA). "
    "Default: keda when the cluster serves KEDA's CRDs, else hpa.",
)
RENDER_NAMESPACE = options.namespace(
    "A service's namespace, which its autoscaling query names (default: the spec's, else "
    "default); jobs are rendered without one unless the spec gives it."
)
ALL_NAMESPACES = typer.Option(False, "-A", "--all-namespaces")
LIST_SELECTOR = options.selector(
    "Only jobs whose labels match this selector (kubectl's syntax: a=b,c!=d,e in (x,y),f,!g); "
    "a job's labels are those of its spec's labels: and gpuctl's own."
)
LIST_OUTPUT = options.output(
    "table, wide (also restarts, queue, image, age), json or yaml.", default=ListFormat.table
)
JOB_NAME = options.object_name()
LOGS_FOLLOW = typer.Option(False, "-f", "--follow", help="Keep streaming (worker 0).")
DELETE_DRY_RUN = options.dry_run("Say what would be deleted; delete nothing.")
DELETE_OUTPUT = options.output("table, json or yaml: the objects deleted.")


def render(
    files: list[str] | None = FILES,
    file_options: list[str] = FILE_OPTIONS,
    output: DataFormat | None = RENDER_OUTPUT,
    gpu_label_key: str | None = options.gpu_label_key(),
    allocation: str | None = options.allocation(),
    template: str | None = TEMPLATE,
    explain: bool = EXPLAIN,
    multinode: Multinode | None = RENDER_MULTINODE,
    autoscaler: Autoscaler | None = RENDER_AUTOSCALER,
    namespace: str | None = RENDER_NAMESPACE,
) -> None:
    """Print the Kubernetes manifests for job specs (a service's: its Deployment, Service
    and autoscaler). Needs no cluster."""
    from gpuctl.jobs import views
    from gpuctl.jobs.admission import multinode as decide_multinode
    from gpuctl.jobs.admission import topology as decide_topology
    from gpuctl.jobs.core.manifests import placement, render_offline

    key = options.resolve_gpu_label_key(gpu_label_key)
    how = options.resolve_allocation(allocation)
    loaded = _load(options.spec_files(file_options, files or [], "job spec"), key, template)
    if explain:
        _explain(loaded, output)
        return
    form = multinode.value if multinode else None
    scaler = autoscaler.value if autoscaler else None
    docs, rules = [], []
    for spec, _ in loaded:
        where = placement(spec, key, allocation=how)
        spec = decide_topology(None, decide_multinode(None, spec, form), None, "")
        views.placement_notes(spec.name, where, spec.topology, spec.compute_domain)
        objs, rule = render_offline(spec, where, scaler, namespace)
        docs += objs
        rules += [rule] if rule else []
    echo(dump_documents(docs, (output or DataFormat.yaml).value))
    for rule in rules:
        views.adapter_rule(rule)


def _explain(loaded: list, output: DataFormat | None) -> None:
    from gpuctl.jobs import views
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
    else:
        views.explain_tables(reports)


@changes
@uses_cluster
def submit(
    positional: str | None = JOB_FILE,
    file: str | None = options.spec_file("JOB.yaml", "Job spec file."),
    namespace: str | None = SUBMIT_NAMESPACE,
    dry_run: bool = SUBMIT_DRY_RUN,
    server_side: bool = SERVER_SIDE,
    yes: bool = SUBMIT_YES,
    output: DataFormat | None = SUBMIT_OUTPUT,
    wait: bool = WAIT,
    follow: bool = FOLLOW,
    timeout: float = TIMEOUT,
    gpu_label_key: str | None = options.gpu_label_key(),
    allocation: str | None = options.allocation(),
    template: str | None = TEMPLATE,
    multinode: Multinode | None = SUBMIT_MULTINODE,
    autoscaler: Autoscaler | None = SUBMIT_AUTOSCALER,
) -> None:
    """Check that a job fits the cluster and that the volumes and secrets it uses exist,
    then create it (all objects, or none). With Kueue, the job goes to its queue: (or the
    namespace's only LocalQueue) and starts when its ClusterQueue has quota for all of it."""
    from gpuctl.common.errors import UsageError
    from gpuctl.jobs import submit as submitting
    from gpuctl.jobs import views

    key = options.resolve_gpu_label_key(gpu_label_key)
    how = options.resolve_allocation(allocation)
    named = options.spec_files(
        [file] if file else [], [positional] if positional else [], "job spec"
    )
    spec, _ = _load(named, key, template)[0]
    form = multinode.value if multinode else None
    scaler = autoscaler.value if autoscaler else None
    if wait and spec.serving is not None:
        raise UsageError(
            f"--wait: {spec.name} is a Service, which runs until it is deleted",
            hint=f"gpuctl jobs get {spec.name} shows its replicas",
        )
    with application().kube() as kube:
        plan = submitting.plan(kube, spec, namespace, form, key, server_side, scaler, how)
        views.submit_findings(plan)
        if plan.error:
            raise plan.error
        if dry_run and not server_side:
            views.dry_run(plan, output)
        if not go_ahead(plan.plan, None, dry_run=dry_run and not server_side, yes=yes):
            return
        submitting.create(kube, plan)
        views.submitted(plan, output)
        if server_side:
            return
        with submitting.watching(plan):
            if follow:
                err_console().print(
                    f"following the logs of {spec.name} once its first worker has started"
                )
                for line in submitting.follow(kube, plan, timeout):
                    echo(line + "\n")
            if wait:
                with views.wait_status(plan) as update:
                    submitting.wait(kube, plan, timeout, update)


@jobs_app.command("list")
@uses_cluster
def jobs_list(
    namespace: str | None = options.namespace(),
    all_namespaces: bool = ALL_NAMESPACES,
    selector: str | None = LIST_SELECTOR,
    output: ListFormat = LIST_OUTPUT,
) -> None:
    """List jobs gpuctl manages."""
    from gpuctl.jobs import service as workloads
    from gpuctl.jobs import views

    with application().kube() as kube:
        ns = None if all_namespaces else (namespace or kube.namespace)
        rows = workloads.job_rows(kube, ns, selector)
    if output in (ListFormat.table, ListFormat.wide):
        views.jobs_table(rows, wide=output == ListFormat.wide)
    else:
        echo(dump({"jobs": rows}, output.value))


@jobs_app.command("get")
@uses_cluster
def jobs_get(
    name: str = JOB_NAME,
    namespace: str | None = options.namespace(),
    output: Format = options.output(),
) -> None:
    """Show one job: its status, or the whole object with -o yaml|json."""
    from gpuctl.jobs import service as workloads
    from gpuctl.jobs import views
    from gpuctl.jobs.core.status import row

    with application().kube() as kube:
        obj = workloads.get_job(kube, name, namespace or kube.namespace)
    if output != Format.table:
        echo(dump(obj, output.value))
    else:
        views.job_fields(row(obj))


@jobs_app.command("logs")
@uses_cluster
def jobs_logs(
    name: str = JOB_NAME,
    namespace: str | None = options.namespace(),
    follow: bool = LOGS_FOLLOW,
) -> None:
    """Print a job's logs (every worker, prefixed, for a multi-node job)."""
    from gpuctl.jobs import service as workloads

    start_timeout = FOLLOW_START_TIMEOUT if follow else 0
    with application().kube() as kube:
        ns = namespace or kube.namespace
        for line in workloads.logs(kube, name, ns, follow, start_timeout=start_timeout):
            echo(line + "\n")


@jobs_app.command("delete")
@changes
@uses_cluster
def jobs_delete(
    name: str = JOB_NAME,
    namespace: str | None = options.namespace(),
    yes: bool = options.yes(),
    dry_run: bool = DELETE_DRY_RUN,
    output: Format = DELETE_OUTPUT,
) -> None:
    """Delete a job gpuctl manages: its Job (with the Job's pods) or bare Pod, and its
    headless Service, including one left alone by an earlier failure."""
    from gpuctl.cli.output import inform
    from gpuctl.jobs import service as workloads

    with application().kube() as kube:
        plan = workloads.plan_delete(kube, name, namespace or kube.namespace)
        if dry_run:
            inform(f"delete {plan.in_words()}")
        if go_ahead(plan.plan, f"Delete {plan.in_words()}?", dry_run=dry_run, yes=yes):
            workloads.delete(kube, plan)
            inform(f"deleted {', '.join(plan.targets)} in namespace {plan.namespace}")
    if output != Format.table:
        data = {"namespace": plan.namespace, "deleted": plan.targets, "dryRun": dry_run}
        echo(dump(data, output.value))


@jobs_app.command("why")
@uses_cluster
def jobs_why(
    name: str = JOB_NAME,
    namespace: str | None = options.namespace(),
    output: Format = options.output(),
) -> None:
    """Why a job is not running: what Kueue says of its Workload (quota reserved?
    admitted? evicted, and why? waiting for its pods?), its place in the queue, why its
    pods wait, and which nodes it fits."""
    from gpuctl.jobs import views
    from gpuctl.jobs.diagnose import diagnose

    with application().kube() as kube:
        d = diagnose(kube, name, namespace or kube.namespace)
    if output != Format.table:
        echo(dump(d.to_dict(), output.value))
    else:
        views.why(d)
