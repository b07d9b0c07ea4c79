"""`provision` and `destroy` as data: the plan of what a confirmed run changes, the check
of what a destroy left, and what a run returns. Terraform's own plan (summarised in
core.plan_summary) is the authority for which resources change; the workflow's plan has
one step, the Terraform apply that carries all of them out. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuctl.common.plan import Plan, Step
from gpuctl.provision.core.plan_summary import PlanSummary
from gpuctl.provision.core.preflight import PreflightReport
from gpuctl.provision.core.spec import ClusterSpec

# a data source's address, in the root module or in (nested) module calls
_DATA_SOURCE = re.compile(r'^(module\.[\w-]+(\[("[^"]*"|\d+)\])?\.)*data\.')


def apply_plan(spec: ClusterSpec, summary: PlanSummary) -> Plan:
    """What a confirmed `provision` does: apply Terraform's saved plan. No step when
    Terraform plans no change."""
    return _terraform_plan(
        f"provision {spec.name} in {spec.region}",
        Step("apply", f"Terraform's plan for {spec.name}", summary.headline(), _counts(summary)),
        summary,
    )


def destroy_plan(spec: ClusterSpec, summary: PlanSummary) -> Plan:
    """What a confirmed `destroy` does: apply Terraform's saved destroy plan."""
    return _terraform_plan(
        f"destroy {spec.name} in {spec.region}",
        Step(
            "destroy",
            f"{summary.destroy} resources of {spec.name}",
            summary.headline(),
            _counts(summary),
        ),
        summary,
    )


def _terraform_plan(what: str, step: Step, summary: PlanSummary) -> Plan:
    steps = () if summary.empty else (step,)
    return Plan(what, steps, tuple(summary.warnings))


def _counts(summary: PlanSummary) -> dict[str, int]:
    return {"add": summary.add, "change": summary.change, "destroy": summary.destroy}


def dry_run_notes(spec: ClusterSpec) -> list[str]:
    """What a dry run's variables leave out, which a real run fills in from the preflight."""
    notes = [
        "Zones, GPU count and AMI are left for Terraform to look up; a real run fills them "
        "in from the preflight."
    ]
    if spec.autoscaler == "karpenter" and not spec.cluster.create:
        notes.append(
            "Karpenter's node pools need the existing cluster's subnets and security group "
            "from the preflight: a real run renders them."
        )
    return notes


def left_managed(addresses: list[str]) -> list[str]:
    """The resources a destroy left, among the state's ADDRESSES (`terraform state list`):
    data sources are read, not made, and need no destroying."""
    return [a for a in addresses if not _DATA_SOURCE.match(a)]


@dataclass
class Outcome:
    """What a `provision` or `destroy` run found and did, as far as it got: the printed
    result of -o json|yaml."""

    cluster: str
    workdir: str
    state: str  # where Terraform's state is, in words
    variables: dict[str, Any] | None = None  # a dry run's Terraform variables
    preflight: PreflightReport | None = None
    summary: PlanSummary | None = None  # Terraform's plan
    plan: Plan | None = None  # what a confirmed run does (None: it stops before)
    applied: dict[str, int] | None = None  # what Terraform reported it changed
    outputs: dict[str, Any] | None = None  # read back after the apply, or when up to date
    notes: list[str] = field(default_factory=list)  # printed, not part of the result's data

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cluster": self.cluster,
            "workdir": self.workdir,
            "state": self.state,
        }
        if self.variables is not None:
            out["variables"] = self.variables
        if self.preflight is not None:
            out["preflight"] = self.preflight.to_dict()
        if self.summary is not None:
            out["plan"] = self.summary.to_dict()
        if self.applied is not None:
            out["applied"] = self.applied
        if self.outputs is not None:
            out["outputs"] = self.outputs
        return out
