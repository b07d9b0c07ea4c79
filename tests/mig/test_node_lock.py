"""One `mig configure` at a time per node: a lock spans the whole run (plan, steps, check),
and a second run is refused naming the first. Real processes on the simulated node (its
state file shared through GPUCTL_SIM_STATE)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests import ROOT, children
from tests.clirun import run_gpuctl as run

pytestmark = pytest.mark.integration


@pytest.fixture
def node(monkeypatch):
    monkeypatch.setenv("GPUCTL_SIMULATE", "2xH100-80GB")
    return "2xH100-80GB"


def layout(capsys):
    code, out, _ = run(capsys, "mig", "show", "-o", "json")
    assert code == 0
    return json.loads(out)


def test_a_run_in_progress_makes_a_second_one_refuse_naming_it(capsys, node):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time
            import gpuctl.sim
            from gpuctl.adapters.nvml import Nvml
            from gpuctl.mig.service import _lock_path
            from gpuctl.runtime.locks import holding
            with holding(_lock_path(Nvml(gpuctl.sim.driver(sys.argv[1]))), "x"):
                print("held", flush=True)
                time.sleep(60)
        """), node],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        before = layout(capsys)
        code, _, err = run(
            capsys, "mig", "configure", "--layout", "all-1g.10gb", "--yes", "--reset"
        )
        assert code == 1, err
        assert "this node's MIG layout is being changed by another run" in err
        assert f"pid {holder.pid}" in err
        assert layout(capsys) == before
    finally:
        holder.kill()
        holder.wait(10)
    code, _, err = run(capsys, "mig", "configure", "--layout", "all-1g.10gb", "--yes", "--reset")
    assert code == 0, err  # the lock went with its holder


def test_two_runs_at_once_leave_one_whole_layout(capsys, node):
    def start(layout_text):
        return subprocess.Popen(
            [sys.executable, "-m", "gpuctl", "mig", "configure", "--layout", layout_text,
             "--yes", "--reset"],
            cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip

    runs = [start("all-1g.10gb"), start("all-3g.40gb")]
    errors = [children.finish(p, 60)[1] for p in runs]
    results = [(p.returncode, err) for p, err in zip(runs, errors)]
    for code, err in results:
        assert code == 0 or "being changed by another run" in err, err
    assert any(code == 0 for code, _ in results)
    gpus = layout(capsys)
    layouts = {json.dumps(g["layout"], sort_keys=True) for g in gpus}
    assert len(layouts) == 1 and gpus[0]["layout"], gpus  # one of the two, on every GPU
