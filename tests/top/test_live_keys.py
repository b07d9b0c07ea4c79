"""The live node view's keys: the pure state machine, then the real thing in a tmux pane
(send keys, capture the pane), as a user at a terminal would drive it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from gpuctl.common.keys import View
from gpuctl.top.node.core.keys import KEYS
from tests import ROOT
from tests.standins import missing

press = KEYS.press


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
        subprocess.run([tmux, *session, "send-keys", "-t", "top", *sent], check=True)

    subprocess.run(
        [tmux, *session, "new-session", "-d", "-s", "top", "-x", "120", "-y", "40", command],
        check=True,
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
                [tmux, *session, "has-session", "-t", "top"], capture_output=True
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
        )
        until("processes hidden: the terminal has 12 rows")
    finally:
        for sock in ("tmux.sock", "short.sock"):
            subprocess.run([tmux, "-S", str(tmp_path / sock), "kill-server"], capture_output=True)


def test_cluster_keys_filter_on_columns():
    from gpuctl.dcgm.holders import Holder
    from gpuctl.top.cluster.core import keys
    from gpuctl.top.cluster.core.usage import ClusterGpuRow

    def row(node, model, *holders):
        return ClusterGpuRow(node, "0", None, model, None, None, None, None, None, None, None,
                             tuple(Holder(ns, pod, "c") for ns, pod in holders), None)  # fmt: skip

    h100 = row("gpu-node-1", "NVIDIA H100 80GB HBM3", ("ml", "train-0"))
    a100 = row("hbm-node", "NVIDIA A100-SXM4-80GB", ("research", "nb-hbm3"))
    free = row("gpu-node-2", "NVIDIA H100 80GB HBM3")
    shown = lambda wanted: [r for r in (h100, a100, free) if keys.row_matches(r, wanted)]  # noqa: E731
    assert shown("hbm3") == [h100, a100, free]  # any column, whatever the case
    assert shown("model:HBM3") == [h100, free]
    assert shown("node:hbm") == [a100] and shown("pod:hbm3") == [a100]
    assert shown("ns:ml") == [h100] and shown("ns: research ") == [a100]
    assert shown("other:hbm3") == []  # not a column: the text is `other:hbm3`
    assert (
        keys.KEYS.press(View(), "I").sort == "idle" and keys.KEYS.press(View(), "i").sort == "index"
    )
    # the series fetched for a filter: those of the columns it names
    assert keys.matchers("model:H100") == ('modelName=~"(?i).*H100.*"',)
    assert len(keys.matchers("x")) == 3 + 3 + 3 + 1


@pytest.mark.integration
def test_live_cluster_view_keys_under_tmux(tmp_path):
    """`gpuctl top` with GPUCTL_PROMETHEUS_URL set, as the README says to run it: help,
    sort, a filter on a column, and `q` leaving with exit code 0."""
    from tests.cluster_data import mixed_cluster
    from tests.standins.prometheus import load_blocks, start_prometheus

    tmux = _tmux()
    prom = start_prometheus(load_blocks(mixed_cluster(), time.time()))
    socket = str(tmp_path / "tmux.sock")
    session = ["-f", "/dev/null", "-S", socket]
    status = tmp_path / "status"
    command = (
        f"cd {ROOT} && stty cols 160 && PYTHONPATH={ROOT} GPUCTL_PROMETHEUS_URL={prom.url} "
        f"{sys.executable} -m gpuctl top -d 0.5; echo $? > {status}"
    )

    def pane() -> str:
        return subprocess.run(
            [tmux, *session, "capture-pane", "-p", "-t", "top"],
            capture_output=True,
            text=True,
            check=True,
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
        subprocess.run([tmux, *session, "send-keys", "-t", "top", *sent], check=True)

    subprocess.run(
        [tmux, *session, "new-session", "-d", "-s", "top", "-x", "160", "-y", "40", command],
        check=True,
    )
    try:
        until("sort: index")
        keys("?")
        shown = until("h this help")
        assert "NAMESPACE/POD" not in shown and "I sort by index, util, memory" in shown
        keys("x")  # any key closes the help
        until("NAMESPACE/POD")
        keys("u")
        until("sort: util")
        keys("/", "n", "s", ":", "r", "e", "s", "Enter")  # namespace research
        shown = until("filter: ns:res (3 matches)")
        assert "research/nb-2" in shown and "ml/train-0" not in shown
        keys("Escape")
        until("ml/train-0")
        keys("q")
        deadline = time.monotonic() + 20
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert status.read_text().strip() == "0"  # q leaves with 0, not Ctrl-C's 130
    finally:
        subprocess.run([tmux, *session, "kill-server"], capture_output=True)
        prom.stop()
