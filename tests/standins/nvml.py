"""The simulated NVML (gpuctl.sim) needs no server: this module only keeps a developer's
simulator settings out of the tests (conftest already points GPUCTL_SIM_STATE at tmp_path)."""

import pytest

SIM_ENV = ("GPUCTL_SIM_CLOCK", "GPUCTL_SIM_SEED", "GPUCTL_SIM_WITHOUT", "GPUCTL_SIM_TRACE",
           "GPUCTL_SIM_UNPRIVILEGED")


@pytest.fixture(autouse=True)
def _no_simulator_settings(monkeypatch):
    for var in SIM_ENV:
        monkeypatch.delenv(var, raising=False)
