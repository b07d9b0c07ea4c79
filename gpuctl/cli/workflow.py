"""What every changing command shares between showing its plan and the service carrying it
out: the confirmation rule (--dry-run stops, --yes or a question) and progress lines."""

from __future__ import annotations

from gpuctl.cli.output import confirm, err_console
from gpuctl.common.plan import Plan, Step


class StepPrinter:
    """Progress of gpuctl.runtime.workflow.execute as plain lines on stderr."""

    def __init__(self) -> None:
        self._err = err_console()

    def started(self, step: Step, index: int, total: int) -> None:
        pass

    def finished(self, step: Step, index: int, total: int) -> None:
        self._err.print(f"  [{index}/{total}] {step.text()}", markup=False, highlight=False)


def go_ahead(plan: Plan, question: str | None, *, dry_run: bool, yes: bool) -> bool:
    """The confirmation rule of every changing command: whether to carry PLAN out. Not in a
    dry run, not when it changes nothing; otherwise once QUESTION is answered yes (or
    --yes was given; no question: nothing needs asking)."""
    if dry_run or plan.empty:
        err_console().print("dry run: nothing was changed" if dry_run else "nothing to change")
        return False
    if question:
        confirm(question, yes)
    return True
