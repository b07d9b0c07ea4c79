"""One confirmation path (docs/conventions.md, "Changing commands"). A command that changes
something is declared so (gpuctl.cli.workflow.changes), takes --dry-run and -y/--yes, and
asks gpuctl.cli.workflow.go_ahead before any change; while a command runs,
gpuctl.runtime.workflow refuses a step or a Kubernetes write that go_ahead did not allow.
The checker walks the command tree gpuctl runs, and is itself tried on deliberately bad
commands (tests/bypassing_commands.py); a dry run is said in one sentence, by one function."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from gpuctl import app as gpuctl_app
from gpuctl.cli.workflow import DRY_RUN, is_changing
from gpuctl.common.plan import Step
from gpuctl.runtime import workflow
from tests import ROOT
from tests import bypassing_commands as bad
from tests.gpu_cluster import mark, writes

FLAGS = {"--dry-run", "-y", "--yes"}


def commands(root) -> dict[str, Any]:
    """Every command under ROOT by its name, groups too (a group may run itself: reclaim)."""
    out: dict[str, Any] = {}

    def walk(cmd, path: tuple[str, ...]) -> None:
        if path:
            out[" ".join(path)] = cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, (*path, name))

    walk(root, ())
    return out


def off_the_path(root) -> list[str]:
    """What keeps the commands under ROOT off the one confirmation path, one line each: a
    command that takes --dry-run or --yes is declared changing, and one declared changing
    takes both (--dry-run a plain flag)."""
    problems = []
    for name, cmd in commands(root).items():
        params = {flag: p for p in cmd.params for flag in getattr(p, "opts", ())}
        taken = sorted(FLAGS & set(params))
        if not is_changing(cmd.callback):
            if taken:
                problems.append(f"{name}: takes {', '.join(taken)} but is not declared changing")
            continue
        missing = sorted(FLAGS - set(params))
        if missing:
            problems.append(f"{name}: declared changing without {', '.join(missing)}")
        elif not params["--dry-run"].is_flag:
            problems.append(f"{name}: --dry-run takes a value")
    return problems


def gpuctl_tree():
    return gpuctl_app.command(built=True)


def test_every_command_that_can_change_something_takes_the_one_path():
    root = gpuctl_tree()
    assert off_the_path(root) == []
    declared = {name for name, cmd in commands(root).items() if is_changing(cmd.callback)}
    # the walk sees top-level commands, subcommands and a group that runs itself
    assert {"provision", "jobs delete", "reclaim", "reclaim restore"} <= declared


def test_the_checker_finds_the_commands_off_the_path():
    app = typer.Typer()
    app.callback()(lambda: None)
    bad.register(app)
    assert off_the_path(typer.main.get_command(app)) == [
        "undeclared: takes --dry-run, --yes, -y but is not declared changing",
        "flagless: declared changing without --yes, -y",
    ]


def gpuctl(*args: str) -> subprocess.CompletedProcess:
    """`gpuctl ARGS` in a process of its own, with the bad commands registered beside
    gpuctl's (a registration must not outlive the test)."""
    names = ", ".join(repr(c) for c in ("bypass", "undeclared", "flagless", "proper"))
    code = (
        "import sys; from gpuctl import app\n"
        f"for name in ({names}): app.COMMANDS[name] = ('tests.bypassing_commands', name)\n"
        "app.main(sys.argv[1:])"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,  # no terminal to ask
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.integration  # a gpuctl process per command
def test_a_command_off_the_path_is_refused_before_it_changes_anything():
    bypassed = gpuctl("bypass", "--yes")
    assert bypassed.returncode == 1 and "ran" not in bypassed.stdout, bypassed
    assert (
        "unexpected Unconfirmed: step 'create thing' before the plan was confirmed"
        in bypassed.stderr
    )
    undeclared = gpuctl("undeclared", "--yes")
    assert undeclared.returncode == 1 and "ran" not in undeclared.stdout, undeclared
    assert "a command not declared changing asked to go ahead" in undeclared.stderr
    # the one path: no terminal to ask, --dry-run, and --yes
    assert gpuctl("proper").returncode == 3
    dry = gpuctl("proper", "--dry-run")
    assert dry.returncode == 0 and dry.stderr == DRY_RUN + "\n" and "ran" not in dry.stdout
    done = gpuctl("proper", "--yes")
    assert done.returncode == 0 and done.stdout == "ran\n", done


def test_kubernetes_writes_wait_for_the_confirmation(kube):
    from gpuctl.adapters.kube import Kube

    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    since = mark(kube)
    with Kube(None) as api, workflow.command_run():
        with pytest.raises(workflow.Unconfirmed, match="creating ConfigMap default/c before"):
            api.create(config_map)
        with pytest.raises(workflow.Unconfirmed, match="labelling node gpu-1 before"):
            api.patch_node_labels("gpu-1", {"a": "b"})
        # the server only checks it: no change (the emulator ignores dryRun, so another name)
        api.create({**config_map, "metadata": {"name": "d"}}, dry_run=True)
        assert [m for m, _ in writes(kube, since)] == ["POST"]
        workflow.declare_changing()
        workflow.confirmed()
        api.create(config_map)
    assert len(writes(kube, since)) == 2
    with Kube(None) as api:  # no command runs (a benchmark, a test of a service): no gate
        api.delete("ConfigMap", "c")
    assert len(writes(kube, since)) == 3


def test_the_executor_waits_for_the_confirmation_within_a_command():
    done: list[str] = []
    steps = [workflow.Action(Step("create", "thing"), run=lambda: done.append("ran"))]
    with workflow.command_run():
        with pytest.raises(workflow.Unconfirmed):
            workflow.execute(steps)
        workflow.execute([])  # nothing to carry out: nothing to confirm
        assert done == []
    assert workflow.execute(steps) == [None] and done == ["ran"]


def _literals(tree: ast.AST):
    """The string constants of TREE that are not docstrings."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                yield node


OLD_PHRASINGS = re.compile(r"dry run\s*:|nothing was destroyed|\bwould (create|delete)\b", re.I)
THE_PATH = Path(ROOT, "gpuctl", "cli", "workflow.py")


def test_a_dry_run_is_said_one_way_and_only_go_ahead_confirms():
    said, confirming = [], []
    for path in sorted(Path(ROOT, "gpuctl").rglob("*.py")):
        if path == THE_PATH:
            continue
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(ROOT)
        said += [f"{where}:{n.lineno}" for n in _literals(tree) if OLD_PHRASINGS.search(n.value)]
        for node in ast.walk(tree):
            func = node.func if isinstance(node, ast.Call) else None
            name = getattr(func, "attr", getattr(func, "id", None))
            if name == "confirmed":
                confirming.append(f"{where}:{node.lineno}")
    assert said == [] and OLD_PHRASINGS.search(DRY_RUN)
    assert confirming == []
