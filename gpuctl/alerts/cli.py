"""`gpuctl alerts render`: GPU alert rules for Prometheus over DCGM-exporter metrics."""

from __future__ import annotations

import enum

import typer

from gpuctl.cli import options
from gpuctl.cli.output import DataFormat, dump, echo, err_console
from gpuctl.common.errors import UsageError

alerts_app = typer.Typer(
    help="Prometheus alert rules for GPUs (DCGM-exporter metrics).",
    rich_markup_mode=None,
    no_args_is_help=True,
)


class RuleFormat(str, enum.Enum):
    rules = "rules"
    prometheusrule = "prometheusrule"


def _threshold(default: float, flag: str, help: str, metavar: str = "PCT"):
    return typer.Option(default, flag, metavar=metavar, help=help)


def _duration(default: str, flag: str, help: str):
    return typer.Option(default, flag, metavar="DURATION", help=help)


FORMAT = typer.Option(
    RuleFormat.rules,
    "--format",
    help="rules: a Prometheus rule file (rule_files:); prometheusrule: a "
    "monitoring.coreos.com/v1 PrometheusRule for the Prometheus operator.",
)
NAME = typer.Option("gpuctl-gpu-alerts", "--name", metavar="NAME", help="PrometheusRule name.")
LABEL = typer.Option(
    [],
    "--label",
    metavar="KEY=VALUE",
    help="PrometheusRule label, repeatable (match your Prometheus ruleSelector, e.g. "
    "release=kube-prometheus-stack).",
)
HIGH_UTIL = _threshold(80.0, "--high-util", "GPUHighUtilization: a node's GPUs average above this.")
HIGH_UTIL_WINDOW = _duration("5m", "--high-util-window", "...averaged over this.")
HIGH_UTIL_FOR = _duration("15m", "--high-util-for", "...for this long.")
IDLE_UTIL = _threshold(
    5.0, "--idle-util", "GPUIdleAllocated: a GPU held by a pod averages below this."
)
IDLE_WINDOW = _duration("30m", "--idle-window", "...averaged over this.")
IDLE_FOR = _duration("30m", "--idle-for", "...for this long.")
MEMORY = _threshold(95.0, "--memory", "GPUMemoryNearFull: framebuffer used above this.")
MEMORY_FOR = _duration("15m", "--memory-for", "...for this long.")
TEMPERATURE = _threshold(
    85.0, "--temperature", "GPUTemperatureHigh: GPU above this.", metavar="CELSIUS"
)
TEMPERATURE_FOR = _duration("5m", "--temperature-for", "...for this long.")
XID_WINDOW = _duration(
    "10m", "--xid-window", "GPUXidError: fires for this long after a GPU reports a new XID code."
)
OLD_LABEL = typer.Option(
    [], "-l", hidden=True, help="Old spelling of --label (-l is a label selector)."
)
POD_LABEL = typer.Option(None, "--pod-label", hidden=True, help="No longer needed: ignored.")


def register(app: typer.Typer) -> None:
    app.add_typer(alerts_app, name="alerts")


@alerts_app.command("render")
def render(
    output: DataFormat = options.data_output(),
    fmt: RuleFormat = FORMAT,
    name: str = NAME,
    namespace: str = options.namespace("PrometheusRule namespace.", default="monitoring"),
    label: list[str] = LABEL,
    high_util: float = HIGH_UTIL,
    high_util_window: str = HIGH_UTIL_WINDOW,
    high_util_for: str = HIGH_UTIL_FOR,
    idle_util: float = IDLE_UTIL,
    idle_window: str = IDLE_WINDOW,
    idle_for: str = IDLE_FOR,
    memory: float = MEMORY,
    memory_for: str = MEMORY_FOR,
    temperature: float = TEMPERATURE,
    temperature_for: str = TEMPERATURE_FOR,
    xid_window: str = XID_WINDOW,
    exporter_container: list[str] = options.exporter_containers(),
    exporter_job: list[str] = options.exporter_jobs(),
    old_label: list[str] = OLD_LABEL,
    pod_label: str | None = POD_LABEL,
) -> None:
    """Write GPU alert rules (high utilization, idle-but-allocated, memory near full,
    temperature, XID errors) to stdout; `promtool check rules` accepts them."""
    from gpuctl.alerts import service
    from gpuctl.alerts.core.rules import AlertOptions
    from gpuctl.dcgm import holders
    from gpuctl.runtime.config import setting_list

    _check_flags(fmt, label, old_label, pod_label)
    exporter = holders.exporter(
        setting_list("exporter_containers", exporter_container),
        setting_list("exporter_jobs", exporter_job),
    )
    rule_options = AlertOptions(
        high_util=high_util,
        high_util_window=high_util_window,
        high_util_for=high_util_for,
        idle_util=idle_util,
        idle_window=idle_window,
        idle_for=idle_for,
        memory=memory,
        memory_for=memory_for,
        temperature=temperature,
        temperature_for=temperature_for,
        xid_window=xid_window,
        exporter=exporter,
    )
    wrap = None
    if fmt is RuleFormat.prometheusrule:
        wrap = service.RuleObject(name, namespace, _labels(label))
    echo(dump(service.document(rule_options, wrap), output.value))


def _check_flags(
    fmt: RuleFormat, label: list[str], old_label: list[str], pod_label: str | None
) -> None:
    if old_label:
        raise UsageError(
            f"-l {old_label[0]}: use --label {old_label[0]} (in gpuctl -l is a label "
            "selector, as in kubectl)"
        )
    if pod_label is not None:
        err_console().print(
            "warning: --pod-label is ignored: the rules find the pod holding a GPU "
            "under every scrape setup (see docs/alerts.md)",
            style="yellow",
            markup=False,
        )
    if fmt is RuleFormat.rules and label:
        raise UsageError(
            "--label applies to --format prometheusrule only; a rule file has no object labels"
        )


def _labels(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--label: {pair!r} is not KEY=VALUE")
        out[key] = value
    return out
