"""`gpuctl top` on a (simulated) node, end to end through the CLI."""

import json
import os
import pty
import select
import signal
import sys
import time

import pytest

from gpuctl import sim
from gpuctl.adapters.nvml import Nvml
from tests import ROOT, children
from tests.clirun import run_gpuctl as cli


def test_once_prints_one_row_per_gpu(capsys):
    code, out, err = cli(capsys, "top", "--simulate", "8xH100-80GB", "--once")
    assert code == 0, err
    rows = [ln for ln in out.splitlines() if "H100 80GB HBM3" in ln]
    assert [int(r.split()[0]) for r in rows] == list(range(8))
    assert "8 GPUs: 0 busy, 8 idle" in out and "no processes on any GPU" in out


def test_json_sample_matches_the_simulated_node(capsys):
    sim.add_process(2, 901, 12000, name="train", user="ann", spec="4xA100-40GB")
    code, out, _ = cli(capsys, "top", "--simulate", "4xA100-40GB", "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert [g["index"] for g in data["gpus"]] == [0, 1, 2, 3]
    g = data["gpus"][2]
    assert (g["name"], g["memory_total_mib"], g["memory_used_mib"]) == (
        "NVIDIA A100-SXM4-40GB",
        40960,
        12000,
    )
    assert g["fan_percent"] is None and g["mig_mode"] == 0 and g["power_limit_w"] == 400
    assert g["processes"] == [
        {
            "pid": 901,
            "name": "train",
            "user": "ann",
            "used_memory_mib": 12000,
            "gi_id": None,
            "ci_id": None,
        }
    ]
    assert data["gpus"][0]["processes"] == [] and data["gpus"][0]["utilization_gpu"] == 0


def test_yaml_output(capsys):
    import yaml

    code, out, _ = cli(capsys, "top", "--simulate", "A30", "-o", "yaml")
    assert code == 0 and yaml.safe_load(out)["gpus"][0]["name"] == "NVIDIA A30"


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_mig_devices_nest_under_their_gpu(capsys):
    with Nvml(sim.driver("2xH200,2xA30")) as nvml:
        nvml.set_mig_mode(2, True)
        nvml.reset_gpu(2)
        gi = nvml.create_gpu_instance(2, 5, 0)
        ci = nvml.create_compute_instance(2, gi, 1)
        nvml.set_mig_mode(3, True)  # left pending
    sim.add_process(2, 77, 3000, name="infer", gi_id=gi, ci_id=ci, spec="2xH200,2xA30")
    code, out, _ = cli(capsys, "top", "--simulate", "2xH200,2xA30", "--once")
    assert code == 0
    lines = out.splitlines()
    a30 = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["2", "A30"])
    assert "N/A" in lines[a30]  # no utilization with MIG on
    assert f"└ {gi}/{ci} 2g.12gb" in lines[a30 + 1] and "@0:2" in lines[a30 + 1]
    assert "1 proc" in lines[a30 + 1] and "2.9/11.7G" in lines[a30 + 1]
    assert "Off→On*" in next(ln for ln in lines if ln.split()[:2] == ["3", "A30"])
    assert f"2:{gi}/{ci}" in out and "infer" in out and "3,000 MiB" in out
    data = json.loads(cli(capsys, "top", "--simulate", "2xH200,2xA30", "-o", "json")[1])
    assert data["gpus"][2]["mig_devices"][0]["profile"] == "2g.12gb"
    assert data["gpus"][3]["mig_mode_pending"] == 1 and data["gpus"][3]["mig_mode"] == 0


def test_sort_by_memory(capsys):
    for gpu, mib in ((1, 500), (3, 9000)):
        sim.add_process(gpu, 100 + gpu, mib, spec="4xA30")
    code, out, _ = cli(capsys, "top", "--simulate", "4xA30", "--once", "--sort", "memory")
    assert code == 0
    assert [int(ln.split()[0]) for ln in out.splitlines() if " A30 " in ln] == [3, 1, 0, 2]


def test_simulated_gpus_by_the_names_people_type(capsys):
    code, out, err = cli(
        capsys, "top", "--simulate", "2xH100,1xa100_80gb,1xNVIDIA-H100-NVL", "-o", "json"
    )
    assert code == 0, err
    assert [g["name"] for g in json.loads(out)["gpus"]] == [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 80GB HBM3",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA H100 NVL",
    ]


def test_env_var_selects_the_simulator(capsys, monkeypatch):
    monkeypatch.setenv("GPUCTL_SIMULATE", "2xA30")
    code, out, _ = cli(capsys, "top", "-o", "json")
    assert code == 0 and len(json.loads(out)["gpus"]) == 2


