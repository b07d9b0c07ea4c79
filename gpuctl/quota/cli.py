"""`gpuctl quota set|list|lint`: per-team GPU quotas, as Kueue queues (a ClusterQueue and a
LocalQueue per team) or, without Kueue, a namespace's ResourceQuota."""

from __future__ import annotations

import enum

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import (
    Format,
    confirm,
    dump,
    dump_documents,
    echo,
    err_console,
    out_console,
)

quota_app = typer.Typer(
    help="Per-team GPU quotas: Kueue queues that lend and borrow within a cohort, or a "
    "namespace's ResourceQuota on requests.nvidia.com/gpu and MIG resources.",
    no_args_is_help=True,
)


class Engine(str, enum.Enum):
    kueue = "kueue"
    resourcequota = "resourcequota"


ENGINE_HELP = "kueue or resourcequota (default: kueue when the cluster has Kueue's CRDs)."


def register(app: typer.Typer) -> None:
    app.add_typer(quota_app, name="quota")


@quota_app.command("set")
@uses_cluster
def quota_set(
    team: str = typer.Argument(
        ..., metavar="TEAM", help="The team's namespace (created if missing)."
    ),
    gpus: int = typer.Option(..., "--gpus", help="Whole GPUs the team may request at once."),
    mig: list[str] = typer.Option(
        [],
        "--mig",
        metavar="PROFILE=K",
        help="MIG slices of a profile the team may request (repeatable), e.g. 1g.10gb=4.",
    ),
    cohort: str | None = typer.Option(
        None, "--cohort", help="Kueue: the cohort whose queues lend and borrow idle quota."
    ),
    borrowing_limit: int | None = typer.Option(
        None, "--borrowing-limit", help="Kueue: GPUs the team may borrow above its quota."
    ),
    lending_limit: int | None = typer.Option(
        None, "--lending-limit", help="Kueue: of its GPUs, how many the team may lend."
    ),
    weight: str | None = typer.Option(
        None, "--weight", help="Kueue: fair-sharing weight (default 1)."
    ),
    gpu_type: list[str] = typer.Option(
        [],
        "--gpu-type",
        help="Kueue: GPU types to give quota on, one flavor each (repeatable; default: "
        "every type on the nodes). The quota applies to each.",
    ),
    cpu: str | None = typer.Option(
        None, "--cpu", help="Kueue: cpu quota per flavor (default: what its nodes have)."
    ),
    memory: str | None = typer.Option(
        None, "--memory", help="Kueue: memory quota per flavor (default: what its nodes have)."
    ),
    engine: Engine | None = typer.Option(None, "--engine", help=ENGINE_HELP),
    gpu_label_key: str | None = options.gpu_label_key(),
    dry_run: bool = options.dry_run(
        "Show the plan; change nothing. Works without a cluster too (no kubeconfig, or its "
        "cluster does not answer): then every object is new, --engine defaults to kueue and "
        "--gpu-type names the flavors."
    ),
    output: Format | None = options.output("yaml or json: print the objects.", default=None),
    yes: bool = options.yes("Change an existing quota without asking."),
) -> None:
    """Create or update a team's GPU quota (idempotent: re-running changes nothing)."""
    from gpuctl.common.errors import UsageError
    from gpuctl.quota.core import kueue
    from gpuctl.quota.core import rules as core

    core.check_team(team)
    limits = core.parse_mig(mig)
    core.hard(gpus, limits)  # validate before touching the cluster
    kueue_options = {
        "--cohort": cohort,
        "--borrowing-limit": borrowing_limit,
        "--lending-limit": lending_limit,
        "--weight": weight,
        "--gpu-type": gpu_type or None,
        "--cpu": cpu,
        "--memory": memory,
    }
    given = [k for k, v in kueue_options.items() if v is not None]
    if engine == Engine.resourcequota and given:
        raise UsageError(f"{', '.join(given)}: for --engine kueue only")
    kueue.check_gpu_types(tuple(gpu_type))
    request = kueue.check(
        kueue.TeamQuota(
            team, gpus, limits, cpu, memory, cohort, borrowing_limit, lending_limit, weight
        )
    )
    key = options.resolve_gpu_label_key(gpu_label_key)
    kube = _connect(application().offline_ok(dry_run))
    try:
        if kube is None:
            if engine == Engine.resourcequota:
                _set_with_resource_quota(None, team, gpus, limits, dry_run, output, yes)
            else:
                if engine is None:
                    err_console().print(
                        "[yellow]engine: kueue, as no cluster says which (--engine "
                        "resourcequota for a ResourceQuota)[/]",
                        highlight=False,
                    )
                _set_with_kueue(None, request, key, tuple(gpu_type), None, dry_run, output, yes)
            return
        version = _kueue_version(kube)
        if engine is None:
            engine = Engine.kueue if version else Engine.resourcequota
            if engine == Engine.resourcequota and given:
                raise UsageError(
                    f"{', '.join(given)} need Kueue, which this cluster does not have",
                    hint=_INSTALL_KUEUE,
                )
        if engine == Engine.kueue:
            _set_with_kueue(kube, request, key, tuple(gpu_type), version, dry_run, output, yes)
        else:
            _set_with_resource_quota(kube, team, gpus, limits, dry_run, output, yes)
    finally:
        if kube is not None:
            kube.close()


