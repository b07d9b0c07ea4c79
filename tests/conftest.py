import pytest

# Each stand-in lives in its own module under tests/standins/.
pytest_plugins = [
    "tests.standins.kube",
    "tests.standins.prometheus",
    "tests.standins.aws",
    "tests.standins.nvml",
    "tests.standins.terraform",
    "tests.standins.faults",
    "tests.standins.integration",
]


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    """No test reads the developer's real configuration or state."""
    for var in (
        "TF_CLI_CONFIG_FILE",
        "GPUCTL_SIMULATE",
        "GPUCTL_PROMETHEUS_URL",
        "GPUCTL_CONFIG",
        "GPUCTL_GPU_LABEL_KEY",
        "GPUCTL_REQUEST_TIMEOUT",
        "GPUCTL_TEMPLATES_DIR",
        "GPUCTL_DEFAULT_TEMPLATE",
        "GPUCTL_EXPORTER_CONTAINERS",
        "GPUCTL_EXPORTER_JOBS",
        "GPUCTL_CONTEXT",
        "GPUCTL_NAMESPACE",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "XDG_STATE_HOME",
    ):
        monkeypatch.delenv(var, raising=False)
    # A home of its own: what libraries keep under ~ (Terraform's ~/.terraform.d, ~/.aws,
    # ~/.cache, ~/.config/gpuctl) is neither the developer's nor shared by parallel workers.
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")  # rich tables unwrapped, whatever the terminal
    monkeypatch.setenv("GPUCTL_SIM_STATE", str(tmp_path / "sim-state.json"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def __repr__(self):
        return f"CliResult(code={self.code}, out={self.out[-800:]!r}, err={self.err[-800:]!r})"


@pytest.fixture
def cli(capsys):
    """Run `gpuctl ARGS…` in-process, as a user would: exit code, stdout, stderr."""
    from tests.clirun import run_gpuctl

    return lambda *args: CliResult(*run_gpuctl(capsys, *args))
