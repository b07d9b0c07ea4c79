"""Settings: option > environment > config file > default; where the config file is."""

import pytest

from gpuctl.common.errors import EXIT_USAGE, SpecError, UsageError
from gpuctl.runtime import config


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"  # $HOME of every test (tests/conftest.py)


def test_precedence_option_environment_file_default(tmp_path, monkeypatch):
    cfg = write(tmp_path / "cfg.yaml", "gpu_label_key: from/file\nnamespace: team-file\n")
    assert config.setting_from("gpu_label_key") == ("auto", "the default")
    monkeypatch.setenv("GPUCTL_CONFIG", str(cfg))
    assert config.setting_from("gpu_label_key") == ("from/file", str(cfg))
    assert config.setting_from("namespace") == ("team-file", str(cfg))
    assert config.setting_from("context") == (None, "the default")
    monkeypatch.setenv("GPUCTL_GPU_LABEL_KEY", "from/env")
    monkeypatch.setenv("GPUCTL_NAMESPACE", "team-env")
    assert config.setting_from("gpu_label_key") == ("from/env", "GPUCTL_GPU_LABEL_KEY")
    assert config.setting_from("namespace") == ("team-env", "GPUCTL_NAMESPACE")
    assert config.setting_from("gpu_label_key", "from/option") == (
        "from/option",
        "the command line",
    )


def test_the_default_file_is_under_xdg_config_home_else_dot_config(tmp_path, home, monkeypatch):
    write(home / ".config" / "gpuctl" / "config.yaml", "context: from-dot-config\n")
    assert config.setting("context") == "from-dot-config"
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    assert config.config_path() == str(xdg / "gpuctl" / "config.yaml")
    assert config.setting("context") is None  # no file there: no settings, no error
    write(xdg / "gpuctl" / "config.yaml", "context: from-xdg\n")
    assert config.setting("context") == "from-xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # the XDG spec: ignored
    assert config.setting("context") == "from-dot-config"
    cfg = write(tmp_path / "named.yaml", "context: from-gpuctl-config\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(cfg))  # wins over both
    assert config.setting("context") == "from-gpuctl-config"


def test_a_gpuctl_config_that_does_not_exist_is_an_error(tmp_path, home, monkeypatch):
    write(home / ".config" / "gpuctl" / "config.yaml", "context: not-this-one\n")
    missing = tmp_path / "typo.yaml"
    monkeypatch.setenv("GPUCTL_CONFIG", str(missing))
    with pytest.raises(UsageError) as e:
        config.setting("context")
    assert e.value.exit_code == EXIT_USAGE
    assert e.value.message == f"GPUCTL_CONFIG={missing}: no such file"
    with pytest.raises(UsageError):
        config.setting_list("exporter_jobs", [])
    # an option or a variable needs no file
    assert config.setting("context", "given") == "given"


def test_an_empty_file_has_no_settings_and_a_bad_one_says_where(tmp_path, monkeypatch):
    cfg = write(tmp_path / "cfg.yaml", "")
    monkeypatch.setenv("GPUCTL_CONFIG", str(cfg))
    assert config.setting("gpu_label_key") == "auto"
    write(cfg, "context: a\ncontxt: b\n")
    with pytest.raises(SpecError) as e:
        config.setting("context")
    assert (e.value.file, e.value.line) == (str(cfg), 2)


def test_a_missing_gpuctl_config_is_one_line_exit_2(cli, tmp_path, monkeypatch):
    import os

    from tests import ROOT

    monkeypatch.setenv("GPUCTL_CONFIG", str(tmp_path / "nope.yaml"))
    r = cli("render", os.path.join(ROOT, "examples", "seed-pod.yaml"))
    assert r.code == 2 and r.out == ""
    assert (
        r.err.splitlines()[0]
        == f"gpuctl: error: GPUCTL_CONFIG={tmp_path / 'nope.yaml'}: no such file"
    )


def documented_settings() -> str:
    """The settings file docs/settings.md shows."""
    import os
    import re

    from tests import ROOT

    with open(os.path.join(ROOT, "docs", "settings.md"), encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```yaml\n(# ~/.config/gpuctl/config.yaml\n.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/settings.md shows one settings file"
    return blocks[0]


def test_the_settings_file_the_docs_show_is_read_as_written(tmp_path, monkeypatch):
    import yaml

    text = documented_settings()
    written = yaml.safe_load(text)
    monkeypatch.setenv("GPUCTL_CONFIG", str(write(tmp_path / "config.yaml", text)))
    for name in config.SETTINGS:
        if name in written:
            assert config.setting_from(name) == (str(written[name]), str(tmp_path / "config.yaml"))
    assert config.request_timeout(10.0) == float(written["request_timeout"])
    for name in config.LIST_SETTINGS:
        assert config.setting_list(name, []) == written[name]


@pytest.mark.parametrize("value", ["30", "2.5", '"30"'])
def test_request_timeout_may_be_written_as_a_number(tmp_path, monkeypatch, value):
    monkeypatch.setenv(
        "GPUCTL_CONFIG", str(write(tmp_path / "c.yaml", f"request_timeout: {value}\n"))
    )
    assert config.request_timeout(10.0) == float(value.strip('"'))


@pytest.mark.parametrize(
    "value, says",
    [
        ("[30]", "expected a number"),
        ("true", "expected a number"),
        ("0", "not a number of seconds"),
    ],
)
def test_a_request_timeout_gpuctl_cannot_use_names_the_line(tmp_path, monkeypatch, value, says):
    cfg = write(tmp_path / "c.yaml", f"context: x\nrequest_timeout: {value}\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(cfg))
    with pytest.raises(SpecError, match=says) as e:
        config.request_timeout(10.0)
    assert (e.value.file, e.value.line, e.value.field) == (str(cfg), 2, "request_timeout")
