"""`gpuctl init` (a starter spec) and `gpuctl schema` (the JSON Schema of a spec)."""

from __future__ import annotations

import enum
import os

import typer

from gpuctl.cli.output import DataFormat, dump, echo


class Starter(str, enum.Enum):
    job = "job"
    multinode = "multinode"
    mig_job = "mig-job"
    tpu_job = "tpu-job"
    trainium_job = "trainium-job"
    nvl72_job = "nvl72-job"
    service = "service"
    cluster = "cluster"


class SchemaKind(str, enum.Enum):
    job = "job"
    service = "service"
    cluster = "cluster"
    reclaim_policy = "reclaim-policy"


def register(app: typer.Typer) -> None:
    app.command("init")(init)
    app.command("schema")(schema)


def init(
    starter: Starter = typer.Argument(
        ...,
        metavar="STARTER",
        help="job, multinode, mig-job, tpu-job, trainium-job, nvl72-job, service or cluster.",
    ),
    file: str = typer.Option(
        "-", "-f", "--file", metavar="FILE", help="Write the spec to FILE (- : stdout)."
    ),
    output: str | None = typer.Option(
        None,
        "-o",
        "--output",
        metavar="yaml",
        help="yaml, the starter's only format (its comments are the point); "
        "-o FILE is the old spelling of -f FILE.",
    ),
    force: bool = typer.Option(False, "--force", help="Replace FILE if it exists."),
) -> None:
    """Write a commented starter spec that renders as it is: a single-node job, a multi-node
    job, a job on one MIG slice, an autoscaled inference service, or a cluster. Its first line points editors (through the
    YAML language server) at the spec's JSON Schema beside it: write that with
    `gpuctl schema job > gpuctl-job.schema.json`."""
    from gpuctl.runtime import shipped
    from gpuctl.runtime.files import check_output, write_output
    from gpuctl.specs.core.schemas import file_name
    from gpuctl.specs.core.starters import STARTERS
    from gpuctl.specs.core.starters import starter as starter_text

    if output not in (None, "yaml", "-"):  # the old spelling: -o named the file
        typer.echo(f"warning: -o FILE is now -f FILE (wrote {output})", err=True)
        file = output
    output = file
    example, kind = STARTERS[starter.value]
    with open(shipped.directory("examples") / example, encoding="utf-8") as f:
        text = starter_text(starter.value, f.read())
    if output == "-":
        echo(text)
        return
    check_output(output, "-f", replace=None if force else "--force")
    write_output(output, text, "-f")
    beside = os.path.join(os.path.dirname(output), file_name(kind))
    typer.echo(f"wrote {output}; for editor checks: gpuctl schema {kind} > {beside}", err=True)


def schema(
    kind: SchemaKind = typer.Argument(
        ..., metavar="KIND", help="job, service, cluster or reclaim-policy."
    ),
    output: DataFormat = typer.Option(DataFormat.json, "-o", "--output", help="json or yaml."),
) -> None:
    """Print the JSON Schema (draft 2020-12) of the job, service or cluster spec, made from
    the field table gpuctl's own parser reads. Editors use it to complete and check fields;
    what depends on several fields (a MIG profile of the GPU type, min_size ≤ max_size) is
    still checked by gpuctl render / provision only."""
    from gpuctl.specs.core.schemas import schema as make

    echo(dump(make(kind.value), output.value))
