"""The simulated NVML (gpuctl.sim) needs no server: this module only keeps a developer's
simulator settings out of the tests (conftest already points GPUCTL_SIM_STATE at tmp_path)."""

import pytest

SIM_ENV = (
    "GPUCTL_SIM_CLOCK",
    "GPUCTL_SIM_SEED",
    "GPUCTL_SIM_WITHOUT",
    "GPUCTL_SIM_TRACE",
    "GPUCTL_SIM_UNPRIVILEGED",
)


@pytest.fixture(autouse=True)
def _no_simulator_settings(monkeypatch):
    for var in SIM_ENV:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def no_nvidia_driver():
    """Skips the test on a machine where the real NVML loads (it checks the no-driver path)."""
    import pynvml

    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    except pynvml.NVMLError_LibraryNotFound:
        pass
