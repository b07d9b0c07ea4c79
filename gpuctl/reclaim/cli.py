"""`gpuctl reclaim` (idle-held GPUs given back by policy; `restore`; `render --deploy`) and
`gpuctl make-room` (the fewest evictions that fit a waiting job)."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import Format
from gpuctl.cli.workflow import changes
from gpuctl.common.errors import UsageError
from gpuctl.k8s import images

reclaim_app = typer.Typer(
    help="Give idle-held GPUs back by policy: report, suspend (Kueue-aware), scale to zero "
    "or evict the workloads whose every GPU has been idle; dry run unless --yes.",
)
PolicyFile = Annotated[
    str | None,
    typer.Option("--policy", metavar="FILE",
                 help="A ReclaimPolicy (gpuctl schema reclaim-policy); none: every namespace, action report."),
]  # fmt: skip
IdleFor = Annotated[
    str | None,
    typer.Option("--idle-for", help="Without --policy: how long every GPU must have been idle (default 2h)."),
]  # fmt: skip
_YES = "Carry the plan out (without it: a dry run)."
_DRY_RUN = "Show the plan; change nothing (the default)."


def register(app: typer.Typer) -> None:
    app.add_typer(reclaim_app, name="reclaim")
    app.command("make-room")(make_room)


def _policy(path: str | None, idle_for: str | None):
    from gpuctl.common.specfile import MAX_SECONDS, load_yaml_file, parse_duration
    from gpuctl.reclaim.core import policy as pol

    if path is None:
        seconds = parse_duration(idle_for) if idle_for is not None else pol.DEFAULT_IDLE_FOR
        if not seconds or seconds > MAX_SECONDS:
            raise UsageError(
                f"--idle-for: {idle_for!r} is not a duration (e.g. 30m, 2h, 1d; at most "
                f"{MAX_SECONDS} s)"
            )
        return pol.default_policy(seconds)
    if idle_for is not None:
        raise UsageError("--idle-for: with --policy, each rule's idleFor says how long")
    return pol.parse_policy(load_yaml_file(path))


@reclaim_app.callback(invoke_without_command=True)
@changes
@uses_cluster
def reclaim(
    ctx: typer.Context,
    prometheus: str | None = options.prometheus(),
    idle_for: IdleFor = None,
    policy: PolicyFile = None,
    dry_run: bool = options.dry_run(_DRY_RUN),
    yes: bool = options.yes(_YES),
    output: Format = options.output(),
    exporter_container: list[str] = options.exporter_containers(),
    exporter_job: list[str] = options.exporter_jobs(),
) -> None:
    """Find workloads whose every GPU has been idle and act on them as the policy says."""
    if ctx.invoked_subcommand is not None:
        return
    from gpuctl.adapters.kube_guarded import Evictions
    from gpuctl.cli.workflow import StepPrinter, go_ahead
    from gpuctl.dcgm import holders
    from gpuctl.reclaim import service, views
    from gpuctl.runtime.config import setting_list

    if dry_run and yes:
        raise UsageError("--dry-run and --yes: choose one")
    chosen = _policy(policy, idle_for)
    exporter = holders.exporter(
        setting_list("exporter_containers", exporter_container),
        setting_list("exporter_jobs", exporter_job),
    )
    source = application().prometheus(prometheus)  # its URL checked before any request
    kube = application().kube()
    finding = service.find(kube, source, chosen, exporter)
    views.show_finding(finding, output)
    evictions = Evictions()
    with views.account(finding.to_dict(), output, evictions):
        if go_ahead(finding.plan, None, dry_run=not yes, yes=yes):
            service.apply(kube, finding, StepPrinter(), evictions)


@reclaim_app.command("restore")
@changes
@uses_cluster
def restore(
    namespace: str | None = options.namespace("Only this namespace (default: all)."),
    dry_run: bool = options.dry_run(_DRY_RUN),
    yes: bool = options.yes(_YES),
    output: Format = options.output(),
) -> None:
    """Put back what reclaim scaled to zero (the recorded replica count) or suspended."""
    from gpuctl.cli.workflow import StepPrinter, go_ahead
    from gpuctl.reclaim import service, views

    kube = application().kube()
    plan = service.plan_restore(kube, namespace)
    views.show_plan(plan, output)
    if go_ahead(plan, None, dry_run=not yes, yes=yes):
        service.restore(kube, plan, StepPrinter())


@reclaim_app.command("render")
def render(
    deploy: bool = typer.Option(
        False, "--deploy", help="The CronJob (or Deployment), ServiceAccount and RBAC."
    ),
    policy: PolicyFile = None,
    image: str = typer.Option(
        images.DEFAULT,
        "--image",
        help="An image with gpuctl installed (`make image` builds the default; docs/image.md).",
    ),
    namespace: str = options.namespace("Where it runs (default: gpuctl).", default="gpuctl"),
    prometheus: str | None = options.prometheus(),
    schedule: str = typer.Option("*/15 * * * *", "--schedule", help="The CronJob's schedule."),
    every: str | None = typer.Option(
        None, "--every", help="A Deployment that runs every DURATION instead."
    ),
    output: Format = options.output("yaml or json.", default=Format.yaml),
) -> None:
    """The manifests that run gpuctl reclaim in the cluster, allowed exactly the policy's actions."""
    from gpuctl.cli.output import dump_documents, echo
    from gpuctl.common.specfile import parse_duration, read_text
    from gpuctl.reclaim.core import deploy as manifests

    if not deploy:
        raise UsageError("render what? pass --deploy")
    chosen = _policy(policy, None)
    text = read_text(policy, 1 << 20) if policy else _DEFAULT_POLICY
    every_s = parse_duration(every) if every is not None else None
    if every is not None and not every_s:
        raise UsageError(f"--every: {every!r} is not a duration (e.g. 10m)")
    url = options.prometheus_url(prometheus)
    docs = manifests.render(chosen, text, namespace, image, url, schedule, every_s)
    echo(dump_documents(docs, "json" if output == Format.json else "yaml"))


