"""`gpuctl quota set|list`: per-team GPU quotas (a namespace with a ResourceQuota)."""

from __future__ import annotations

import typer

from gpuctl.common import options
from gpuctl.common.output import (
    Format,
    dump,
    dump_documents,
    echo,
    err_console,
    out_console,
)

quota_app = typer.Typer(
    help="Per-team GPU quotas: a namespace with a ResourceQuota on "
    "requests.nvidia.com/gpu and MIG resources.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(quota_app, name="quota")


@quota_app.command("set")
def quota_set(
    team: str = typer.Argument(..., help="The team's namespace (created if missing)."),
    gpus: int = typer.Option(..., "--gpus", help="Whole GPUs the team may request at once."),
    mig: list[str] = typer.Option(
        [],
        "--mig",
        metavar="PROFILE=K",
        help="MIG slices of a profile the team may request (repeatable), e.g. 1g.10gb=4.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan; change nothing."),
    output: Format | None = options.output("yaml or json: print the objects.", default=None),
    context: str | None = options.context(),
) -> None:
    """Create or update a team's GPU quota (idempotent: re-running changes nothing)."""
    from gpuctl.adapters.kube import Kube
    from gpuctl.quota import rules as core
    from gpuctl.quota import service as quota

    core.check_team(team)
    limits = core.parse_mig(mig)
    core.hard(gpus, limits)  # validate before touching the cluster
    err = err_console()
    with Kube(context) as kube:
        p = quota.plan_set(kube, team, gpus, limits)
        err.print(f"namespace {team}: {'create' if p.create_namespace else 'exists'}")
        err.print(f"ResourceQuota {team}/{core.QUOTA_NAME}: {p.quota_action}")
        for key, old, new in p.changes:
            err.print(
                f"  {key}: {old if old is not None else '(none)'} → "
                f"{new if new is not None else '(removed)'}"
            )
        if output is not None and output != Format.table:
            echo(dump_documents(p.objects(), output.value))
        if dry_run:
            err.print("dry run: nothing was changed")
            return
        if not p.create_namespace and p.quota_action == "unchanged":
            err.print("nothing to change")
            return
        quota.apply_set(kube, p)
    err.print(
        f"[green]done[/]: {team} may request {gpus} nvidia.com/gpu"
        + "".join(f", {k} {r}" for r, k in limits.items())
    )


@quota_app.command("list")
def quota_list(
    namespace: str | None = options.namespace("One namespace (default: all)."),
    output: Format = options.output(),
    context: str | None = options.context(),
) -> None:
    """GPUs used and allowed per namespace."""
    from gpuctl.adapters.kube import Kube
    from gpuctl.quota import service as quota

    with Kube(context) as kube:
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
