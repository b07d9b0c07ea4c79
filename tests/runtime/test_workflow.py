"""The one executor: steps in order, rollback newest first on a failure or Ctrl-C, the
report of what was undone or left, verification at the end."""

from __future__ import annotations

import pytest

from gpuctl.common.errors import GpuctlError, Interrupted
from gpuctl.common.plan import Plan, Step
from gpuctl.runtime.workflow import Action, execute


class Uncertain(GpuctlError):
    uncertain = True


def actions(log: list[str], fail_at: int | None = None, error: BaseException | None = None):
    def step(i: int) -> Action:
        def run() -> str:
            if i == fail_at:
                log.append(f"fail {i}")
                raise error or GpuctlError(f"step {i} refused")
            log.append(f"run {i}")
            return f"made {i}"

        def undo() -> str | None:
            log.append(f"undo {i}")
            return "" if f"run {i}" in log else None  # nothing to undo: it never happened

        return Action(Step("create", f"thing {i}"), run, undo, name=f"Thing/{i}")

    return [step(i) for i in range(3)]


def test_steps_run_in_order_and_return_what_each_made():
    log: list[str] = []
    verified: list[bool] = []
    assert execute(actions(log), verify=lambda: verified.append(True)) == [
        "made 0",
        "made 1",
        "made 2",
    ]
    assert log == ["run 0", "run 1", "run 2"] and verified == [True]


def test_a_refused_step_undoes_the_earlier_ones_newest_first():
    log: list[str] = []
    with pytest.raises(GpuctlError) as e:
        execute(actions(log, fail_at=2), undone_as="removed before the failure")
    assert log == ["run 0", "run 1", "fail 2", "undo 1", "undo 0"]
    assert e.value.message == "step 2 refused; removed before the failure: Thing/1, Thing/0"


def test_a_step_that_may_have_happened_is_undone_too():
    log: list[str] = []
    with pytest.raises(GpuctlError):
        execute(actions(log, fail_at=1, error=Uncertain("no answer")))
    assert log == ["run 0", "fail 1", "undo 1", "undo 0"]


def test_ctrl_c_is_an_interrupt_that_says_what_was_undone():
    log: list[str] = []
    with pytest.raises(Interrupted) as e:
        execute(
            actions(log, fail_at=1, error=KeyboardInterrupt()), undone_as="x before the failure"
        )
    assert e.value.message == "interrupted; x before the interrupt: Thing/0"


def test_what_cannot_be_undone_is_listed_as_left_with_the_cleanup():
    log: list[str] = []
    steps = actions(log, fail_at=1)
    steps[0].undo = None
    with pytest.raises(GpuctlError) as e:
        execute(steps, left_as="object(s) left", cleanup="kubectl delete thing 0")
    assert "rollback incomplete: 1 object(s) left" in e.value.message
    assert e.value.details == ["left: Thing/0 (cannot be undone)"]
    assert e.value.hint == "remove them with: kubectl delete thing 0"


def forward(done, left) -> tuple[str, str]:
    def names(steps) -> str:
        return ", ".join(a.label for a in steps)

    return f"; done: {names(done)}; not done: {names(left)}", "run it again"


def test_steps_that_cannot_be_undone_say_what_was_done_and_what_was_not():
    log: list[str] = []
    with pytest.raises(GpuctlError) as e:
        execute(actions(log, fail_at=1), forward_only=forward)
    assert log == ["run 0", "fail 1"]  # no rollback
    assert e.value.message == "step 1 refused; done: Thing/0; not done: Thing/1, Thing/2"
    assert e.value.hint == "run it again" and e.value.details == []


def test_ctrl_c_in_steps_that_cannot_be_undone_says_what_was_done():
    with pytest.raises(Interrupted) as e:
        execute(actions([], fail_at=2, error=KeyboardInterrupt()), forward_only=forward)
    assert e.value.message == "interrupted; done: Thing/0, Thing/1; not done: Thing/2"


def test_nothing_done_says_nothing_was_changed():
    with pytest.raises(GpuctlError) as e:
        execute(actions([], fail_at=0))
    assert e.value.message == "step 0 refused; nothing was changed"


def test_a_failed_verification_is_the_error():
    def verify() -> None:
        raise GpuctlError("not applied yet")

    with pytest.raises(GpuctlError, match="not applied yet"):
        execute(actions([]), verify=verify)


def test_a_plan_prints_and_serialises_its_steps():
    plan = Plan("share timeslice", (Step("patch", "ConfigMap x", "4 replicas"),), ("a note",))
    assert plan.lines() == ["share timeslice:", "  1. patch ConfigMap x: 4 replicas"]
    assert plan.to_dict()["steps"] == [
        {"action": "patch", "target": "ConfigMap x", "why": "4 replicas"}
    ]
    assert Plan("nothing").lines() == ["nothing: nothing to change"]


def test_an_undo_that_fails_is_reported_and_the_rollback_goes_on():
    log: list[str] = []
    steps = actions(log, fail_at=2)

    def broken() -> str | None:
        raise GpuctlError("the server went away")

    steps[1].undo = broken
    with pytest.raises(GpuctlError) as e:
        execute(steps, left_as="object(s) left")
    assert log == ["run 0", "run 1", "fail 2", "undo 0"]
    assert e.value.details == ["left: Thing/1 (undoing it failed: the server went away)"]


def test_a_bug_in_a_step_still_undoes_the_steps_before_it():
    log: list[str] = []
    with pytest.raises(KeyError):
        execute(actions(log, fail_at=1, error=KeyError("x")))
    assert log == ["run 0", "fail 1", "undo 0"]


def test_ctrl_c_while_verifying_says_the_steps_were_carried_out():
    def verify() -> None:
        raise KeyboardInterrupt

    with pytest.raises(Interrupted, match="every step was carried out"):
        execute(actions([]), verify=verify)


def test_each_object_left_names_the_command_that_removes_it():
    log: list[str] = []
    steps = actions(log, fail_at=2)
    steps[0].undo = lambda: "deleting it failed: HTTP 503"
    steps[0].remove_with = "kubectl delete thing 0 -n team-a"
    steps[1].undo = None
    with pytest.raises(GpuctlError) as e:
        execute(steps, left_as="object(s) left")
    assert "rollback incomplete: 2 object(s) left" in e.value.message
    assert e.value.details == [
        "left: Thing/1 (cannot be undone)",
        "left: Thing/0 (deleting it failed: HTTP 503); remove it with: "
        "kubectl delete thing 0 -n team-a",
    ]


def test_ctrl_c_during_the_rollback_of_a_failure_is_an_interrupt_listing_what_is_left():
    log: list[str] = []
    steps = actions(log, fail_at=2)

    def stopped() -> str | None:
        raise KeyboardInterrupt

    steps[1].undo = stopped
    steps[0].remove_with = "kubectl delete thing 0"
    with pytest.raises(Interrupted) as e:
        execute(steps, left_as="object(s) left")
    assert e.value.message.startswith("interrupted while undoing after: step 2 refused")
    assert e.value.details == [
        "left: Thing/1 (rollback interrupted)",
        "left: Thing/0 (rollback interrupted); remove it with: kubectl delete thing 0",
    ]
