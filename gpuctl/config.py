"""User settings: a command-line option wins over the environment, which wins over the
config file (GPUCTL_CONFIG, default ~/.config/gpuctl/config.yaml), which wins over defaults."""

from __future__ import annotations

import os

from gpuctl.core.specfile import load_yaml_file

SETTINGS = {
    # name: (environment variable, default)
    "gpu_label_key": ("GPUCTL_GPU_LABEL_KEY", "gpu-type"),
    "prometheus_url": ("GPUCTL_PROMETHEUS_URL", None),
    "terraform_binary": ("GPUCTL_TERRAFORM", None),
}


def config_path() -> str:
    return os.environ.get("GPUCTL_CONFIG") or os.path.expanduser("~/.config/gpuctl/config.yaml")


def setting(name: str, option_value=None):
    if option_value is not None:
        return option_value
    env_var, default = SETTINGS[name]
    if os.environ.get(env_var):
        return os.environ[env_var]
    path = config_path()
    if os.path.exists(path):
        f = load_yaml_file(path).root()
        f.reject_unknown(SETTINGS)
        value = f.str(name)
        if value is not None:
            return value
    return default
