"""`gpuctl provision` and `gpuctl destroy`: cluster spec → preflight → Terraform."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuctl.cli import options
from gpuctl.cli.output import Format
from gpuctl.cli.workflow import changes


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


_DRY_RUN = typer.Option(
    False,
    "--dry-run",
    help="Write the working directory and print the variables; no AWS call, no Terraform run.",
)
_PLAN_ONLY = typer.Option(False, "--plan-only", help="Stop after showing the plan.")
_DESTROY_DRY_RUN = typer.Option(
    False, "--dry-run", help="Show what would be destroyed; destroy nothing."
)


@changes
def provision(
    file: Path = _FILE,
    yes: bool = _YES,
    dry_run: bool = _DRY_RUN,
    plan_only: bool = _PLAN_ONLY,
    workdir: Path | None = _WORKDIR,
    terraform_bin: str | None = _BIN,
    profile: str | None = _PROFILE,
    region: str | None = _REGION,
    output: Format = options.output(_OUTPUT_HELP),
    show_vars: bool = typer.Option(
        False, "--show-vars", help="With --dry-run: print the Terraform variables too."
    ),
) -> None:
    """Create or update what a cluster spec describes: a new EKS cluster in a new VPC (or GPU
    nodes for an existing cluster, in its own network), the GPU node groups (Auto Scaling
    groups or Karpenter NodePools), EFA and the GPU stack."""
    from gpuctl.provision import service, views

    target = _target(file, workdir, terraform_bin, profile, region)
    view = views.RunView(output, yes, plan_only)
    if dry_run:
        view.dry_run(service.dry_run(target), show_vars)
        return
    try:
        outcome = service.provision(target, view, plan_only)
    except service.PreflightFailed as e:
        view.data(e.outcome)
        raise
    view.provisioned(outcome)


@changes
def destroy(
    file: Path = _FILE,
    yes: bool = _YES,
    dry_run: bool = _DESTROY_DRY_RUN,
    workdir: Path | None = _WORKDIR,
    terraform_bin: str | None = _BIN,
    profile: str | None = _PROFILE,
    region: str | None = _REGION,
    output: Format = options.output(_OUTPUT_HELP),
) -> None:
    """Destroy everything `gpuctl provision` created for a cluster spec (plan, confirm, apply).
    The state is found as `provision` keeps it, whatever directory this runs in."""
    from gpuctl.provision import service, views

    target = _target(file, workdir, terraform_bin, profile, region)
    view = views.RunView(output, yes, dry_run=dry_run)
    view.destroyed(service.destroy(target, view))


def _target(file, workdir, terraform_bin, profile, region):
    from functools import partial

    from gpuctl.cli.application import application
    from gpuctl.provision import service

    app = application()
    engine = partial(app.terraform, terraform_bin)
    return service.Target(file, engine, app.aws(profile), workdir, region)
