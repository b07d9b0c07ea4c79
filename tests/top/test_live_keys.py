"""The live node view's keys: the pure state machine, then the real thing in a tmux pane
(send keys, capture the pane), as a user at a terminal would drive it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from gpuctl.top.node.core.keys import View, press
from tests import ROOT
from tests.standins import missing


def test_keys_sort_filter_help_and_quit():
    view = View()
    assert press(view, "s").sort == "util" and press(view, "p").sort == "power"
    assert press(View(sort="power"), "s").sort == "index"  # round the list
    typed = View()
    for key in "/h1\x7f2\r":  # h is text while typing, backspace edits, Enter keeps it
        typed = press(typed, key)
    assert typed == View(filter="h2")
    assert press(typed, "\x1b").filter == ""
    assert press(view, "?").help and not press(press(view, "?"), "x").help
    assert press(view, "q") is None and press(press(view, "h"), "q") is None


def _tmux() -> str:
    path = shutil.which("tmux")
    if not path:
        missing("tmux not installed (Debian: apt-get install tmux)")
    return path


@pytest.mark.integration
def test_live_top_keys_under_tmux(tmp_path):
    tmux = _tmux()
    socket = str(tmp_path / "tmux.sock")
    session = ["-f", "/dev/null", "-S", socket]  # no user configuration
    command = (
        f"cd {ROOT} && stty cols 120 && PYTHONPATH={ROOT} GPUCTL_SIM_STATE={tmp_path}/node.json "
        f"{sys.executable} -m gpuctl top --simulate 2xH100-80GB,2xA100-80GB -d 0.5"
    )

    def pane() -> str:
        return subprocess.run(
            [tmux, *session, "capture-pane", "-p", "-t", "top"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout

    def until(text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = pane()
            if text in shown:
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{text!r} not shown:\n{pane()}")

    def keys(*sent: str) -> None:
        subprocess.run([tmux, *session, "send-keys", "-t", "top", *sent], check=True, timeout=30)

    subprocess.run(
        [tmux, *session, "new-session", "-d", "-s", "top", "-x", "120", "-y", "40", command],
        check=True,
        timeout=30,
    )
    try:
        until("sort: index")
        keys("?")
        until("q quit")
        assert "GPU  NAME" not in pane()
        keys("x")  # any key closes the help
        until("sort: index")
        keys("p")
        until("sort: power")
        keys("/", "A", "1", "0", "0", "Enter")
        shown = until("filter: A100")
        assert "A100" in shown and "H100 80GB" not in shown
        keys("Escape")
        until("H100 80GB")
        keys("q")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            alive = subprocess.run(
                [tmux, *session, "has-session", "-t", "top"], capture_output=True, timeout=30
            )
            if alive.returncode != 0:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("q did not quit")
        # a terminal too short for the process table says so instead of losing it (a
        # server of its own: a second session of one server takes the first one's size)
        session[3] = str(tmp_path / "short.sock")
        subprocess.run(
            [tmux, *session, "new-session", "-d", "-s", "top", "-x", "120", "-y", "12", command],
            check=True,
            timeout=30,
        )
        until("processes hidden: the terminal has 12 rows")
    finally:
        for sock in ("tmux.sock", "short.sock"):
            subprocess.run(
                [tmux, "-S", str(tmp_path / sock), "kill-server"], capture_output=True, timeout=30
            )
