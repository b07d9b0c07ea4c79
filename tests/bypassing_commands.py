"""Deliberately bad commands, for tests/test_confirmation.py to prove that its checker and
the run-time gate catch a command off the one confirmation path. Each step prints `ran` when
it is carried out. `register(app)` adds them, as a command module's register does."""

from __future__ import annotations

import typer

from gpuctl.cli import options
from gpuctl.cli.workflow import changes, go_ahead
from gpuctl.common.plan import Plan, Step
from gpuctl.runtime.workflow import Action, execute

PLAN = Plan("make a thing", (Step("create", "thing"),))


def _carry_out() -> None:
    execute([Action(PLAN.steps[0], run=lambda: print("ran"))])


@changes
def bypass(dry_run: bool = options.dry_run(), yes: bool = options.yes()) -> None:
    """Declared changing, with both flags, but it carries its plan out without go_ahead."""
    _carry_out()


def undeclared(dry_run: bool = options.dry_run(), yes: bool = options.yes()) -> None:
    """Takes both flags and asks go_ahead, but is not declared changing."""
    if go_ahead(PLAN, None, dry_run=dry_run, yes=yes):
        _carry_out()


@changes
def flagless(dry_run: bool = options.dry_run()) -> None:
    """Declared changing, without --yes."""
    if go_ahead(PLAN, None, dry_run=dry_run, yes=False):
        _carry_out()


@changes
def proper(dry_run: bool = options.dry_run(), yes: bool = options.yes()) -> None:
    """What every changing command does: go_ahead, then the executor."""
    if go_ahead(PLAN, "Make it?", dry_run=dry_run, yes=yes):
        _carry_out()


def register(app: typer.Typer) -> None:
    for command in (bypass, undeclared, flagless, proper):
        app.command(command.__name__)(command)
