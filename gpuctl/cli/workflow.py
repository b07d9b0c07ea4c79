"""How every changing command shows a plan and has it carried out: the plan as text (on
stderr when -o json|yaml puts the plan as data on stdout), --dry-run stops there, --yes or
a confirmation, then the service executes it with progress on stderr."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gpuctl.cli.output import Format, confirm, dump, echo, err_console
from gpuctl.common.plan import Plan, Step

T = TypeVar("T")


class StepPrinter:
    """Progress of gpuctl.runtime.workflow.execute as plain lines on stderr."""

    def __init__(self) -> None:
        self._err = err_console()

    def started(self, step: Step, index: int, total: int) -> None:
        pass

    def finished(self, step: Step, index: int, total: int) -> None:
        self._err.print(f"  [{index}/{total}] {step.text()}", markup=False, highlight=False)


def show_plan(plan: Plan, output: Format | None, dry_run: bool) -> None:
    """The plan as text (stderr when the data goes to stdout) and, with -o json|yaml, as data."""
    text = "\n".join(plan.lines()) + "\n"
    for note in plan.notes:
        err_console().print(f"warning: {note}", style="yellow", markup=False, soft_wrap=True)
    if output in (None, Format.table):
        echo(text)
        return
    err_console().print(text, end="", markup=False, highlight=False)
    echo(dump({**plan.to_dict(), "dryRun": dry_run}, output.value))


def carry_out(
    plan: Plan,
    execute: Callable[[StepPrinter], T],
    *,
    question: str,
    yes: bool,
    dry_run: bool,
    output: Format | None = None,
) -> T | None:
    """Show PLAN; unless it is empty or a dry run, confirm (QUESTION, or --yes) and EXECUTE
    it with a StepPrinter. Returns what EXECUTE returned (None when nothing ran)."""
    show_plan(plan, output, dry_run)
    if plan.empty:
        return None
    if dry_run:
        err_console().print("dry run: nothing changed", highlight=False)
        return None
    confirm(question, yes)
    return execute(StepPrinter())