_INSTALL_KUEUE = (
    "install Kueue (kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/"
    "releases/download/v0.19.2/manifests.yaml) or use --engine resourcequota"
)


def _connect(offline_ok: bool):
    """A connection to the cluster; None when OFFLINE_OK and there is no usable one."""
    from gpuctl.k8s.apis import KUEUE_GROUP

    kube, why = application().kube_or_offline(
        offline_ok, lambda kube: kube.api_versions(KUEUE_GROUP)
    )
    if why is not None:
        options.offline_note(why)
    return kube


def _kueue_version(kube) -> str | None:
    from gpuctl.adapters.kube import Forbidden
    from gpuctl.quota import queues

    try:
        return queues.kueue_version(kube)
    except Forbidden:  # discovery is readable by every authenticated user, unless RBAC says no
        return None


def _set_with_kueue(kube, request, label_key, gpu_types, version, dry_run, output, yes) -> None:
    from gpuctl.common.errors import GpuctlError
    from gpuctl.quota import queues

    err = err_console()
    if kube is not None and version is None:
        if not dry_run:
            raise GpuctlError(
                "this cluster has no Kueue (it serves no kueue.x-k8s.io API)", hint=_INSTALL_KUEUE
            )
        err.print("[yellow]Kueue is not installed: these objects could not be created yet[/]")
    plan = queues.plan_set(kube, request, label_key, gpu_types, version)
    err.print(f"engine: kueue (kueue.x-k8s.io/{plan.version})", highlight=False)
    for step in plan.steps:
        label = "namespace" if step.kind == "Namespace" else step.kind
        err.print(f"{label} {step.name}: {step.action}", highlight=False, markup=False)
        _print_changes(err, step.changes)
    if output is not None and output != Format.table:
        echo(dump_documents(plan.objects(), output.value))
    if dry_run:
        err.print("dry run: nothing was changed")
        return
    if not plan.changes_anything:
        err.print("nothing to change")
        return
    updated = [f"{s.kind} {s.name}" for s in plan.steps if s.action == "update"]
    if updated:
        confirm(f"Replace the quota of {', '.join(updated)}?", yes)
    queues.apply_set(kube, plan)
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
    err.print(
        f"[green]done[/]: {q.team} may use {', '.join(terms)} on each of: {flavors}{sharing}; "
        f"jobs go to LocalQueue {q.team} in namespace {q.team}",
        highlight=False,
    )


