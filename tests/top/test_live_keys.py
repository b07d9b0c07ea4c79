"""The live views' keys (node and cluster): the pure state machines, then the real thing in a
tmux pane (send keys, capture the pane), as a user at a terminal would drive it."""

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


class Tmux:
    """A tmux server of its own (no user configuration) running COMMAND in a session of
    WIDTH × HEIGHT, driven as a user at a terminal would: keys sent, the pane captured."""

    def __init__(self, socket: str, command: str, width: int, height: int):
        self.tmux = shutil.which("tmux") or ""
        if not self.tmux:
            missing("tmux not installed (Debian: apt-get install tmux)")
        self.session = ["-f", "/dev/null", "-S", socket]
        size = ["-x", str(width), "-y", str(height)]
        self._run("new-session", "-d", "-s", "top", *size, command)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.tmux, *self.session, *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=30,
        )

    def pane(self) -> str:
        return self._run("capture-pane", "-p", "-t", "top").stdout

    def until(self, text: str, gone: tuple[str, ...] = (), timeout: float = 30.0) -> str:
        """The pane once it shows TEXT and none of GONE: a key is answered when the program
        gets to it, and a frame may be captured half redrawn."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = self.pane()
            if text in shown and not any(g in shown for g in gone):
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{text!r} not shown, or one of {gone} still is:\n{self.pane()}")

    def keys(self, *sent: str) -> None:
        self._run("send-keys", "-t", "top", *sent)

    def ended(self, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._run("has-session", "-t", "top", check=False).returncode != 0:
                return True
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        self._run("kill-server", check=False)


@pytest.mark.integration
def test_live_top_keys_under_tmux(tmp_path):
    command = (
        f"cd {ROOT} && stty cols 120 && PYTHONPATH={ROOT} GPUCTL_SIM_STATE={tmp_path}/node.json "
        f"{sys.executable} -m gpuctl top --simulate 2xH100-80GB,2xA100-80GB -d 0.5"
    )
    top = Tmux(str(tmp_path / "tmux.sock"), command, 120, 40)
    short = None
    try:
        top.until("sort: index")
        top.keys("?")
        top.until("h this help", gone=("GPU  NAME",))  # the help in place of the table
        top.keys("x")  # any key closes the help
        top.until("GPU  NAME")
        top.keys("p")
        top.until("sort: power")
        top.keys("/", "A", "1", "0", "0", "Enter")
        shown = top.until("filter: A100 · ", gone=("H100 80GB",))  # Enter kept the filter
        assert "A100" in shown
        top.keys("Escape")
        top.until("H100 80GB")
        top.keys("q")
        assert top.ended(), "q did not quit"
        # a terminal too short for the process table says so instead of losing it (a
        # server of its own: a second session of one server takes the first one's size)
        short = Tmux(str(tmp_path / "short.sock"), command, 120, 12)
        short.until("processes hidden: the terminal has 12 rows")
    finally:
        for server in (top, short):
            if server is not None:
                server.stop()


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

    prom = start_prometheus(load_blocks(mixed_cluster(), time.time()))
    status = tmp_path / "status"
    command = (
        f"cd {ROOT} && stty cols 160 && PYTHONPATH={ROOT} GPUCTL_PROMETHEUS_URL={prom.url} "
        f"{sys.executable} -m gpuctl top -d 0.5; echo $? > {status}"
    )
    top = None
    try:
        top = Tmux(str(tmp_path / "tmux.sock"), command, 160, 40)
        top.until("sort: index")
        top.keys("?")
        shown = top.until("h this help", gone=("NAMESPACE/POD",))
        assert "I sort by index, util, memory" in shown
        top.keys("x")  # any key closes the help
        top.until("NAMESPACE/POD")
        top.keys("u")
        top.until("sort: util")
        top.keys("/", "n", "s", ":", "r", "e", "s", "Enter")  # namespace research
        shown = top.until("filter: ns:res (3 matches)", gone=("ml/train-0",))
        assert "research/nb-2" in shown
        top.keys("Escape")
        top.until("ml/train-0")
        top.keys("q")
        assert top.ended()
        assert status.read_text().strip() == "0"  # q leaves with 0, not Ctrl-C's 130
    finally:
        if top is not None:
            top.stop()
        prom.stop()
