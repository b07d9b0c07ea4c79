import pytest

# Each stand-in lives in its own module under tests/standins/.
pytest_plugins = ["tests.standins.kube", "tests.standins.nvml"]


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    """No test reads the developer's real configuration or state."""
    for var in ("TF_CLI_CONFIG_FILE", "GPUCTL_SIMULATE", "GPUCTL_PROMETHEUS_URL", "GPUCTL_CONFIG",
                "GPUCTL_GPU_LABEL_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPUCTL_SIM_STATE", str(tmp_path / "sim-state.json"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
