"""GPU alert rules over DCGM-exporter metrics, as a Prometheus rule file or a
prometheus-operator PrometheusRule. Pure: options in, plain dicts out.

DCGM's utilization, memory and temperature metrics are gauges: they are averaged with
`avg_over_time`, never passed to `rate()` (which is for counters; see docs/alerts.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuctl.common import k8s_names
from gpuctl.common.errors import UsageError
from gpuctl.dcgm import busy, holders
from gpuctl.dcgm.holders import Exporter
from gpuctl.dcgm.metrics import FB_FREE, FB_RESERVED, FB_USED, GR_ACTIVE, SM_ACTIVE, TEMP, UTIL
from gpuctl.dcgm.promql import duration_seconds

XID = "DCGM_FI_DEV_XID_ERRORS"  # a gauge keeping the last XID code (0: none since start)
XID_MIN_WINDOW_S = 120
GROUP = "gpuctl-gpu"
# Hardware alerts are keyed by the board, not by who uses it: a pod coming or going
# must not restart their `for` timer or split one GPU into several alerts.
BOARD = "Hostname, gpu, UUID, modelName"
# A device (a GPU or a MIG instance) counts once however many pods share it, and however
# many series dcgm-exporter gives it (one per pod, plus per-process totals).
DEVICE = BOARD + ", GPU_I_ID, GPU_I_PROFILE"


@dataclass(frozen=True)
class AlertOptions:
    high_util: float = 80.0  # percent, a node's GPUs on average
    high_util_window: str = "5m"
    high_util_for: str = "15m"
    idle_util: float = 5.0  # percent, one GPU held by a pod
    idle_window: str = "30m"
    idle_for: str = "30m"
    memory: float = 95.0  # percent of framebuffer used
    memory_for: str = "15m"
    temperature: float = 85.0  # Celsius
    temperature_for: str = "5m"
    xid_window: str = "10m"
    exporter: Exporter = Exporter()  # whose pod is the exporter's own (see holders.py)


def check(o: AlertOptions) -> None:
    """Every option is checked here, so nothing malformed reaches a rule file."""
    for option, percent in (
        ("--high-util", o.high_util),
        ("--idle-util", o.idle_util),
        ("--memory", o.memory),
    ):
        if not 0 <= percent <= 100:
            raise UsageError(f"{option}: {percent:g} is not a percentage (0 to 100)")
    if not 0 < o.temperature < 200:
        raise UsageError(f"--temperature: {o.temperature:g} is not a GPU temperature in Celsius")
    for option, window in (
        ("--high-util-window", o.high_util_window),
        ("--idle-window", o.idle_window),
        ("--xid-window", o.xid_window),
    ):
        duration_seconds(window, option)
    if duration_seconds(o.xid_window, "--xid-window") < XID_MIN_WINDOW_S:
        raise UsageError(
            f"--xid-window: {o.xid_window!r} is shorter than 2m",
            hint="the change of code is found by comparing rule evaluations "
            "(1m apart by default): the window must hold at least two",
        )
    for option, duration in (
        ("--high-util-for", o.high_util_for),
        ("--idle-for", o.idle_for),
        ("--memory-for", o.memory_for),
        ("--temperature-for", o.temperature_for),
    ):
        if duration not in ("0", "0s"):
            duration_seconds(duration, option)


def _host(expr: str) -> str:
    # DCGM-exporter spells the node label `Hostname`, some setups `hostname`: fold the
    # latter into the former so one rule and one `by` clause serve both.
    return f'label_replace({expr}, "Hostname", "$1", "hostname", "(.+)")'


def _utilization(window: str, matcher: str = "") -> str:
    """Mean busy signal (percent) per device over the window (see gpuctl.dcgm.busy), of
    the raw series: every side keeps the series' labels."""

    def side(metric: str, extra: str) -> str:
        matchers = ", ".join(m for m in (extra, matcher) if m)
        selector = "{" + matchers + "}" if matchers else ""
        return f"avg_over_time({metric}{selector}[{window}])"

    return busy.promql(side)


def _device_utilization(window: str) -> str:
    """Mean busy signal (percent) per device (DEVICE) over the window: each side aggregated
    by device first, so that `or` takes one signal per device even where its fields' series
    carry different labels (a time-sliced GPU: GR_ENGINE_ACTIVE copied on each pod's series,
    GPU_UTIL the device's own total besides each pod's share)."""

    def side(metric: str, extra: str) -> str:
        selector = "{" + extra + "}" if extra else ""
        return f"max by ({DEVICE}) ({_host(f'avg_over_time({metric}{selector}[{window}])')})"

    return busy.promql(side)


def _num(value: float) -> str:
    return f"{value:g}"


