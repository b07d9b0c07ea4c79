"""The suite itself, run as CI runners and `make test &` run it: with SIGINT ignored, which
children inherit, the Ctrl-C tests still reach their child; no wait on a child is unbounded;
a test that hangs anyway fails at the suite-wide timeout (pytest-timeout)."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

# One of each way a Ctrl-C test reaches its child: a gpuctl process (tests.children.start),
# one on a pseudo-terminal (pty.fork), and this process itself (tests.children.sigint_raises)
CTRL_C_TESTS = [
    "tests/jobs/test_submit_faults.py::test_ctrl_c_while_a_command_waits_for_the_cluster_is_one_line",
    "tests/top/test_node_view.py::test_live_view_ctrl_c_is_an_interrupt_as_everywhere",
    "tests/provision/test_terraform_runner.py::test_ctrl_c_stops_gracefully_and_a_rerun_continues",
]


def _ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _pytest(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    """pytest in a process of its own started as a background job is: SIGINT ignored."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", *args],
        cwd=cwd, preexec_fn=_ignoring_sigint, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.integration
def test_ctrl_c_tests_pass_in_a_run_that_ignores_sigint():
    done = _pytest(*CTRL_C_TESTS)
    assert done.returncode == 0, done.stdout[-3000:]
    assert f"{len(CTRL_C_TESTS)} passed" in done.stdout


@pytest.mark.integration
def test_a_hanging_test_fails_at_the_suite_timeout(tmp_path):
    (tmp_path / "test_hangs.py").write_text(
        "import time\n\ndef test_hangs():\n    time.sleep(600)\n"
    )
    done = _pytest("-o", "timeout=1", "-p", "no:cacheprovider", str(tmp_path), cwd=str(tmp_path))
    assert done.returncode == 1 and "Timeout (>1.0s" in done.stdout, done.stdout[-2000:]


def test_the_suite_timeout_is_generous(pytestconfig):
    # minutes above the slowest healthy test: it only ever ends one that hangs
    assert pytestconfig.pluginmanager.hasplugin("timeout")
    assert float(pytestconfig.getini("timeout")) >= 600


def _unbounded_waits(source: str) -> list[tuple[int, str]]:
    """(line, call) of each wait on a child in SOURCE with no deadline: subprocess.run and
    its kin without timeout=, communicate() or a Popen's wait() without one, a blocking
    os.waitpid."""
    tree = ast.parse(source)
    children = {  # the names given a child process (x = subprocess.Popen(...), start(...))
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _called(node.value) in ("Popen", "start")
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = []
    for node in ast.walk(tree):
        name = _called(node)
        if not isinstance(node, ast.Call) or not name:
            continue
        keywords = {k.arg for k in node.keywords}
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        runs = name in ("run", "call", "check_call", "check_output")
        if runs and isinstance(receiver, ast.Name) and receiver.id == "subprocess":
            unbounded = "timeout" not in keywords
        elif name == "communicate":
            unbounded = "timeout" not in keywords
        elif name == "wait" and isinstance(receiver, ast.Name) and receiver.id in children:
            unbounded = not node.args and "timeout" not in keywords
        elif name == "waitpid":
            unbounded = not (len(node.args) > 1 and ast.unparse(node.args[1]) != "0")
        else:
            continue
        if unbounded:
            found.append((node.lineno, ast.unparse(node.func)))
    return found


def _called(node) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def test_no_wait_on_a_child_is_unbounded():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {call}"
        for path in sorted(Path(ROOT, "tests").rglob("*.py"))
        for line, call in _unbounded_waits(path.read_text())
        if path.name != "children.py"  # its waitpid kills the child at the deadline
    ]
    assert found == []


def test_the_check_finds_unbounded_waits():
    source = (
        "import os, subprocess\n"
        "p = subprocess.Popen(['x'])\n"
        "p.wait()\n"
        "p.communicate()\n"
        "subprocess.run(['x'])\n"
        "os.waitpid(p.pid, 0)\n"
        "p.wait(5)\n"
        "p.communicate(timeout=5)\n"
        "subprocess.run(['x'], timeout=5)\n"
        "os.waitpid(p.pid, os.WNOHANG)\n"
    )
    assert [line for line, _ in _unbounded_waits(source)] == [3, 4, 5, 6]
