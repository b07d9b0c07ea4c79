"""Command-line options several commands share, declared once. Each call makes a new typer
option, to be used as a parameter's default; where one command means more by an option, it
passes its own help."""

from __future__ import annotations

import math
from collections.abc import Callable
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


# ---- Values checked as the command line is parsed --------------------------------------
# One helper per kind of value. Each checks its option's value in click's callback, so that
# a bad one is a usage error (exit 2) naming the option before the command starts: before
# any file, cluster or server is read, and whatever else the command line lacks.

MAX_WAIT_SECONDS = 30 * 86400  # the longest a command waits for something: 30 days


def number(
    default: Any,
    *flags: str,
    low: float,
    high: float,
    help: str,
    metavar: str = "NUMBER",
    above: bool = False,
    what: str = "a number",
) -> Any:
    """A finite number from LOW (above LOW when ABOVE) to HIGH: nan, inf and 1e400 (inf to
    Python) are refused with the rest."""

    def check(ctx, param, value):  # noqa: V107 (click's callback signature)
        if value is not None and not (
            math.isfinite(value) and (value > low if above else value >= low) and value <= high
        ):
            bounds = f"above {low:g}, at most {high:g}" if above else f"{low:g} to {high:g}"
            raise UsageError(f"{_flag(param)}: {value:g} is not {what} ({bounds})")
        return value

    return typer.Option(default, *flags, metavar=metavar, help=help, callback=check)


def percent(default: float, *flags: str, help: str) -> Any:
    return number(default, *flags, low=0, high=100, help=help, metavar="PCT", what="a percentage")


def seconds(
    default: float, *flags: str, low: float, help: str, high: float = MAX_WAIT_SECONDS
) -> Any:
    """A number of seconds above LOW (0: any wait at all) and at most HIGH."""
    return number(
        default,
        *flags,
        low=low,
        high=high,
        above=low == 0,
        help=help,
        metavar="SECONDS",
        what="a number of seconds",
    )


def count(
    default: int | None, *flags: str, low: int, high: int, help: str, metavar: str = "N"
) -> Any:
    """A whole number from LOW to HIGH (click refuses what is no whole number: nan, 1e400, "")."""

    def check(ctx, param, value):  # noqa: V107 (click's callback signature)
        if value is not None and not low <= value <= high:
            raise UsageError(f"{_flag(param)}: {value} is not a whole number from {low} to {high}")
        return value

    return typer.Option(default, *flags, metavar=metavar, help=help, callback=check)


def duration(default: Any, *flags: str, help: str, bare_seconds: bool = False) -> Any:
    """A Prometheus duration (10m, 1h30m, 7d), longer than zero and at most 5y, as every
    query and rule file takes it; with BARE_SECONDS, a spec file's duration instead (a
    ReclaimPolicy's idleFor: 7200, 2h, 1d2h), within the same bounds. The text is kept."""

    def check(ctx, param, value):  # noqa: V107 (click's callback signature)
        if value is not None:
            _duration_seconds(value, _flag(param), bare_seconds)
        return value

    return typer.Option(default, *flags, metavar="DURATION", help=help, callback=check)


def _duration_seconds(text: str, flag: str, bare_seconds: bool) -> float:
    from gpuctl.common.specfile import parse_duration
    from gpuctl.dcgm.promql import MAX_SECONDS, duration_seconds

    if not bare_seconds:
        return duration_seconds(text, flag)
    seconds = parse_duration(text)
    if not seconds:
        raise UsageError(f"{flag}: {text!r} is not a duration (e.g. 30m, 2h, 1d)")
    if seconds > MAX_SECONDS:
        raise UsageError(f"{flag}: {text!r} is longer than the most gpuctl looks back, 5y")
    return seconds


def comma_list(
    value: str, flag: str, check: Callable[[str], str | None] | None = None
) -> list[str]:
    """The elements of a comma-separated VALUE, stripped: a usage error naming FLAG for an
    empty one (`a,,b`, a trailing comma, nothing at all) or one that CHECK says is wrong (the
    reason it returns)."""
    items = [item.strip() for item in value.split(",")]
    if not value.strip():
        raise UsageError(f"{flag}: nothing given")
    if not all(items):
        raise UsageError(
            f"{flag} {value!r}: an empty element",
            hint=f"separate values with single commas, e.g. {flag} a,b",
        )
    for item in items:
        problem = check(item) if check else None
        if problem:
            raise UsageError(f"{flag} {value!r}: {item!r} {problem}")
    return items


def listed(
    default: Any,
    *flags: str,
    help: str,
    metavar: str,
    check: Callable[[str], str | None] | None = None,
    empty_ok: bool = False,
    **option: Any,
) -> Any:
    """An option that takes a comma-separated list (repeated, when DEFAULT is a list): each
    value checked by comma_list (EMPTY_OK: a value that is empty altogether, where that
    means "none", is let through). The values are kept as given."""

    def each(ctx, param, value):  # noqa: V107 (click's callback signature)
        for text in [] if value is None else [value] if isinstance(value, str) else value:
            if not (empty_ok and not text.strip()):
                comma_list(text, _flag(param), check)
        return value

    return typer.Option(default, *flags, metavar=metavar, help=help, callback=each, **option)


def _flag(param) -> str:
    """The option's long spelling, for messages."""
    return next((o for o in param.opts if o.startswith("--")), param.opts[0])


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
    """-l/--selector, in kubectl's syntax, parsed (and so checked) as it is given."""

    def check(ctx, param, value):  # noqa: V107 (click's callback signature)
        if value is not None:
            from gpuctl.common import selector

            selector.parse(value)
        return value

    return typer.Option(None, "-l", "--selector", metavar="SELECTOR", help=help, callback=check)


def nodes(help: str = "Node name (repeat it, or separate names with commas).") -> Any:
    return listed([], "--node", metavar="NAME", help=help, check=_node_name)


def _node_name(name: str) -> str | None:
    return None if dns1123_subdomain(name) else "is not a node name"


def old_nodes() -> Any:
    """--nodes, the old spelling of --node (share timeslice|off): accepted with a warning."""
    return listed(
        [], "--nodes", metavar="NAME", hidden=True, help="Old spelling of --node.", check=_node_name
    )


def node_names(values: list[str], old: list[str] | None = None) -> tuple[str, ...]:
    """The names given to --node (repeated or comma separated, each checked as it was
    parsed), in order, once each; OLD: those given to the old spelling --nodes (a warning
    says to use --node)."""
    if old:
        from gpuctl.cli.output import err_console

        err_console().print(
            "warning: --nodes is deprecated: use --node (repeat it, or separate names with commas)",
            style="yellow",
            markup=False,
        )
        values = [*values, *old]
    return tuple(dict.fromkeys(n.strip() for v in values for n in v.split(",")))


def output(help: str = "table, json or yaml.", default: Any = Format.table) -> Any:
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
    return listed(
        [],
        flag,
        metavar="NAME",
        empty_ok=True,  # "": no names, none of the defaults
        check=lambda name: None if name.isprintable() and " " not in name else "is not a name",
        help=f"{what} A series whose pod is the exporter's own is a free GPU. Repeat the "
        "option or separate names with commas; the names replace the defaults (an empty "
        f"value: none). Also {env} or {setting} in the config file.",
    )