@pytest.mark.parametrize(
    "args,words",
    [
        (["--simulate", "3xV100", "--once"], "unknown GPU model 'V100'"),
        (["--simulate", "8xA100", "--once"], "ambiguous: it could be A100-40GB or A100-80GB"),
        (["--simulate", "8xH100-80GB", "--once", "--sort", "name"], "unknown --sort key 'name'"),
        (
            ["--simulate", "8xH100-80GB", "--once", "-d", "nan"],
            "--delay: nan is not a number of seconds",
        ),
        (
            ["--simulate", "8xH100-80GB", "--once", "-d", "inf"],
            "--delay: inf is not a number of seconds",
        ),
        (["--simulate", "8xH100-80GB", "--once", "-d", "0.01"], "(0.1 to 3600)"),
    ],
)
def test_bad_input_exits_2(capsys, args, words):
    code, out, err = cli(capsys, "top", *args)
    assert code == 2 and words in err and "Traceback" not in err and out == ""


def test_bad_simulator_seed_exits_2(capsys, monkeypatch):
    monkeypatch.setenv("GPUCTL_SIM_SEED", "x")
    code, out, err = cli(capsys, "top", "--simulate", "A30", "--once")
    assert code == 2 and "GPUCTL_SIM_SEED='x' is not" in err and "Traceback" not in err


def test_no_driver_exits_1_with_a_hint(capsys, no_nvidia_driver):
    code, out, err = cli(capsys, "top", "--once")
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "gpuctl: error: no NVIDIA driver on this machine (libnvidia-ml.so.1 not found)",
        "  hint: run on a GPU node, or try a simulated one: --simulate 8xH100-80GB",
    ]


def _run_in_terminal(stop):
    """Live `gpuctl top` in a pseudo-terminal; `stop(pid, fd)` ends it. Returns (rc, output)."""
    env = dict(os.environ, PYTHONPATH=ROOT, COLUMNS="100", LINES="40", TERM="xterm")
    pid, fd = pty.fork()
    if pid == 0:
        children.sigint_default()
        os.execve(
            sys.executable,
            [sys.executable, "-m", "gpuctl", "top", "--simulate", "2xA30", "-d", "0.2"],
            env,
        )
    out = b""
    deadline = time.monotonic() + 120  # a loaded machine starts Python slowly
    stopped = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            if not stopped and out.count(b"2 GPUs:") >= 2:  # at least two frames drawn
                stop(pid, fd)
                stopped = True
        code = children.ended(pid, max(deadline - time.monotonic(), 5))
    finally:
        os.close(fd)
    return code, out.decode(errors="replace")


@pytest.mark.integration
def test_live_view_refreshes_and_q_quits():
    rc, out = _run_in_terminal(lambda pid, fd: os.write(fd, b"q"))
    assert rc == 0 and out.count("2 GPUs:") >= 2 and "Traceback" not in out


@pytest.mark.integration
def test_live_view_ctrl_c_is_an_interrupt_as_everywhere():
    """`q` is the way out (exit 0); Ctrl-C, as in every command, says so and exits 130,
    with the terminal restored and no traceback."""
    rc, out = _run_in_terminal(lambda pid, fd: os.kill(pid, signal.SIGINT))
    assert rc == 130 and "Traceback" not in out and "gpuctl: interrupted" in out


@pytest.mark.parametrize("clock", ["abc", "nan", "inf", "-1", "1e400"])
def test_a_bad_simulator_clock_exits_2(capsys, monkeypatch, clock):
    sim.add_process(0, 4242, 1024, spec="1xA30")  # a busy GPU's utilization reads the clock
    monkeypatch.setenv("GPUCTL_SIM_CLOCK", clock)
    code, out, err = cli(capsys, "top", "--simulate", "1xA30", "--once")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.splitlines()[0] == (
        f"gpuctl: error: GPUCTL_SIM_CLOCK={clock!r} is not a time in seconds since 1970 "
        "(0 to 1e+11)"
    )


def test_simulator_state_is_not_written_through_a_planted_symlink(capsys, tmp_path, monkeypatch):
    """Symlinks planted where gpuctl writes, at a temporary name it could guess (this
    process's pid) or at the lock file, never make it write or create a file elsewhere."""
    state = tmp_path / "state.json"
    state.symlink_to(tmp_path / "victim-state")  # dangling: gpuctl would create it
    (tmp_path / f"state.json.{os.getpid()}.tmp").symlink_to(tmp_path / "victim-tmp")
    monkeypatch.setenv("GPUCTL_SIM_STATE", str(state))
    code, out, err = cli(capsys, "top", "--simulate", "1xA30", "--once")
    assert code == 0, err
    assert not (tmp_path / "victim-state").exists() and not (tmp_path / "victim-tmp").exists()
    assert not state.is_symlink() and json.loads(state.read_text())["spec"] == "1xA30"

    state.unlink()
    (tmp_path / "state.json.lock").unlink()
    (tmp_path / "state.json.lock").symlink_to(tmp_path / "victim-lock")
    code, out, err = cli(capsys, "top", "--simulate", "1xA30", "--once")
    assert code == 1 and "cannot write simulator state" in err and "Traceback" not in err
    assert not (tmp_path / "victim-lock").exists()
