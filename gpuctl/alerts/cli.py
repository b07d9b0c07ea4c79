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


def register(app: typer.Typer) -> None:
    app.add_typer(alerts_app, name="alerts")


@alerts_app.command("render")
def render(
    output: DataFormat = options.data_output(),
    fmt: RuleFormat = typer.Option(
        RuleFormat.rules,
        "--format",
        help="rules: a Prometheus rule file (rule_files:); prometheusrule: a "
        "monitoring.coreos.com/v1 PrometheusRule for the Prometheus operator.",
    ),
    name: str = typer.Option(
        "gpuctl-gpu-alerts", "--name", metavar="NAME", help="PrometheusRule name."
    ),
    namespace: str = options.namespace("PrometheusRule namespace.", default="monitoring"),
    label: list[str] = typer.Option(
        [],
        "--label",
        metavar="KEY=VALUE",
        help="PrometheusRule label, repeatable (match your Prometheus ruleSelector, e.g. "
        "release=kube-prometheus-stack).",
    ),
    high_util: float = typer.Option(
        80.0,
        "--high-util",
        metavar="PCT",
        help="GPUHighUtilization: a node's GPUs average above this.",
    ),
    high_util_window: str = typer.Option(
        "5m", "--high-util-window", metavar="DURATION", help="...averaged over this."
    ),
    high_util_for: str = typer.Option(
        "15m", "--high-util-for", metavar="DURATION", help="...for this long."
    ),
    idle_util: float = typer.Option(
        5.0,
        "--idle-util",
        metavar="PCT",
        help="GPUIdleAllocated: a GPU held by a pod averages below this.",
    ),
    idle_window: str = typer.Option(
        "30m", "--idle-window", metavar="DURATION", help="...averaged over this."
    ),
    idle_for: str = typer.Option("30m", "--idle-for", metavar="DURATION", help="...for this long."),
    memory: float = typer.Option(
        95.0, "--memory", metavar="PCT", help="GPUMemoryNearFull: framebuffer used above this."
    ),
    memory_for: str = typer.Option(
        "15m", "--memory-for", metavar="DURATION", help="...for this long."
    ),
    temperature: float = typer.Option(
        85.0, "--temperature", metavar="CELSIUS", help="GPUTemperatureHigh: GPU above this."
    ),
    temperature_for: str = typer.Option(
        "5m", "--temperature-for", metavar="DURATION", help="...for this long."
    ),
    xid_window: str = typer.Option(
        "10m",
        "--xid-window",
        metavar="DURATION",
        help="GPUXidError: fires for this long after a GPU reports a new XID code.",
    ),
    exporter_container: list[str] = options.exporter_containers(),
    exporter_job: list[str] = options.exporter_jobs(),
    old_label: list[str] = typer.Option(
        [], "-l", hidden=True, help="Old spelling of --label (-l is a label selector)."
    ),
    pod_label: str | None = typer.Option(
        None, "--pod-label", hidden=True, help="No longer needed: ignored."
    ),
) -> None:
    """Write GPU alert rules (high utilization, idle-but-allocated, memory near full,
    temperature, XID errors) to stdout; `promtool check rules` accepts them."""
    from gpuctl.alerts.core import rules as alert_rules
    from gpuctl.dcgm import holders
    from gpuctl.runtime.config import setting_list

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
    options = alert_rules.AlertOptions(
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
        exporter=holders.exporter(
            setting_list("exporter_containers", exporter_container),
            setting_list("exporter_jobs", exporter_job),
        ),
    )
    document = alert_rules.rules(options)
    if fmt is RuleFormat.prometheusrule:
        document = alert_rules.prometheus_rule(document, name, namespace, _labels(label))
    echo(dump(document, output.value))


def _labels(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--label: {pair!r} is not KEY=VALUE")
        out[key] = value
    return out
