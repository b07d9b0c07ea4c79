"""Command-line options several commands share, declared once. Each call makes a new typer
option, to be used as a parameter's default; where one command means more by an option, it
passes its own help."""

from __future__ import annotations

from typing import Any

import typer

from gpuctl.common.errors import UsageError
from gpuctl.common.k8s_names import dns1123_label
from gpuctl.common.output import DataFormat, Format

# Where a command falls back to when -n is not given (gpuctl.adapters.kube.Kube.namespace).
NAMESPACE_DEFAULT = (
    "GPUCTL_NAMESPACE or namespace: in the config file, else the kubeconfig context's"
)


def namespace(help: str | None = None, default: str | None = None) -> Any:
    return typer.Option(
        default,
        "-n",
        "--namespace",
        callback=_check_namespace,
        help=help or f"Namespace (default: {NAMESPACE_DEFAULT}).",
    )


def _check_namespace(value: str | None) -> str | None:
    """A name Kubernetes would refuse is refused before any request."""
    if value is not None and not dns1123_label(value):
        raise UsageError(
            f"--namespace {value!r} is not a valid namespace name (lower-case "
            "letters, digits and '-', at most 63)"
        )
    return value


def context() -> Any:
    return typer.Option(
        None,
        "--context",
        help="kubeconfig context (default: GPUCTL_CONTEXT or context: in the config file, "
        "else the kubeconfig's current context).",
    )


def output(help: str = "table, json or yaml.", default: Format | None = Format.table) -> Any:
    return typer.Option(default, "-o", "--output", help=help)


GPU_LABEL_KEY_HELP = (
    "Node label that holds the GPU type (default gpu-type; e.g. "
    "nvidia.com/gpu.product for GPU Feature Discovery). "
    "Also GPUCTL_GPU_LABEL_KEY or gpu_label_key in the config file."
)


def gpu_label_key() -> Any:
    return typer.Option(None, "--gpu-label-key", help=GPU_LABEL_KEY_HELP)


def resolve_gpu_label_key(option: str | None) -> str:
    """The GPU-type label key: the option, else the environment, else the config file."""
    from gpuctl.common.config import setting
    from gpuctl.common.k8s_names import label_key

    key = setting(
        "gpu_label_key",
        option,
        lambda key: (
            None
            if label_key(key)
            else "not a node label key (e.g. gpu-type, nvidia.com/gpu.product)"
        ),
    )
    assert key is not None  # the setting has a default
    return key


def data_output() -> Any:
    """-o/--output for commands whose output is data only (manifests, configs)."""
    return typer.Option(DataFormat.yaml, "-o", "--output", help="yaml or json.")


def exporter_containers() -> Any:
    """--exporter-container: `gpuctl top`, `gpuctl advise` and `gpuctl alerts render` tell
    the DCGM exporter's own pod from a pod holding a GPU by it."""
    return _exporter_names(
        "--exporter-container",
        "Container name of the DCGM exporter's pod (default: the names the GPU Operator, "
        "dcgm-exporter's manifest and its Helm chart give it; see docs/cluster-top.md).",
        "GPUCTL_EXPORTER_CONTAINERS",
        "exporter_containers",
    )


def exporter_jobs() -> Any:
    """--exporter-job: the same for series that carry no container label."""
    return _exporter_names(
        "--exporter-job",
        "Scrape job of the DCGM exporter, for series without a container label (default: "
        "the GPU Operator's and dcgm-exporter's service names).",
        "GPUCTL_EXPORTER_JOBS",
        "exporter_jobs",
    )


def _exporter_names(flag: str, what: str, env: str, setting: str) -> Any:
    return typer.Option(
        [],
        flag,
        metavar="NAME",
        help=f"{what} A series whose pod is the exporter's own is a free GPU. Repeat the "
        "option or separate names with commas; the names replace the defaults. Also "
        f"{env} or {setting} in the config file.",
    )
