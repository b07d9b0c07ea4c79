"""`gpuctl top` on a node of AMD GPUs, through AMD SMI: the simulated library end to end
through the CLI (`--simulate 8xMI300X`), and the clear error where amdsmi is missing."""

from __future__ import annotations

import json

import pytest

from gpuctl.adapters.amdsmi import AmdDriver, AmdSmi
from gpuctl.common.errors import GpuctlError
from gpuctl.runtime.extras import installed
from tests.clirun import run_gpuctl as cli


def test_once_prints_one_row_per_amd_gpu(capsys):
    code, out, err = cli(capsys, "top", "--simulate", "8xMI300X", "--once")
    assert code == 0, err
    rows = [ln for ln in out.splitlines() if "AMD Instinct MI300X" in ln]
    assert [int(r.split()[0]) for r in rows] == list(range(8))
    assert all("192.0G" in r and "/750W" in r for r in rows)
    assert "8 GPUs: 0 busy, 8 idle" in out


def test_json_reads_activity_memory_and_processes_through_amd_smi(capsys, monkeypatch):
    monkeypatch.setenv("GPUCTL_SIM_AMD_LOAD", "2=91:4242:train:65536")
    code, out, err = cli(capsys, "top", "--simulate", "4xMI300X", "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["simulated"] is True and data["driver_version"] == "6.12.12"
    g = data["gpus"][2]
    assert (g["utilization_gpu"], g["memory_used_mib"], g["memory_total_mib"]) == (91, 65536, 196608)  # fmt: skip
    assert g["fan_percent"] is None and g["mig_mode"] is None and g["power_limit_w"] == 750
    assert [(p["pid"], p["name"], p["used_memory_mib"]) for p in g["processes"]] == [(4242, "train", 65536)]  # fmt: skip
    assert data["gpus"][0]["utilization_gpu"] == 0 and data["gpus"][0]["processes"] == []


def test_an_amd_model_the_simulation_lacks_is_a_usage_error(capsys):
    code, _, err = cli(capsys, "top", "--simulate", "8xMI250X", "--once")
    assert code == 2 and "8xMI250X" in err and "MI300X" in err


@pytest.mark.skipif(installed("amdsmi"), reason="amdsmi is installed here")
def test_without_amdsmi_the_session_names_the_extra_to_install():
    with pytest.raises(GpuctlError) as e:
        AmdSmi(AmdDriver()).open()
    assert "amdsmi Python package) is not installed" in str(e.value)
    assert "pip install 'gpuctl[amd]'" in (e.value.hint or "")
