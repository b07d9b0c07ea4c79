"""Child processes the tests start, interrupt and wait for.

A suite run from a background job (`make test &`, some CI runners) has SIGINT ignored, and
an ignored signal stays ignored across fork and exec: a child gpuctl would not see the
Ctrl-C a test sends it. A child that must react to SIGINT gets it back at its default
(Python then turns it into KeyboardInterrupt, as in a terminal). No wait on a child outlasts
its deadline: the child is killed and the test fails, naming what it printed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest


def sigint_default() -> None:
    """In a child before it runs its program (subprocess's preexec_fn, or after pty.fork):
    SIGINT back to its default action."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def sigint_raises(landed: threading.Event | None = None) -> Iterator[None]:
    """In this process, for a test that sends itself SIGINT: KeyboardInterrupt, as Python
    sets it up when SIGINT is not ignored (LANDED set as the main thread raises it); the
    handler found is put back after."""

    def interrupt(signum, frame):
        assert landed is not None
        landed.set()
        raise KeyboardInterrupt

    found = signal.signal(signal.SIGINT, interrupt if landed else signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, found)


def start(argv: list[str], **popen) -> subprocess.Popen:
    """subprocess.Popen(argv, **popen) for a child that Ctrl-C must reach."""
    return subprocess.Popen(argv, preexec_fn=sigint_default, **popen)


def finish(proc: subprocess.Popen, timeout: float) -> tuple:
    """communicate() with PROC within TIMEOUT seconds: (stdout, stderr). Past it, the child
    is killed and the test fails."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:  # a grandchild may hold the pipes open: do not wait for it either
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            out, err = "", ""
        pytest.fail(f"{_argv(proc)} did not end within {timeout:g} s; killed it\n{out}\n{err}")


def interrupt(proc: subprocess.Popen, timeout: float = 60) -> tuple:
    """Ctrl-C to PROC, then finish(proc, timeout): (exit code, stdout, stderr)."""
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc, timeout)
    return proc.returncode, out, err


def interrupt_when(proc: subprocess.Popen, reached, seconds: float = 60) -> tuple:
    """Ctrl-C to PROC once it has REACHED a point (a threading.Event, such as a fault rule's
    `fired`) within SECONDS: (exit code, stdout, stderr)."""
    if not reached.wait(seconds):
        proc.kill()
        pytest.fail(f"{_argv(proc)} never got there within {seconds:g} s: {finish(proc, 10)}")
    return interrupt(proc)


def ended(pid: int, timeout: float) -> int:
    """The exit code of child PID (one of os.fork's, pty.fork's) once it ends, within TIMEOUT
    seconds; past it, the child is killed and the test fails."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)  # it cannot outlive SIGKILL
    pytest.fail(f"child {pid} did not end within {timeout:g} s; killed it")


def _argv(proc: subprocess.Popen) -> str:
    args = proc.args
    return " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)
