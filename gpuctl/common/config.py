"""User settings: a command-line option wins over the environment, which wins over the
config file (GPUCTL_CONFIG, default ~/.config/gpuctl/config.yaml), which wins over defaults."""

from __future__ import annotations

import math
import os
from collections.abc import Callable

from gpuctl.common.errors import UsageError
from gpuctl.common.k8s_names import DEFAULT_GPU_LABEL_KEY
from gpuctl.common.specfile import load_yaml_file

SETTINGS = {
    # name: (environment variable, default)
    "gpu_label_key": ("GPUCTL_GPU_LABEL_KEY", DEFAULT_GPU_LABEL_KEY),
    "prometheus_url": ("GPUCTL_PROMETHEUS_URL", None),
    "terraform_binary": ("GPUCTL_TERRAFORM_BIN", None),
    # seconds one request to Kubernetes or Prometheus may take, whole answer included
    "request_timeout": ("GPUCTL_REQUEST_TIMEOUT", None),
    # site job templates (gpuctl.jobs.templates): where to look first, and the one every
    # job inherits
    "templates_dir": ("GPUCTL_TEMPLATES_DIR", None),
    "default_template": ("GPUCTL_DEFAULT_TEMPLATE", None),
}
LIST_SETTINGS = {
    # name: environment variable (comma-separated there); unset unless given
    "exporter_containers": "GPUCTL_EXPORTER_CONTAINERS",
    "exporter_jobs": "GPUCTL_EXPORTER_JOBS",
}


def config_path() -> str:
    return os.environ.get("GPUCTL_CONFIG") or os.path.expanduser("~/.config/gpuctl/config.yaml")


def setting(
    name: str, option_value: str | None = None, check: Callable[[str], str | None] | None = None
) -> str | None:
    """The value of a setting; `check(value)` says why a value is unusable (None: usable)."""
    env_var, default = SETTINGS[name]
    value, where = option_value, "the command line"
    if value is None and os.environ.get(env_var):
        value, where = os.environ[env_var], env_var
    if value is None:
        path = config_path()
        if os.path.exists(path):
            f = load_yaml_file(path).root()
            f.reject_unknown({**SETTINGS, **LIST_SETTINGS})
            value = f.text(name)
            if value is not None and check and (problem := check(value)):
                raise f.error(name, problem)
    elif check and (problem := check(value)):
        raise UsageError(f"{name} {value!r} (from {where}): {problem}")
    return default if value is None else value


def request_timeout(default: float) -> float:
    """The request_timeout setting in seconds, or `default` when it is not set."""
    value = setting("request_timeout", check=_seconds_problem)
    return default if value is None else float(value)


def _seconds_problem(text: str) -> str | None:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    return None if 0 < seconds <= 86400 else "not a number of seconds (above 0, at most 86400)"


def setting_list(name: str, option_values: list[str]) -> list[str] | None:
    """A list setting: the option's values (repeated or comma-separated), else the
    environment variable's (comma-separated), else the config file's (a list or a
    comma-separated string); None when none gives it. An empty value gives an empty list."""
    env_var = LIST_SETTINGS[name]
    if option_values:
        values = option_values
    elif os.environ.get(env_var):
        values = [os.environ[env_var]]
    else:
        path = config_path()
        if not os.path.exists(path):
            return None
        f = load_yaml_file(path).root()
        f.reject_unknown({**SETTINGS, **LIST_SETTINGS})
        values = f.str_list(name, allow_scalar=True)
        if values is None:
            return None
    return [v.strip() for value in values for v in value.split(",") if v.strip()]