_DEFAULT_POLICY = """apiVersion: gpuctl/v1
kind: ReclaimPolicy
name: default
rules:
  - name: report
    idleFor: 2h
    action: report
"""


@changes
@uses_cluster
def make_room(
    job: str | None = typer.Argument(
        None,
        metavar="JOB",
        callback=options.optional_name,
        help="A waiting Job or JobSet (its pending pods).",
    ),
    shape: str | None = typer.Option(
        None, "--for", metavar="NxG", help="Or a shape: N workers of G GPUs (2x8)."
    ),
    resource: str = typer.Option(
        "nvidia.com/gpu",
        "--resource",
        callback=options.resource_name,
        help="With --for: the GPU resource.",
    ),
    namespace: str | None = options.namespace("The job's namespace."),
    dry_run: bool = options.dry_run(_DRY_RUN),
    yes: bool = options.yes(_YES),
    output: Format = options.output(),
) -> None:
    """The fewest evictions that make room for a waiting job: every evicted pod fits
    elsewhere; PDBs, gangs and pods that must not move are respected. Dry run unless --yes."""
    from gpuctl.adapters.kube_guarded import Evictions
    from gpuctl.cli.workflow import StepPrinter, go_ahead
    from gpuctl.reclaim import service, views
    from gpuctl.reclaim.core.room import parse_shape

    if (job is None) == (shape is None):
        raise UsageError("name a waiting JOB or give --for NxG (one of them)")
    want = parse_shape(shape, resource) if shape is not None else None
    kube = application().kube()
    want = want or service.want_of(kube, job or "", namespace)
    result = service.plan_room(kube, want)
    views.plan_text(result.plan, output)
    evictions = Evictions()
    with views.account(result.to_dict(), output, evictions):
        if not result.found:
            raise typer.Exit(1)
        if go_ahead(result.plan, None, dry_run=not yes, yes=yes):
            service.make_room(kube, result, StepPrinter(), evictions)
