"""Which view `gpuctl top` shows: an option given on the command line wins over any
environment variable or config file setting (docs/settings.md), the environment over the
config file; both options at once is a usage error."""

import json

from tests.clirun import run_gpuctl as cli

UNREACHABLE = "http://127.0.0.1:9"  # the cluster view's error says it was chosen


def node_view(code, out, err) -> bool:
    assert code == 0, err
    return json.loads(out)["simulated"] is True


def cluster_view(code, out, err) -> bool:
    return code == 1 and f"cannot reach Prometheus at {UNREACHABLE}" in err


def test_simulate_given_wins_over_the_environments_prometheus(capsys, monkeypatch):
    monkeypatch.setenv("GPUCTL_PROMETHEUS_URL", UNREACHABLE)
    assert node_view(*cli(capsys, "top", "--simulate", "2xH100-80GB", "-o", "json"))


def test_simulate_given_wins_over_the_config_files_prometheus(capsys, monkeypatch, tmp_path):
    (tmp_path / "config.yaml").write_text(f"prometheus_url: {UNREACHABLE}\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(tmp_path / "config.yaml"))
    assert node_view(*cli(capsys, "top", "--simulate", "2xH100-80GB", "-o", "json"))
    # ...and so does GPUCTL_SIMULATE: the environment wins over the config file
    monkeypatch.setenv("GPUCTL_SIMULATE", "2xH100-80GB")
    assert node_view(*cli(capsys, "top", "-o", "json"))


def test_prometheus_given_wins_over_the_environments_simulate(capsys, monkeypatch):
    monkeypatch.setenv("GPUCTL_SIMULATE", "2xH100-80GB")
    assert cluster_view(*cli(capsys, "top", "--prometheus", UNREACHABLE, "--once"))
    # both in the environment: the cluster's, as before a view could be chosen
    monkeypatch.setenv("GPUCTL_PROMETHEUS_URL", UNREACHABLE)
    assert cluster_view(*cli(capsys, "top", "--once"))


def test_both_options_given_is_a_usage_error(capsys):
    code, out, err = cli(capsys, "top", "--simulate", "2xH100-80GB", "--prometheus", UNREACHABLE)
    assert code == 2 and out == ""
    assert "--simulate and --prometheus ask for two views" in err.splitlines()[0]