def _rule(
    name: str, expr: str, duration: str, severity: str, summary: str, description: str
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if duration not in ("0", "0s"):
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def _holder_text() -> str:
    """namespace/pod of the holder, from whichever labels name it (holders.py's order)."""
    branches = [
        f"{{{{ $labels.{ns} }}}}/{{{{ $labels.{pod} }}}}"
        for ns, pod, _ in (holders.EXPORTED, holders.OLD_NAMESPACE, holders.PLAIN)
    ]
    return (
        f"{{{{ if $labels.{holders.EXPORTED[1]} }}}}{branches[0]}"
        f"{{{{ else if $labels.{holders.OLD_NAMESPACE[1]} }}}}{branches[1]}"
        f"{{{{ else }}}}{branches[2]}{{{{ end }}}}"
    )


def _held_utilization(window: str, exporter: Exporter) -> str:
    """_utilization of the series a pod holds: one disjoint branch per place the holder's
    labels can be, so that the exporter's own pod never counts as a holder."""
    return " or ".join(
        f"({_utilization(window, matcher)})" for matcher in holders.held_matchers(exporter)
    )


def _per_device(metric: str) -> str:
    return f"max by ({DEVICE}) ({_host(metric)})"


def rules(o: AlertOptions = AlertOptions()) -> dict[str, Any]:
    """A Prometheus rule file (what `rule_files:` and `promtool` read)."""
    check(o)
    gpu_on_host = "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}"
    # a device's alert (idle, memory) names the MIG slice it is on one: seven slices of one
    # GPU are seven alerts, not seven of "GPU 0"
    device_on_host = (
        "GPU {{ $labels.gpu }}{{ if $labels.GPU_I_ID }} MIG slice {{ $labels.GPU_I_ID }} "
        "({{ $labels.GPU_I_PROFILE }}){{ end }} on {{ $labels.Hostname }}"
    )
    xid = f"max by ({BOARD}) ({_host(XID)})"
    used, free, reserved = (_per_device(m) for m in (FB_USED, FB_FREE, FB_RESERVED))
    duty, sm = _per_device(f'{{__name__=~"{UTIL}|{GR_ACTIVE}"}}'), _per_device(SM_ACTIVE)
    return {
        "groups": [
            {
                "name": GROUP,
                "rules": [
                    _rule(
                        "GPUHighUtilization",
                        f"avg by (Hostname) ({_device_utilization(o.high_util_window)})"
                        f" > {_num(o.high_util)}",
                        o.high_util_for,
                        "warning",
                        "GPUs on {{ $labels.Hostname }} are saturated",
                        f"The GPUs of {{{{ $labels.Hostname }}}} averaged {{{{ $value | humanize }}}}% "
                        f"utilization over {o.high_util_window}, above {_num(o.high_util)}% for "
                        f"{o.high_util_for}.",
                    ),
                    _rule(
                        "GPUIdleAllocated",
                        f"{_host(f'({_held_utilization(o.idle_window, o.exporter)})')}"
                        f" < {_num(o.idle_util)}",
                        o.idle_for,
                        "warning",
                        f"{device_on_host} is held by a pod but idle",
                        f"{_holder_text()} holds {device_on_host} whose utilization averaged "
                        f"{{{{ $value | humanize }}}}% over {o.idle_window} "
                        f"(threshold {_num(o.idle_util)}%).",
                    ),
                    # The duty cycles (GPU_UTIL, GR_ENGINE_ACTIVE) read 100 % for a kernel on
                    # one SM: say where the busy signal cannot be better than that.
                    _rule(
                        "GPUBusySignalDutyCycleOnly",
                        # a GPU split into MIG slices counts once: the value is physical GPUs
                        f"count by (Hostname) (max by ({BOARD}) ({duty})) unless on (Hostname) "
                        f"count by (Hostname) ({sm})",
                        "1h",
                        "info",
                        "GPUs on {{ $labels.Hostname }} report only a duty cycle",
                        "{{ $value }} GPU(s) of {{ $labels.Hostname }} report no "
                        f"{SM_ACTIVE}: their utilization is a duty cycle, 100% for a kernel on "
                        "one SM. Enable the profiling fields in dcgm-exporter's counters file "
                        "(gpuctl provision's GPU stack ships one).",
                    ),
                    # Reserved memory (reported since dcgm-exporter 4.3.1-4.4.0) is in neither
                    # used nor free: without it the ratio overstates use.
                    _rule(
                        "GPUMemoryNearFull",
                        f"100 * {used} / ({used} + {free} + ({reserved} or {free} * 0))"
                        f" > {_num(o.memory)}",
                        o.memory_for,
                        "warning",
                        f"{device_on_host} memory is nearly full",
                        f"{device_on_host} has used {{{{ $value | humanize }}}}% of its memory for "
                        f"{o.memory_for} (threshold {_num(o.memory)}%).",
                    ),
                    _rule(
                        "GPUTemperatureHigh",
                        f"max by ({BOARD}) ({_host(TEMP)}) > {_num(o.temperature)}",
                        o.temperature_for,
                        "warning",
                        f"{gpu_on_host} is hot",
                        f"{gpu_on_host} has been above {_num(o.temperature)} C for {o.temperature_for} "
                        f"({{{{ $value }}}} C now).",
                    ),
                    # The gauge keeps its last code, so "an XID happened" is "the board's value
                    # changed to a non-zero one": per board, because the pod that held the GPU often
                    # dies with the error and its series ends, while the next one starts at the code.
                    _rule(
                        "GPUXidError",
                        f"{xid} > 0 and changes(({xid})[{o.xid_window}:]) > 0",
                        "0s",
                        "critical",
                        f"{gpu_on_host} reported an XID error",
                        f"{gpu_on_host} reported XID {{{{ $value }}}} in the last {o.xid_window}; see "
                        "https://docs.nvidia.com/deploy/xid-errors/ and consider draining the node.",
                    ),
                ],
            }
        ]
    }


def prometheus_rule(
    groups: dict[str, Any], name: str, namespace: str, labels: dict[str, str]
) -> dict[str, Any]:
    """The same groups as a monitoring.coreos.com/v1 PrometheusRule."""
    if not k8s_names.dns1123_subdomain(name):
        raise UsageError(
            f"--name: {name!r} is not a valid Kubernetes object name",
            hint="lower-case letters, digits, '-' and '.'",
        )
    if not k8s_names.dns1123_label(namespace):
        raise UsageError(f"--namespace: {namespace!r} is not a valid namespace name")
    for key, value in labels.items():
        if not k8s_names.label_key(key) or not k8s_names.label_value(value):
            raise UsageError(f"--label: {key}={value} is not a valid Kubernetes label")
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": metadata,
        "spec": groups,
    }
