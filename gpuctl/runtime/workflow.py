"""The one executor every changing workflow hands its plan to: it applies the steps in
order, reporting progress; on a failure or Ctrl-C it undoes, newest first, what was done
(where a step can be undone) and says what was undone or is left; at the end it verifies
the result. Modelled on mig-parted's reconfigure: a workflow is named steps.

It is also where a gpuctl command's confirmation is enforced (docs/conventions.md, "Changing
commands"): while a command runs, no step is carried out and no Kubernetes write is sent
until the one confirmation path, gpuctl.cli.workflow.go_ahead, said yes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from gpuctl.common.errors import GpuctlError, Interrupted
from gpuctl.common.plan import Step


@dataclass
class Action:
    """A plan's step bound to its effect. RUN carries it out; UNDO, when the API allows,
    reverses it and returns None when there was nothing to reverse (the step had not
    happened), "" when it reversed it, or why it could not. A step whose RUN failed after
    its request may have reached the other side (the error's `uncertain`) or was stopped
    by Ctrl-C is undone too, so UNDO must tell its own work from someone else's."""

    step: Step
    run: Callable[[], Any]
    undo: Callable[[], str | None] | None = None
    name: str = ""  # how what it made is named in a rollback report (default: its target)
    remove_with: str = ""  # the command that removes what it made, when a rollback cannot

    @property
    def label(self) -> str:
        return self.name or self.step.target


class Progress(Protocol):
    def started(self, step: Step, index: int, total: int) -> None: ...

    def finished(self, step: Step, index: int, total: int) -> None: ...


class Quiet:
    """Progress that says nothing."""

    def started(self, step: Step, index: int, total: int) -> None:
        pass

    def finished(self, step: Step, index: int, total: int) -> None:
        pass


@dataclass
class Rollback:
    undone: list[str]
    left: list[str]  # "Job/llama (deleting it failed: …); remove it with: kubectl delete …"
    interrupted: bool = False  # a Ctrl-C stopped it

    def describe(
        self, undone_as: str, left_as: str, cleanup: str | None
    ) -> tuple[str, list[str], str | None]:
        """(what to add to the message, detail lines, hint) for a failure or interrupt."""
        if self.left:
            return (
                f"; rollback incomplete: {len(self.left)} {left_as}",
                [f"left: {what}" for what in self.left],
                f"remove them with: {cleanup}" if cleanup else None,
            )
        if self.undone:
            return f"; {undone_as}: " + ", ".join(self.undone), [], None
        return "; nothing was changed", [], None


class Unconfirmed(RuntimeError):
    """A change a command was about to make without the one confirmation path: a bug in
    gpuctl (the command reached the executor or a write without gpuctl.cli.workflow.go_ahead,
    or asked go_ahead without being declared changing)."""


@dataclass
class _Run:
    changing: bool = False  # the command is declared changing (gpuctl.cli.workflow.changes)
    confirmed: bool = False  # go_ahead said yes


# The command that runs in this thread; None outside a command (a benchmark or a test that
# calls a service: its caller has decided), and in threads a command did not run in.
_run: ContextVar[_Run | None] = ContextVar("gpuctl_run", default=None)


@contextmanager
def command_run() -> Iterator[None]:
    """Around one gpuctl command (gpuctl.app.main): nothing changes until it is confirmed."""
    token = _run.set(_Run())
    try:
        yield
    finally:
        _run.reset(token)


def declare_changing() -> None:
    """The running command may change something once confirmed (gpuctl.cli.workflow.changes)."""
    run = _run.get()
    if run is not None:
        run.changing = True


def confirmed() -> None:
    """The running command's plan was confirmed: called by gpuctl.cli.workflow.go_ahead alone."""
    run = _run.get()
    if run is None:
        return
    if not run.changing:
        raise Unconfirmed(
            "a command not declared changing asked to go ahead "
            "(decorate it with gpuctl.cli.workflow.changes)"
        )
    run.confirmed = True


def check_confirmed(what: str) -> None:
    """Refuse WHAT (a step, a write) in a command whose plan was not confirmed."""
    run = _run.get()
    if run is not None and not run.confirmed:
        raise Unconfirmed(f"{what} before the plan was confirmed (gpuctl.cli.workflow.go_ahead)")


def execute(
    actions: Sequence[Action],
    *,
    progress: Progress | None = None,
    verify: Callable[[], None] | None = None,
    undone_as: str = "the steps done before the failure were undone",
    left_as: str = "step(s) left done",
    cleanup: str | None = None,
    explain: Callable[[GpuctlError, Action], GpuctlError] | None = None,
    forward_only: Callable[[Sequence[Action], Sequence[Action]], tuple[str, str | None]]
    | None = None,
) -> list[Any]:
    """Run ACTIONS in order and return what each RUN returned, then VERIFY (which raises
    when the result is not what was planned). On a failure or Ctrl-C, undo what was done and
    raise the error (Interrupted for Ctrl-C) extended with what was undone, or with what is
    left and CLEANUP, the command that removes it. UNDONE_AS heads the list of undone steps
    ("… before the failure" reads "… before the interrupt" after Ctrl-C), LEFT_AS counts
    what is left; EXPLAIN may restate a step's error for the user. Steps that cannot be undone
    (deletes) pass FORWARD_ONLY instead of a rollback: given the steps done and those not
    done (the stopped one first), it returns what to add to the message, and the hint.
    In a command, refuses to start before its plan was confirmed (Unconfirmed)."""
    if actions:
        check_confirmed(f"step {actions[0].step.text()!r}")
    report = progress or Quiet()
    done: list[Action] = []
    results: list[Any] = []
    failure: GpuctlError | None = None
    current: Action | None = None
    try:
        for i, action in enumerate(actions, 1):
            current = action
            report.started(action.step, i, len(actions))
            try:
                results.append(action.run())
            except GpuctlError as e:
                if e.uncertain:
                    done.append(action)  # it may have happened: undo reads back first
                raise
            except KeyboardInterrupt:
                done.append(action)
                raise
            done.append(action)
            report.finished(action.step, i, len(actions))
        current = None
    except GpuctlError as e:
        failure = e
    except KeyboardInterrupt:
        pass
    except Exception:  # a bug: what was done is still undone before it surfaces
        _roll_back(done)
        raise
    else:
        if verify is not None:
            try:
                verify()
            except KeyboardInterrupt:
                raise Interrupted(
                    "interrupted while checking the result; every step was carried out"
                ) from None
        return results
    rollback_interrupted = False
    if forward_only is not None:
        details: list[str] = []
        suffix, hint = forward_only(actions[: len(results)], actions[len(results) :])
    else:
        rollback = _roll_back(done)
        rollback_interrupted = rollback.interrupted
        suffix, details, hint = rollback.describe(
            undone_as
            if failure
            else undone_as.replace("before the failure", "before the interrupt"),
            left_as,
            cleanup,
        )
    if failure is None:
        raise Interrupted("interrupted" + suffix, hint=hint, details=details)
    error = explain(failure, current) if explain and current else failure
    if rollback_interrupted:  # Ctrl-C stopped the rollback: the run ends as interrupted
        error = Interrupted(f"interrupted while undoing after: {error.message}")
    error.message += suffix
    error.details = [*error.details, *details]
    error.hint = hint or error.hint
    raise error


def _roll_back(done: list[Action]) -> Rollback:
    """Undo, newest first. A second Ctrl-C stops the rollback: what it did not get to is
    reported as left. A step without UNDO that was done is left as it is, and said so."""
    result = Rollback([], [])
    pending = list(reversed(done))
    try:
        while pending:
            action = pending[0]
            if action.undo is None:
                result.left.append(_left(action, "cannot be undone"))
            else:
                try:
                    outcome = action.undo()
                except Exception as e:  # an undo's own failure must not end the rollback
                    outcome = f"undoing it failed: {e}"
                if outcome == "":
                    result.undone.append(action.label)
                elif outcome is not None:
                    result.left.append(_left(action, outcome))
            pending.pop(0)
    except KeyboardInterrupt:
        result.interrupted = True
        result.left += [_left(a, "rollback interrupted") for a in pending]
    return result


def _left(action: Action, why: str) -> str:
    """One line of what a rollback left: what, why, and the command that removes it."""
    text = f"{action.label} ({why})"
    return f"{text}; remove it with: {action.remove_with}" if action.remove_with else text
