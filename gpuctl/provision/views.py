"""What `gpuctl provision` and `gpuctl destroy` print (CLI side, rich): the preflight
table, Terraform's plan by component, the cost by component, the apply's progress, the
outputs. RunView is the service's display; the show_* functions draw one part each."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

from gpuctl.cli import workflow
from gpuctl.cli.output import Format, dump, echo, err_console, out_console
from gpuctl.common.plan import Plan, Step
from gpuctl.provision.core.plan_summary import ApplyProgress, PlanSummary
from gpuctl.provision.core.preflight import PreflightReport
from gpuctl.provision.core.spec import ClusterSpec
from gpuctl.provision.core.steps import Outcome
from gpuctl.provision.service import OnEvent


class RunView:
    """The display of a run (gpuctl.provision.service.Display): with -o table on stdout;
    with -o json|yaml the same lines on stderr and the outcome as data on stdout."""

    def __init__(
        self, output: Format, yes: bool = False, plan_only: bool = False, dry_run: bool = False
    ):
        self.output, self.yes, self.plan_only, self._dry_run = output, yes, plan_only, dry_run

    @cached_property
    def show(self) -> Any:
        """Where the lines go; made on first use (rich is imported then)."""
        return out_console() if self.output == Format.table else err_console()

    def located(self, outcome: Outcome) -> None:
        self.show.print(f"Terraform state: {outcome.state}", highlight=False)

    def preflight_started(self, spec: ClusterSpec) -> None:
        self.show.print(f"Preflight for [bold]{spec.name}[/] in {spec.region} …")

    def preflight_done(self, report: PreflightReport) -> None:
        show_preflight(self.show, report)

    def terraform_started(self, engine: str, workdir: Path, destroy: bool) -> None:
        self.show.print(f"{engine} in {workdir}: init, {'destroy plan' if destroy else 'plan'} …")

    def planned(self, summary: PlanSummary, report: PreflightReport | None) -> None:
        show_plan(self.show, summary)
        if self.plan_only and report is not None:
            show_cost(self.show, report)

    def go_ahead(self, plan: Plan, question: str) -> bool:
        return workflow.go_ahead(
            plan, question, dry_run=self._dry_run, yes=self.yes, show=self._line
        )

    def _line(self, text: str) -> None:
        self.show.print(text, highlight=False)

    @contextmanager
    def applying(self, step: Step, total: int) -> Iterator[OnEvent]:
        """A progress bar on stderr, and a line for each resource done or failed."""
        with _apply_bar(err_console()) as bar:
            task = bar.add_task("apply", total=total)
            yield lambda ev, state: _on_apply_event(bar, task, ev, state)

    def started(self, step: Step, index: int, total: int) -> None:
        pass  # the apply is its only step, and applying() shows it

    def finished(self, step: Step, index: int, total: int) -> None:
        pass

    def dry_run(self, outcome: Outcome, show_vars: bool = False) -> None:
        """What `provision --dry-run` wrote, without asking AWS or running Terraform."""
        if self.output != Format.table:
            self.data(outcome)
        else:
            self._written(outcome, show_vars)
        workflow.end_dry_run(self._line)

    def _written(self, outcome: Outcome, show_vars: bool) -> None:
        self.located(outcome)
        self.show.print(
            f"Wrote {outcome.workdir} (no AWS call, no Terraform run)"
            + (". Variables:" if show_vars else "; --show-vars prints its Terraform variables."),
            highlight=False,
        )
        if show_vars:
            echo(dump(outcome.variables, "json"))
        else:
            dry_run_summary(self.show, outcome.variables or {})
        warning = public_endpoint_warning(outcome.variables or {})
        if warning:
            err_console().print(f"warning: {warning}", style="yellow", markup=False)
        for note in outcome.notes:
            self.show.print(note)

    def provisioned(self, outcome: Outcome) -> None:
        if outcome.plan is not None and outcome.plan.empty:
            self.show.print("Nothing to change.")
        show_outputs(self.show, outcome.outputs or {})
        self.data(outcome)

    def destroyed(self, outcome: Outcome) -> None:
        if outcome.plan is not None and outcome.plan.empty:
            self.show.print("Nothing to destroy.")
        elif outcome.applied is not None:  # else a dry run, which go_ahead said
            self.show.print(f"Destroyed {outcome.applied['destroy']} resources.")
        self.data(outcome)

    def data(self, outcome: Outcome) -> None:
        """The outcome on stdout, for -o json|yaml."""
        if self.output != Format.table:
            echo(dump(outcome.to_dict(), self.output.value))


def _apply_bar(console: Any) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    return Progress(*columns, console=console, transient=False)


def _on_apply_event(bar: Any, task: Any, ev: dict[str, Any], state: ApplyProgress) -> None:
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


def show_preflight(console: Any, report: PreflightReport) -> None:
    _show_cluster(console, report)
    console.print(_preflight_table(report))
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


def _show_cluster(console: Any, report: PreflightReport) -> None:
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


def _preflight_table(report: PreflightReport) -> Any:
    from gpuctl.cli.output import new_table as Table

    table = Table(title="Preflight", title_justify="left")
    where = f"zones ({report.region}…)" if report.cluster.create else "zones / subnets"
    for col in ("group", "instance type", "GPUs", "EFA", where, "GPU AMI", "$/hour min–max"):
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
        zones = _zones(g.zones, report.region)
        if g.subnet_ids:
            zones += " " + " ".join(g.subnet_ids)
        if g.reservation:
            zones += f" ({g.reservation.id})"
        table.add_row(
            g.name,
            f"{g.instance_type} {g.capacity_type}",
            gpu,
            str(g.efa_interfaces) if g.efa_interfaces else "-",
            zones,
            g.ami_id or "not resolved",
            cost,
        )
    return table


def show_cost(console: Any, report: PreflightReport) -> None:
    from gpuctl.cli.output import new_table as Table

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


def show_plan(console: Any, summary: PlanSummary) -> None:
    from gpuctl.cli.output import new_table as Table
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


def show_outputs(console: Any, outputs: dict[str, Any]) -> None:
    if not outputs:
        return
    console.print("Outputs:")
    for name, value in outputs.items():
        console.print(f"  {name} = {json.dumps(value)}", highlight=False, soft_wrap=True)


def dry_run_summary(console: Any, variables: dict) -> None:
    """What a dry run would make, where, how many and at what cost, from its variables."""
    from gpuctl.cli.output import new_table as Table
    from gpuctl.provision.core.cost import hours_per_month, instance_price

    plane = variables.get("control_plane") or {}
    what = "a new EKS cluster" if variables.get("create_cluster") else "GPU nodes for cluster"
    console.print(
        f"{what} {variables.get('kubernetes_cluster')} (Kubernetes "
        f"{variables.get('kubernetes_version') or 'as it is'}) in {variables.get('region')}, "
        f"VPC {variables.get('vpc_cidr') or 'existing'}, autoscaling: {variables.get('autoscaler')}"
        + (f", {plane.get('system_node_count')} system nodes" if plane else ""),
        highlight=False,
    )
    table = Table()
    for col in (
        "NODE GROUP", "INSTANCE", "CAPACITY", "NODES", "DEVICES PER NODE", "EFA",
        "ON-DEMAND $/MONTH, MIN-MAX",
    ):  # fmt: skip
        table.add_column(col)
    for name, g in (variables.get("node_groups") or {}).items():
        price = instance_price(str(g.get("instance_type")))
        cost = "unknown"
        if price is not None:
            low, high = (
                price * hours_per_month() * int(g.get(k) or 0) for k in ("min_size", "max_size")
            )
            cost = f"{low:,.0f}-{high:,.0f}"
        nodes = f"{g.get('min_size')}-{g.get('max_size')} (now {g.get('desired_size')})"
        table.add_row(
            name,
            str(g.get("instance_type")),
            str(g.get("capacity_type")),
            nodes,
            f"{g['gpu_count']} {g.get('device_resource')}" if g.get("gpu_count") else "-",
            "yes" if g.get("efa") else "no",
            cost,
        )
    console.print(table)
    releases = variables.get("helm_releases") or {}
    if releases:
        console.print(
            "Helm releases: "
            + ", ".join(
                f"{name} ({r.get('repository') or 'gpuctl'} {r['chart'].split('/')[-1]} "
                f"{r.get('version') or ''}".rstrip()
                + f", in {r['namespace']})"
                for name, r in releases.items()
            ),
            highlight=False,
            soft_wrap=True,
        )


def public_endpoint_warning(variables: dict) -> str | None:
    """A new cluster's API endpoint that the whole internet can reach, in words."""
    plane = variables.get("control_plane") or {}
    open_to = [c for c in plane.get("public_access_cidrs") or [] if c in ("0.0.0.0/0", "::/0")]
    if variables.get("create_cluster") and plane.get("endpoint_public_access") and open_to:
        return (
            f"the cluster's API endpoint is public and open to the whole internet ({open_to[0]}); "
            "set public_access_cidrs to your networks, or endpoint_access: private"
        )
    return None