def _set_with_resource_quota(kube, team, gpus, limits, dry_run, output, yes) -> None:
    from gpuctl.quota import service as quota
    from gpuctl.quota.core import rules as core

    err = err_console()
    p = quota.plan_set(kube, team, gpus, limits)
    err.print(f"namespace {team}: {'create' if p.create_namespace else 'exists'}")
    err.print(f"ResourceQuota {team}/{core.QUOTA_NAME}: {p.quota_action}")
    _print_changes(err, p.changes)
    if output is not None and output != Format.table:
        echo(dump_documents(p.objects(), output.value))
    if dry_run:
        err.print("dry run: nothing was changed")
        return
    if not p.create_namespace and p.quota_action == "unchanged":
        err.print("nothing to change")
        return
    if p.quota_action == "update":
        confirm(f"Replace the hard limits of ResourceQuota {team}/{core.QUOTA_NAME}?", yes)
    quota.apply_set(kube, p)
    err.print(
        f"[green]done[/]: {team} may request {gpus} nvidia.com/gpu"
        + "".join(f", {k} {r}" for r, k in limits.items())
    )


def _print_changes(err, changes) -> None:
    for key, old, new in changes:
        err.print(
            f"  {key}: {old if old is not None else '(none)'} → "
            f"{new if new is not None else '(removed)'}",
            highlight=False,
            markup=False,
        )


@quota_app.command("list")
@uses_cluster
def quota_list(
    namespace: str | None = options.namespace(
        "ResourceQuota engine: one namespace (default: all)."
    ),
    engine: Engine | None = typer.Option(None, "--engine", help=ENGINE_HELP),
    output: Format = options.output(),
) -> None:
    """Per ClusterQueue: nominal quota, in use, borrowed, lent, pending and admitted
    workloads (Kueue); or GPUs used and allowed per namespace (ResourceQuota)."""
    from gpuctl.common.errors import GpuctlError

    with application().kube() as kube:
        version = _kueue_version(kube) if engine != Engine.resourcequota else None
        if engine == Engine.kueue and version is None:
            raise GpuctlError(
                "this cluster has no Kueue (it serves no kueue.x-k8s.io API)", hint=_INSTALL_KUEUE
            )
        if version is not None:
            _list_queues(kube, version, output)
        else:
            _list_resource_quotas(kube, namespace, output)


def _list_queues(kube, version: str, output: Format) -> None:
    from gpuctl.quota import queues

    rows = queues.list_queues(kube, version)
    if output != Format.table:
        echo(dump({"clusterQueues": [r.to_dict() for r in rows]}, output.value))
        return
    from itertools import groupby

    from rich.markup import escape
    from rich.table import Table

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


def _list_resource_quotas(kube, namespace: str | None, output: Format) -> None:
    from gpuctl.quota import service as quota

    rows = quota.usage(kube, namespace)
    if output != Format.table:
        echo(dump({"quotas": rows}, output.value))
        return
    from rich.table import Table

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


@quota_app.command("lint")
@uses_cluster
def quota_lint(
    output: Format = options.output(),
) -> None:
    """Compare the ClusterQueues' nominal GPU and MIG quotas, per flavor, with what the
    flavor's nodes have allocatable; flag quota that can never be satisfied (exit 1)."""
    from gpuctl.common.errors import GpuctlError
    from gpuctl.quota import queues
    from gpuctl.quota.core.queue_usage import has_errors

    with application().kube() as kube:
        version = _kueue_version(kube)
        if version is None:
            raise GpuctlError(
                "this cluster has no Kueue (it serves no kueue.x-k8s.io API)", hint=_INSTALL_KUEUE
            )
        rows, findings = queues.lint_queues(kube, version)
    if output != Format.table:
        echo(
            dump(
                {
                    "ok": not has_errors(findings),
                    "capacity": [r.to_dict() for r in rows],
                    "findings": [f.to_dict() for f in findings],
                },
                output.value,
            )
        )
    else:
        from rich.markup import escape
        from rich.table import Table

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
    if has_errors(findings):
        raise typer.Exit(1)
