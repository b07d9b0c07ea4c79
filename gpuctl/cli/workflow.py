"""What every changing command shares between showing its plan and the service carrying it
out: the declaration of a changing command, the one confirmation path (--dry-run stops,
--yes or a question), the one sentence that ends a dry run, and progress lines. The rule is
in docs/conventions.md ("Changing commands"); gpuctl.runtime.workflow enforces it."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from gpuctl.cli.output import Format, dump, echo, err_console, inform
from gpuctl.common.errors import Aborted
from gpuctl.common.plan import Step
from gpuctl.runtime import workflow

F = TypeVar("F", bound=Callable[..., Any])

DRY_RUN = "dry run: nothing was changed"
NOTHING_TO_CHANGE = "nothing to change"


class Changes(Protocol):
    """A plan: gpuctl.common.plan.Plan, or a capability's that says whether it is empty."""

    @property
    def empty(self) -> bool: ...


class StepPrinter:
    """Progress of gpuctl.runtime.workflow.execute as plain lines on stderr."""

    def __init__(self) -> None:
        self._err = err_console()

    def started(self, step: Step, index: int, total: int) -> None:
        pass

    def finished(self, step: Step, index: int, total: int) -> None:
        self._err.print(f"  [{index}/{total}] {step.text()}", markup=False, highlight=False)


def changes(callback: F) -> F:
    """Declare a command that changes something: it takes --dry-run and -y/--yes and asks
    go_ahead before any change (tests/test_confirmation.py walks the command tree for both;
    gpuctl.runtime.workflow refuses a change made another way)."""

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        workflow.declare_changing()
        return callback(*args, **kwargs)

    run.gpuctl_changes = True  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


@contextmanager
def reported(
    output: Format,
    document: Callable[[], dict[str, Any]],
    summary: Callable[[], str | None] = lambda: None,
) -> Iterator[None]:
    """Around carrying a plan out. With -o json|yaml the command's one document, DOCUMENT()
    (read at the end: it says what was done), is printed however the run ends: done, failed
    or interrupted. In a table, a run that went through ends with SUMMARY() on stderr; one
    that did not says what it did in its error."""
    try:
        yield
    finally:
        if output != Format.table:
            echo(dump(document(), output.value))
    said = summary() if output == Format.table else None
    if said:
        _note(said)


def is_changing(callback: Any) -> bool:
    return bool(getattr(callback, "gpuctl_changes", False))


def _note(text: str) -> None:
    inform(text)  # in a pipe, without importing rich (a dry run in a script)


def end_dry_run(show: Callable[[str], None] = _note) -> None:
    """The one sentence that ends every dry run, where SHOW puts the plan's text (stderr
    unless the command prints its plan on stdout)."""
    show(DRY_RUN)


def go_ahead(
    plan: Changes,
    question: str | None,
    *,
    dry_run: bool,
    yes: bool,
    show: Callable[[str], None] = _note,
) -> bool:
    """The one confirmation path of every changing command: whether to carry PLAN out. Not
    in a dry run, not when it changes nothing; otherwise once QUESTION is answered yes (or
    --yes was given; no question: nothing needs asking; exit 3 when stdin is no terminal).
    SHOW: where the command printed its plan's text."""
    if dry_run:
        end_dry_run(show)
        return False
    if plan.empty:
        show(NOTHING_TO_CHANGE)
        return False
    if question:
        _ask(question, yes)
    workflow.confirmed()
    return True


def _ask(question: str, yes: bool) -> None:
    """Proceed if --yes was given or the user agrees; otherwise abort (exit 3). Ctrl-C at
    the prompt is an interrupt like anywhere else (exit 130)."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise Aborted("not confirmed: pass --yes to proceed without a prompt")
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise Aborted("aborted; nothing was changed")
