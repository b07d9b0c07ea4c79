"""Fidelity of the simulated NVML: nvitop and gpustat, unmodified, run on the simulated node
(the shim directory first on PYTHONPATH) and print what the simulator holds and what
gpuctl's own sample reads."""

import json
import os
import re
import subprocess
import sys

import pytest

from gpuctl import sim
from gpuctl.adapters.nvml import Nvml
from gpuctl.gpus.sample import to_dict
from tests import ROOT
from tests.standins import missing

pytestmark = pytest.mark.integration  # runs nvitop and gpustat

SPEC = "2xH100-80GB,2xA30"
CLOCK = "1700000000"  # the same instant for every program, so readings agree exactly
BIN = os.path.dirname(sys.executable)


def tool(name):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        missing(f"{name} is not installed (pip install -e '.[test]')")
    return path


@pytest.fixture
def node(monkeypatch):
    """GPU 0 runs a real process; GPU 2 has MIG on with two MIG devices and a process on one;
    GPU 3 has MIG pending. Returns (real pid, gpuctl's JSON sample, environment for tools)."""
    monkeypatch.setenv("GPUCTL_SIM_CLOCK", CLOCK)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        sim.add_process(0, child.pid, 20000, name="python3", spec=SPEC)
        with Nvml(sim.driver(SPEC)) as nvml:
            nvml.set_mig_mode(2, True)
            nvml.reset_gpu(2)
            gi = nvml.create_gpu_instance(2, 5, 0)
            ci = nvml.create_compute_instance(2, gi, 1)
            nvml.create_compute_instance(2, nvml.create_gpu_instance(2, 14, 3), 0)
            nvml.set_mig_mode(3, True)
        sim.add_process(2, 4242, 3000, name="train", user="alice", gi_id=gi, ci_id=ci, spec=SPEC)
        with Nvml(sim.driver(SPEC)) as nvml:
            sample = to_dict(nvml.sample())
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([sim.SHIM_DIR, ROOT]),
            GPUCTL_SIMULATE=SPEC,
            COLUMNS="120",
        )
        yield child.pid, sample, env
    finally:
        child.kill()
        child.wait(10)


def test_gpustat_json_matches(node):
    pid, sample, env = node
    out = subprocess.run(
        [tool("gpustat"), "--json"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    gpus = json.loads(out)["gpus"]
    assert len(gpus) == 4
    for theirs, ours in zip(gpus, sample["gpus"]):
        assert (theirs["index"], theirs["uuid"], theirs["name"]) == (
            ours["index"],
            ours["uuid"],
            ours["name"],
        )
        assert theirs["memory.used"] == ours["memory_used_mib"]
        assert theirs["memory.total"] == ours["memory_total_mib"]
        assert theirs["utilization.gpu"] == ours["utilization_gpu"]  # None on the MIG GPU
        assert theirs["temperature.gpu"] == ours["temperature_c"]
        assert theirs["power.draw"] == int(ours["power_w"])
        assert theirs["enforced.power.limit"] == ours["power_limit_w"]
        assert theirs["fan.speed"] is None and ours["fan_percent"] is None
    assert (
        sample["gpus"][0]["memory_used_mib"] == 20000 and sample["gpus"][0]["utilization_gpu"] > 0
    )
    (proc,) = gpus[0]["processes"]
    assert (proc["pid"], proc["gpu_memory_usage"], proc["username"]) == (
        pid,
        20000,
        sample["gpus"][0]["processes"][0]["user"],
    )
    assert gpus[2]["memory.used"] == 3000  # the MIG process's memory counts on its GPU


def _mib(text):
    number = float(re.match(r"[\d.]+", text).group())
    return (
        number
        * {"B": 1 / 2**20, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[
            re.search(r"[A-Za-z]+$", text).group()
        ]
    )


def test_nvitop_once_matches(node):
    pid, sample, env = node
    out = subprocess.run(
        [tool("nvitop"), "--once"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    lines = out.splitlines()
    gpu_rows = [
        (i, m)
        for i, ln in enumerate(lines)
        if (m := re.match(r"│\s+(\d+)\s+(.+?)\s+On │ (\S+) \w+ │\s+(Enabled|Disabled)", ln))
    ]
    assert [int(m.group(1)) for _, m in gpu_rows] == [0, 1, 2, 3]
    for (i, m), ours in zip(gpu_rows, sample["gpus"]):
        assert ours["name"].endswith(m.group(2))
        assert m.group(4) == ("Enabled" if ours["mig_mode"] else "Disabled")
        r = re.match(
            r"│ (\S+)\s+(\d+)C\s+P\d+\s+(\d+)W / (\d+)W │\s+(\S+) /\s+(\S+) │\s+(\S+)", lines[i + 1]
        )
        fan, temp, power, limit, used, total, util = r.groups()
        assert fan == "N/A" and int(temp) == ours["temperature_c"]
        assert abs(int(power) - ours["power_w"]) <= 1 and int(limit) == ours["power_limit_w"]
        assert _mib(used) == ours["memory_used_mib"]
        assert abs(_mib(total) - ours["memory_total_mib"]) < 6  # printed as GiB, 2 decimals
        assert util == ("N/A" if ours["utilization_gpu"] is None else f"{ours['utilization_gpu']}%")
    mig = [
        re.match(r"│ (\d+):(\d+)\s+(\S+) @ GI/CI:\s+(\d+)/(\d+) │\s+(\S+) /\s+(\S+) │", ln)
        for ln in lines
    ]
    mig = [m.groups() for m in mig if m]
    expected = [
        (
            str(2),
            str(k),
            d["profile"],
            str(d["gi_id"]),
            str(d["ci_id"]),
            d["memory_used_mib"],
            d["memory_total_mib"],
        )
        for k, d in enumerate(sample["gpus"][2]["mig_devices"])
    ]
    assert [(g, k, p, gi, ci, _mib(u), _mib(t)) for g, k, p, gi, ci, u, t in mig] == expected
    procs = [re.match(r"│\s+(\d+(?::\d+)?)\s+(\d+) C\s+(\S+)\s+(\d+)MiB", ln) for ln in lines]
    procs = {int(m.group(2)): (m.group(1), m.group(3), int(m.group(4))) for m in procs if m}
    ours = sample["gpus"][0]["processes"][0]
    assert procs[pid] == ("0", ours["user"], 20000)
    assert procs[4242] == ("2:0", "N/A", 3000)  # no such process on this host: nvitop says N/A
