"""`gpuctl quota set|list|lint`: per-team GPU quotas, as Kueue queues (a ClusterQueue and a
LocalQueue per team) or, without Kueue, a namespace's ResourceQuota."""

from __future__ import annotations

import enum
from typing import Annotated

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import Format
from gpuctl.cli.workflow import changes

quota_app = typer.Typer(
    help="Per-team GPU quotas: Kueue queues that lend and borrow within a cohort, or a "
    "namespace's ResourceQuota on requests.nvidia.com/gpu and MIG resources.",
    no_args_is_help=True,
)


class Engine(str, enum.Enum):
    kueue = "kueue"
    resourcequota = "resourcequota"


ENGINE_HELP = "kueue or resourcequota (default: kueue when the cluster has Kueue's CRDs)."
EngineOption = Annotated[Engine | None, typer.Option("--engine", help=ENGINE_HELP)]
Team = Annotated[
    str, typer.Argument(metavar="TEAM", help="The team's namespace (created if missing).")
]
Gpus = Annotated[int, typer.Option("--gpus", help="Whole GPUs the team may request at once.")]
Mig = Annotated[
    list[str],
    typer.Option(
        "--mig",
        metavar="PROFILE=K",
        help="MIG slices of a profile the team may request (repeatable), e.g. 1g.10gb=4.",
    ),
]
Cohort = Annotated[
    str | None,
    typer.Option("--cohort", help="Kueue: the cohort whose queues lend and borrow idle quota."),
]
BorrowingLimit = Annotated[
    int | None,
    typer.Option("--borrowing-limit", help="Kueue: GPUs the team may borrow above its quota."),
]
LendingLimit = Annotated[
    int | None,
    typer.Option("--lending-limit", help="Kueue: of its GPUs, how many the team may lend."),
]
Weight = Annotated[
    str | None, typer.Option("--weight", help="Kueue: fair-sharing weight (default 1).")
]
GpuType = Annotated[
    list[str],
    typer.Option(
        "--gpu-type",
        help="Kueue: GPU types to give quota on, one flavor each (repeatable; default: "
        "every type on the nodes). With several, --gpus-per-type says the quota applies to each.",
    ),
]
PerType = Annotated[
    bool,
    typer.Option(
        "--gpus-per-type",
        help="Kueue: --gpus is given on each GPU type (flavor); needed when there are several.",
    ),
]
Cpu = Annotated[
    str | None,
    typer.Option("--cpu", help="Kueue: cpu quota per flavor (default: what its nodes have)."),
]
Memory = Annotated[
    str | None,
    typer.Option("--memory", help="Kueue: memory quota per flavor (default: what its nodes have)."),
]
_SET_DRY_RUN = options.dry_run(
    "Show the plan; change nothing. Works without a cluster too (no kubeconfig, or its "
    "cluster does not answer): then every object is new, --engine defaults to kueue and "
    "--gpu-type names the flavors."
)
_SET_OUTPUT = options.output("yaml or json: print the objects.", default=None)
_SET_YES = options.yes("Change an existing quota without asking.")


def register(app: typer.Typer) -> None:
    app.add_typer(quota_app, name="quota")


@quota_app.command("set")
@changes
@uses_cluster
def quota_set(
    team: Team,
    gpus: Gpus,
    mig: Mig = [],  # noqa: B006 - typer copies list defaults
    cohort: Cohort = None,
    borrowing_limit: BorrowingLimit = None,
    lending_limit: LendingLimit = None,
    weight: Weight = None,
    gpu_type: GpuType = [],  # noqa: B006
    gpus_per_type: PerType = False,
    cpu: Cpu = None,
    memory: Memory = None,
    engine: EngineOption = None,
    gpu_label_key: str | None = options.gpu_label_key(),
    dry_run: bool = _SET_DRY_RUN,
    output: Format | None = _SET_OUTPUT,
    yes: bool = _SET_YES,
) -> None:
    """Create or update a team's GPU quota (idempotent: re-running changes nothing)."""
    from gpuctl.cli.workflow import StepPrinter, go_ahead
    from gpuctl.common.errors import UsageError
    from gpuctl.quota import service, views
    from gpuctl.quota.core import kueue, rules

    rules.check_team(team)
    limits = rules.parse_mig(mig)
    rules.hard(gpus, limits)  # validate before touching the cluster
    kueue_options = {
        "--cohort": cohort,
        "--borrowing-limit": borrowing_limit,
        "--lending-limit": lending_limit,
        "--weight": weight,
        "--gpu-type": gpu_type or None,
        "--gpus-per-type": gpus_per_type or None,
        "--cpu": cpu,
        "--memory": memory,
    }
    given = [option for option, value in kueue_options.items() if value is not None]
    if engine == Engine.resourcequota and given:
        raise UsageError(f"{', '.join(given)}: for --engine kueue only")
    kueue.check_gpu_types(tuple(gpu_type))
    asked_for = (team, gpus, limits, cpu, memory, cohort, borrowing_limit, lending_limit, weight)
    request = kueue.check(kueue.TeamQuota(*asked_for, per_type=gpus_per_type))
    key = options.resolve_gpu_label_key(gpu_label_key)
    kube = _connect(application().offline_ok(dry_run))
    asked = engine.value if engine else None
    plan = service.plan_set(kube, request, asked, given, key, tuple(gpu_type), dry_run)
    views.show_set_plan(plan, output)
    if go_ahead(plan.plan, plan.question, dry_run=dry_run, yes=yes):
        assert kube is not None  # without a cluster it is a dry run
        service.apply_set(kube, plan, StepPrinter())
        views.show_done(plan)


def _connect(offline_ok: bool):
    """A connection to the cluster; None when OFFLINE_OK and there is no usable one."""
    from gpuctl.k8s.apis import KUEUE_GROUP

    kube, why = application().kube_or_offline(
        offline_ok, lambda kube: kube.api_versions(KUEUE_GROUP)
    )
    if why is not None:
        options.offline_note(why)
    return kube


@quota_app.command("list")
@uses_cluster
def quota_list(
    namespace: str | None = options.namespace(
        "ResourceQuota engine: one namespace (default: all)."
    ),
    engine: EngineOption = None,
    output: Format = options.output(),
) -> None:
    """Per ClusterQueue: nominal quota, in use, borrowed, lent, pending and admitted
    workloads (Kueue); or GPUs used and allowed per namespace (ResourceQuota)."""
    from gpuctl.quota import usage, views

    kube = application().kube()
    version = usage.served_version(kube) if engine != Engine.resourcequota else None
    if engine == Engine.kueue and version is None:
        from gpuctl.quota.core.plans import no_kueue

        raise no_kueue()
    if version is not None:
        from gpuctl.quota import queues

        views.show_queues(queues.list_queues(kube, version), output)
    else:
        views.show_resource_quotas(usage.usage(kube, namespace), output)


@quota_app.command("lint")
@uses_cluster
def quota_lint(
    output: Format = options.output(),
) -> None:
    """Compare the ClusterQueues' nominal GPU and MIG quotas, per flavor, with what the
    flavor's nodes have allocatable; flag quota that can never be satisfied (exit 1)."""
    from gpuctl.quota import queues, views
    from gpuctl.quota.core.plans import no_kueue
    from gpuctl.quota.core.queue_usage import has_errors
    from gpuctl.quota.usage import served_version

    kube = application().kube()
    version = served_version(kube)
    if version is None:
        raise no_kueue()
    rows, findings = queues.lint_queues(kube, version)
    views.show_lint(rows, findings, not has_errors(findings), output)
    if has_errors(findings):
        raise typer.Exit(1)
