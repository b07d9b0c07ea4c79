"""Command-line options several commands share, declared once. Each call makes a new typer
option, to be used as a parameter's default; where one command means more by an option, it
passes its own help."""

from __future__ import annotations

from typing import Any

import typer

from gpuctl.cli.output import DataFormat, Format
from gpuctl.common.errors import UsageError
from gpuctl.common.k8s_names import dns1123_label, dns1123_subdomain, label_key

# Where a command falls back to when -n is not given (gpuctl.adapters.kube.Kube.namespace).
NAMESPACE_DEFAULT = (
    "GPUCTL_NAMESPACE or namespace: in the config file, else the kubeconfig context's"
)


def namespace(help: str | None = None, default: str | None = None) -> Any:
    return typer.Option(
        default,
        "-n",
        "--namespace",
        metavar="NAMESPACE",
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


def namespaces(flag: str, help: str) -> Any:
    """A repeatable option of namespace names, each checked as -n checks one."""
    return typer.Option([], flag, metavar="NS", callback=_check_namespaces(flag), help=help)


def _check_namespaces(flag: str):
    def check(values: list[str] | None) -> list[str]:
        for value in values or []:
            if not dns1123_label(value):
                raise UsageError(
                    f"{flag} {value!r} is not a valid namespace name (lower-case letters, "
                    "digits and '-', at most 63)"
                )
        return list(values or [])

    return check


def seconds(default: float, flag: str, help: str, minimum: float, maximum: float) -> Any:
    """A duration in seconds: a finite number from MINIMUM to MAXIMUM (nan, inf and
    negative numbers are refused before anything is read or sent)."""

    def check(value: float) -> float:
        if not minimum <= value <= maximum:  # False for nan too
            raise UsageError(
                f"{flag} {value:g} is not a number of seconds from {minimum:g} to {maximum:g}"
            )
        return value

    return typer.Option(default, flag, metavar="SECONDS", callback=check, help=help)


def object_name() -> Any:
    """The NAME argument of a command that reads or changes one object: a name the API server
    would accept (an empty one would address the namespace's list instead of an object)."""
    return typer.Argument(..., callback=_check_object_name)


def optional_name(value: str | None) -> str | None:
    """An optional NAME argument, checked as object_name() checks one."""
    return None if value is None else _check_object_name(value)


def resource_name(value: str) -> str:
    """A resource name such as nvidia.com/gpu or nvidia.com/mig-1g.10gb (a qualified name, as
    the API server requires of an extended resource)."""
    if not label_key(value) or "/" not in value:
        raise UsageError(f"--resource {value!r} is not a resource name such as nvidia.com/gpu")
    return value


def _check_object_name(value: str) -> str:
    if not dns1123_subdomain(value):
        raise UsageError(
            f"{value!r} is not a valid object name (lower-case letters, digits, '-' and '.', "
            "at most 253)"
            if value
            else "the name is empty"
        )
    return value


CONTEXT_HELP = (
    "kubeconfig context (default: GPUCTL_CONTEXT or context: in the config file, "
    "else the kubeconfig's current context)."
)
KUBECONFIG_HELP = "kubeconfig file (default: KUBECONFIG, else ~/.kube/config)."
DEBUG_HELP = "Show full tracebacks on errors."
# --context, --kubeconfig and --debug are not parameters of each command: they fill the run's
# gpuctl.cli.application.Application, and gpuctl.app adds them to the commands that take them.


def yes(help: str = "Do not ask for confirmation.") -> Any:
    return typer.Option(False, "-y", "--yes", help=help)


def dry_run(help: str = "Show the plan; change nothing.") -> Any:
    return typer.Option(False, "--dry-run", help=help)


def spec_file(metavar: str, help: str) -> Any:
    """-f/--file for a command that reads a spec (a positional argument may name it too)."""
    return typer.Option(None, "-f", "--file", metavar=metavar, help=help)


def spec_files(option: list[str], positional: list[str], what: str) -> list[str]:
    """The spec files named by -f or by positional arguments: one way, not both, not none.
    A usage error, so that gpuctl.app shows the command's usage after it."""
    if option and positional:
        raise _usage_error(f"give {what} once: with -f/--file or as arguments, not both")
    if not (option or positional):
        raise _usage_error(f"Missing {what}: -f FILE (or as an argument).")
    return option or positional


def _usage_error(message: str) -> Exception:
    try:  # typer ≥ 0.26 carries its own copy of click
        from typer._click import exceptions, globals
    except ImportError:  # pragma: no cover - older typer on click
        import click as exceptions  # type: ignore[no-redef]
        import click as globals  # type: ignore[no-redef]

    return exceptions.UsageError(message, globals.get_current_context(silent=True))


def given(name: str) -> bool:
    """Whether the running command's option NAME was given on the command line, not filled
    in from its environment variable or default: an option given wins over any setting."""
    try:  # typer ≥ 0.26 carries its own copy of click
        from typer._click import globals
        from typer._click.core import ParameterSource
    except ImportError:  # pragma: no cover - older typer on click
        import click as globals  # type: ignore[no-redef]
        from click.core import ParameterSource  # type: ignore[assignment]

    ctx = globals.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE


def offline_note(why: str) -> None:
    """Said on stderr when a dry run renders without a cluster."""
    from rich.markup import escape

    from gpuctl.cli.output import err_console

    err_console().print(
        f"[yellow]no cluster ({escape(why)}): planning from the options alone[/]",
        highlight=False,
    )


def selector(help: str = "Label selector for the nodes, e.g. gpu-type=H100.") -> Any:
    return typer.Option(None, "-l", "--selector", metavar="SELECTOR", help=help)


def nodes(help: str = "Node name (repeat it, or separate names with commas).") -> Any:
    return typer.Option([], "--node", metavar="NAME", help=help)


def old_nodes() -> Any:
    """--nodes, the old spelling of --node (share timeslice|off): accepted with a warning."""
    return typer.Option([], "--nodes", hidden=True, help="Old spelling of --node.")


def node_names(values: list[str], old: list[str] | None = None) -> tuple[str, ...]:
    """The names given to --node (repeated or comma separated), in order, once each; OLD:
    those given to the old spelling --nodes (a warning says to use --node)."""
    if old:
        from gpuctl.cli.output import err_console

        err_console().print(
            "warning: --nodes is deprecated: use --node (repeat it, or separate names with commas)",
            style="yellow",
            markup=False,
        )
        values = [*values, *old]
    names = tuple(dict.fromkeys(n.strip() for v in values for n in v.split(",") if n.strip()))
    if values and not names:  # e.g. --node "$EMPTY": never fall back to every GPU node
        raise UsageError("--node was given without a node name")
    for name in names:
        if not dns1123_subdomain(name):
            raise UsageError(f"--node {name!r} is not a valid node name")
    return names


def output(help: str = "table, json or yaml.", default: Format | None = Format.table) -> Any:
    return typer.Option(default, "-o", "--output", help=help)


GPU_LABEL_KEY_HELP = (
    "Node label that holds the GPU type: auto (the default) detects it from the nodes "
    "(GPU Feature Discovery, Karpenter, GKE, AKS, instance type, gpuctl's gpu-type); a key "
    "such as nvidia.com/gpu.product uses that one. "
    "Also GPUCTL_GPU_LABEL_KEY or gpu_label_key in the config file."
)


def gpu_label_key() -> Any:
    return typer.Option(None, "--gpu-label-key", help=GPU_LABEL_KEY_HELP)


def resolve_gpu_label_key(option: str | None) -> str:
    """The GPU-type label key: the option, else the environment, else the config file."""
    from gpuctl.common.k8s_names import label_key
    from gpuctl.runtime.config import setting

    key = setting(
        "gpu_label_key",
        option,
        lambda key: (
            None
            if key == "auto" or label_key(key)
            else "not a node label key (e.g. auto, gpu-type, nvidia.com/gpu.product)"
        ),
    )
    assert key is not None  # the setting has a default
    return key


ALLOCATION_HELP = (
    "How a job's GPUs are asked for: auto (the default: through DRA ResourceClaims where only "
    "DRA offers them on the cluster; offline, the device plugin's resources), device-plugin "
    "or dra. Also GPUCTL_ALLOCATION or allocation in the config file."
)


def allocation() -> Any:
    return typer.Option(None, "--allocation", help=ALLOCATION_HELP)


def resolve_allocation(option: str | None) -> str:
    """auto, device-plugin or dra: the option, else the environment, else the config file."""
    from gpuctl.k8s.placement import ALLOCATIONS
    from gpuctl.runtime.config import setting

    value = setting(
        "allocation",
        option,
        lambda v: None if v in ALLOCATIONS else "not one of " + ", ".join(ALLOCATIONS),
    )
    assert value is not None  # the setting has a default
    return value


PROMETHEUS_HELP = (
    "Prometheus holding DCGM-exporter metrics (also prometheus_url in the config file)."
)


def prometheus(help: str = PROMETHEUS_HELP) -> Any:
    """--prometheus URL (or GPUCTL_PROMETHEUS_URL), resolved by prometheus_url()."""
    return typer.Option(
        None, "--prometheus", envvar="GPUCTL_PROMETHEUS_URL", metavar="URL", help=help
    )


def prometheus_url(option: str | None) -> str:
    """The Prometheus to ask: the option, else the prometheus_url setting; else a usage error."""
    from gpuctl.runtime.config import setting

    url = setting("prometheus_url", option)
    if not url:
        raise UsageError(
            "no Prometheus URL", hint="pass --prometheus URL (or set GPUCTL_PROMETHEUS_URL)"
        )
    return url


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
