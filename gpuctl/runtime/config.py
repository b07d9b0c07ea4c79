"""User settings: a command-line option wins over the environment, which wins over the
config file, which wins over defaults.

The config file is GPUCTL_CONFIG when that is set (the file must exist), else
gpuctl/config.yaml in $XDG_CONFIG_HOME, else in ~/.config (a missing default file is no
error: there are no settings)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuctl.common.errors import UsageError

if TYPE_CHECKING:
    from gpuctl.common.specfile import Fields

CONFIG_ENV = "GPUCTL_CONFIG"
SETTINGS = {
    # name: (environment variable, default)
    # auto: detected per cluster from its nodes' labels (gpuctl.k8s.placement)
    "gpu_label_key": ("GPUCTL_GPU_LABEL_KEY", "auto"),
    # how a job's GPUs are asked for (gpuctl.k8s.placement): auto, device-plugin or dra
    "allocation": ("GPUCTL_ALLOCATION", "auto"),
    "prometheus_url": ("GPUCTL_PROMETHEUS_URL", None),
    "terraform_binary": ("GPUCTL_TERRAFORM_BIN", None),
    # seconds one request to Kubernetes or Prometheus may take, whole answer included
    "request_timeout": ("GPUCTL_REQUEST_TIMEOUT", None),
    # site job templates (gpuctl.jobs.core.templates): where to look first, and the one every
    # job inherits
    "templates_dir": ("GPUCTL_TEMPLATES_DIR", None),
    "default_template": ("GPUCTL_DEFAULT_TEMPLATE", None),
    # the kubeconfig context every command that talks to Kubernetes uses (default: the
    # kubeconfig's current context), and the namespace it uses where it would use that
    # context's namespace
    "context": ("GPUCTL_CONTEXT", None),
    "namespace": ("GPUCTL_NAMESPACE", None),
    # how gpuctl talks to the API server: "lean" (its own transport; the official client
    # only for an auth-provider user) or "kubernetes" (the official client for everything)
    "kube_client": ("GPUCTL_KUBE_CLIENT", "lean"),
}
NUMBERS = {"request_timeout"}  # settings the config file may write as a number
LIST_SETTINGS = {
    # name: environment variable (comma-separated there); unset unless given
    "exporter_containers": "GPUCTL_EXPORTER_CONTAINERS",
    "exporter_jobs": "GPUCTL_EXPORTER_JOBS",
}


def config_path() -> str:
    """Where the config file is (whether or not there is one)."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        return os.path.expanduser(named)
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is to be ignored
        base = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "gpuctl", "config.yaml")


def _config_file() -> Fields | None:
    """The config file's settings; None when the default file does not exist or is empty."""
    path = config_path()
    if os.environ.get(CONFIG_ENV):
        if not os.path.exists(path):
            raise UsageError(
                f"{CONFIG_ENV}={path}: no such file",
                hint=f"create it, or unset {CONFIG_ENV} to use the default settings file",
            )
    elif not os.path.exists(path):
        return None
    # the spec file reader only for a file to read: most runs have none, and every run asks
    from gpuctl.common.specfile import load_yaml_file

    doc = load_yaml_file(path)
    if doc.data is None:
        return None
    f = doc.root()
    f.reject_unknown({**SETTINGS, **LIST_SETTINGS})
    return f


def setting(
    name: str, option_value: str | None = None, check: Callable[[str], str | None] | None = None
) -> str | None:
    """The value of a setting; `check(value)` says why a value is unusable (None: usable)."""
    return setting_from(name, option_value, check)[0]


def setting_from(
    name: str, option_value: str | None = None, check: Callable[[str], str | None] | None = None
) -> tuple[str | None, str]:
    """(the value of a setting, where it came from: "the command line", the environment
    variable, the config file's path or "the default")."""
    env_var, default = SETTINGS[name]
    value, where = option_value, "the command line"
    if value is None and os.environ.get(env_var):
        value, where = os.environ[env_var], env_var
    if value is None:
        f = _config_file()
        value = (f.number_text(name) if name in NUMBERS else f.text(name)) if f else None
        if value is not None:
            assert f is not None  # value came from it
            where = f.doc.file
            if check and (problem := check(value)):
                raise f.error(name, problem)
    elif check and (problem := check(value)):
        raise UsageError(f"{name} {value!r} (from {where}): {problem}")
    return (default, "the default") if value is None else (value, where)


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
    values: list[str] | None
    if option_values:
        values = option_values
    elif os.environ.get(env_var):
        values = [os.environ[env_var]]
    else:
        f = _config_file()
        values = f.str_list(name, allow_scalar=True) if f else None
        if values is None:
            return None
    return [v.strip() for value in values for v in value.split(",") if v.strip()]
