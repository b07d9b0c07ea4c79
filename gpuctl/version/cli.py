"""`gpuctl version` (and `gpuctl --version`): gpuctl's version and the engines it found."""

from __future__ import annotations

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import Format, dump, echo

LABELS = {
    "gpuctl": "gpuctl",
    "nvidia_driver": "NVIDIA driver",
    "kubernetes": "Kubernetes server",
    "terraform": "Terraform",
    "aws_sdk": "AWS SDK",
}


def register(app: typer.Typer) -> None:
    app.command("version")(version)


@uses_cluster
def version(
    terraform_bin: str | None = typer.Option(
        None,
        "--terraform-bin",
        envvar="GPUCTL_TERRAFORM_BIN",
        metavar="PATH",
        help="Report this terraform or tofu executable instead of the embedded engine.",
    ),
    output: Format = options.output(),
) -> None:
    """Print gpuctl's version and the versions of the engines it found: the NVIDIA driver
    (NVML; a simulated node's with GPUCTL_SIMULATE), the Kubernetes API server of the
    kubeconfig context, Terraform and the AWS SDK. One that is missing or does not answer
    within a few seconds is reported as such; the command still succeeds."""
    from gpuctl.version.service import report

    app = application()
    found = report(app.nvml, app.connect, app.terraform(terraform_bin))
    if output == Format.table:
        echo(table(found))
    else:
        echo(dump({name: c.to_dict() for name, c in found.items()}, output.value))


def table(found) -> str:
    """`gpuctl VERSION (detail)` first, as --version always printed, then one aligned line per
    engine: name, version (or why there is none), detail."""
    me = found["gpuctl"]
    rows = [(LABELS[name], c.version or c.status, c.detail) for name, c in found.items()]
    rows = rows[1:]
    wide = [max(len(r[i]) for r in rows) for i in (0, 1)]
    lines = [f"gpuctl {me.version} ({me.detail})"]
    lines += [f"{a:<{wide[0]}}  {b:<{wide[1]}}  {c}".rstrip() for a, b, c in rows]
    return "\n".join(lines) + "\n"
