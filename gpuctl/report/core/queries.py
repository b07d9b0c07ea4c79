"""The PromQL of `gpuctl report`, and how its window is cut. Pure.

Everything is aggregated by Prometheus: each range query answers a few series per team
and GPU model (per signal for the busy hours), whatever the cluster size. At each step t
a query looks at the step before it, (t - step, t]:

- a device is *held* by each pod with a series of a busy-signal field on it in that step;
  a GPU several pods hold at once (time-slicing, MPS: dcgm-exporter gives one copy per
  pod) is held 1/n by each of its n holders;
- its busy fraction is the busy signal's mean over the step (gpuctl.dcgm.busy: SM_ACTIVE,
  else GR_ENGINE_ACTIVE, else GPU_UTIL), and it is *idle* when that is below the
  threshold.

A holding that starts or ends inside a step counts for the whole step: make the step
shorter than the jobs are long (the default, 5m, is dcgm-exporter's view of a minute's
granularity). MIG slices are weighed by their compute fraction afterwards (showback.py),
from the GPU_I_PROFILE and modelName labels every answer keeps.

Prometheus refuses a query that would hold more than `--query.max-samples` samples at
once (50,000,000 by default) and a range query of more than 11,000 steps. A range query
holds about one point per raw series and step (the per-step means, before aggregation),
so the window is cut into chunks of at most `max_steps(series)` steps: so many that each
query holds at most SAMPLE_BUDGET points, which keeps each one short as well.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuctl.common.errors import UsageError
from gpuctl.dcgm import busy, exporters, holders
from gpuctl.dcgm.holders import Exporter
from gpuctl.dcgm.metrics import GR_ACTIVE, IDENTITY, SM_ACTIVE, UTIL
from gpuctl.dcgm.promql import duration_seconds

MAX_POINTS = 11_000  # Prometheus: "exceeded maximum resolution of 11,000 points per timeseries"
# A fiftieth of Prometheus's default --query.max-samples: each query then takes seconds, well
# within Prometheus's default --query.timeout (2m) and gpuctl's own (RANGE_TIMEOUT), also
# for 10,000 teams on a busy server (bench/bench_report.py)
SAMPLE_BUDGET = 1_000_000
BY_KINDS = ("namespace", "queue", "label")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # the pod label Kueue's queue is named by
_ON = ", ".join(IDENTITY)
_DEVICE = _ON + ", modelName, GPU_I_PROFILE"
_SIGNAL_FIELDS = f'__name__=~"{SM_ACTIVE}|{GR_ACTIVE}|{UTIL}"'
TEAM = "team"  # the label each answer names the team by


@dataclass(frozen=True)
class Grouping:
    """What a team is: the holder's namespace, or a pod label (kube-state-metrics'
    kube_pod_labels, which has only the labels its --metric-labels-allowlist names)."""

    kind: str = "namespace"
    key: str | None = None  # the pod label, for kind "label"

    @property
    def pod_label(self) -> str | None:
        return QUEUE_LABEL if self.kind == "queue" else self.key


def grouping(kind: str, key: str | None) -> Grouping:
    if kind not in BY_KINDS:
        raise UsageError(f"--by: unknown grouping {kind!r}", hint="use namespace, queue or label")
    if kind == "label" and not key:
        raise UsageError("--by label needs the label's key", hint="e.g. --by label team")
    if kind != "label" and key:
        raise UsageError(f"--by {kind} takes no label key")
    if key is not None and (not key.isprintable() or not key.strip() or len(key) > 317):
        raise UsageError(f"--by label: {key!r} is not a label key")
    return Grouping(kind, key)


def ksm_label(key: str) -> str:
    """kube-state-metrics' name for a pod label in kube_pod_labels: `label_` + the key with
    every character other than a letter, digit or underscore made `_`."""
    return "label_" + "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in key)


def _held(exporter: Exporter, step: str, by: Grouping) -> str:
    """One series per device and holder in the step: value 1/n for a device n pods hold,
    labels the device's (IDENTITY, modelName, GPU_I_PROFILE), `ns`, `pod` and `team`."""
    branches = []
    for matchers, (ns_label, pod_label, _container) in holders.held_branches(exporter):
        # one metric per range function: *_over_time drops the name, and the fields of one
        # device would then be series with the same labels
        grouped = " or ".join(
            f"group by ({_DEVICE}, {ns_label}, {pod_label}) "
            f'(count_over_time({{__name__="{metric}", {matchers}}}[{step}]))'
            for metric in busy.SIGNALS
        )
        branches.append(_named(grouped, ns_label, pod_label))
    branches += _vendors_held(step, exporter.models)
    held = " or ".join(f"({b})" for b in branches)
    share = f"({held}) / on ({_ON}) group_left () count by ({_ON}) ({held})"
    if by.kind == "namespace":
        return f'label_replace({share}, "{TEAM}", "$1", "ns", "(.*)")'
    assert by.pod_label is not None
    source = ksm_label(by.pod_label)
    labels = (
        f"label_replace(label_replace(max by (namespace, pod, {source}) "
        f'(kube_pod_labels{{{source}!=""}}), "ns", "$1", "namespace", "(.*)"), '
        f'"{TEAM}", "$1", "{source}", "(.*)")'
    )
    joined = f"({share}) * on (ns, pod) group_left ({TEAM}) max by (ns, pod, {TEAM}) ({labels})"
    unlabelled = f'label_replace({share}, "{TEAM}", "-", "", "")'
    return f"({joined}) or ignoring ({TEAM}) ({unlabelled})"


def _named(grouped: str, ns_label: str, pod_label: str) -> str:
    """GROUPED's devices and holders, the holder's namespace and pod named `ns` and `pod`."""
    named = f'label_replace({grouped}, "ns", "$1", "{ns_label}", "(.*)")'
    named = f'label_replace({named}, "pod", "$1", "{pod_label}", "(.*)")'
    return f"group by ({_DEVICE}, ns, pod) ({named})"


def _vendors_held(step: str, models: exporters.Models) -> list[str]:
    """The same for each other vendor's exporter (gpuctl.dcgm.exporters), by the rule
    reclaim acts by (exporters.held_branches), its series given DCGM's device labels (the
    model as MODELS name its node's)."""
    out = []
    for exp in exporters.PER_DEVICE:
        for matchers, (ns_label, pod_label, _container) in exporters.held_branches(exp):
            by = f"{exporters.own_labels(exp)}, {ns_label}, {pod_label}"
            grouped = " or ".join(
                exporters.relabelled(
                    exp,
                    f"group by ({by}) "
                    f"(count_over_time({exporters.selector(exp, metric, matchers)}[{step}]))",
                    models,
                )
                for metric, _, _ in exp.busy
            )
            out.append(_named(grouped, ns_label, pod_label))
    return out


def _busy(step: str, models: exporters.Models, labelled: bool = False) -> str:
    """Per device (its IDENTITY, modelName, GPU_I_PROFILE; another vendor's model as MODELS
    name its node's), the busy signal's mean over the step, 0..1 (labelled: with the
    `signal` label naming it)."""

    def side(metric: str, matcher: str) -> str:
        sel = ", ".join(m for m in (f'__name__="{metric}"', matcher) if m)
        return f"max by ({_DEVICE}) (avg_over_time({{{sel}}}[{step}]))"

    join = f" or ignoring ({busy.LABEL}) " if labelled else " or "
    others = exporters.busy_promql(step, _DEVICE, labelled, models)
    return f"({busy.promql(side, labelled=labelled)}{join}{others}) / 100"


@dataclass(frozen=True)
class Queries:
    held: str  # per team and device kind: GPUs held (time-slice shares as 1/n)
    busy: str  # per team, device kind and signal: busy GPUs (held share × busy fraction)
    idle_held: str  # per team and device kind: GPUs held while idle
    devices: str  # per device kind: devices reporting a busy signal
    cluster_busy: str  # per device kind: busy GPUs, held or not
    signals: str  # per busy signal: the devices it judged
    series: str  # instant: the raw busy-signal series now (to size the chunks)


def queries(step: str, idle_threshold: float, exporter: Exporter, by: Grouping) -> Queries:
    duration_seconds(step, "--step")
    held = _held(exporter, step, by)
    kinds = f"{TEAM}, modelName, GPU_I_PROFILE"
    threshold = repr(float(idle_threshold) / 100)
    return Queries(
        held=f"sum by ({kinds}) ({held})",
        busy=f"sum by ({kinds}, {busy.LABEL}) (({held}) * on ({_ON}) group_left "
        f"({busy.LABEL}) ({_busy(step, exporter.models, labelled=True)}))",
        idle_held=f"sum by ({kinds}) (({held}) * on ({_ON}) group_left () "
        f"(({_busy(step, exporter.models)}) < bool {threshold}))",
        devices=f"count by (modelName, GPU_I_PROFILE) ({_busy(step, exporter.models)})",
        cluster_busy=f"sum by (modelName, GPU_I_PROFILE) ({_busy(step, exporter.models)})",
        signals=f"count by ({busy.LABEL}) ({_busy(step, exporter.models, labelled=True)})",
        series=f"count({{{_SIGNAL_FIELDS}}} or {exporters.busy_series()})",
    )


def idle_holders_query(
    step: str, span_s: float, idle_threshold: float, exporter: Exporter, by: Grouping, k: int
) -> str:
    """Instant, at a chunk's end: the k pods with the most idle-held device-steps over
    the chunk (a subquery at the report's step), per team, pod and device kind."""
    held = _held(exporter, step, by)
    threshold = repr(float(idle_threshold) / 100)
    idle = (
        f"({held}) * on ({_ON}) group_left () (({_busy(step, exporter.models)}) < bool {threshold})"
    )
    per_pod = f"sum by ({TEAM}, ns, pod, modelName, GPU_I_PROFILE) ({idle})"
    # the subquery's steps are the multiples of `step` in [t - range, t] (closed before
    # Prometheus 3): a second short of the span leaves out the step before the chunk
    return f"topk({k}, sum_over_time(({per_pod})[{int(span_s) - 1}s:{step}]) > 0)"


def named_devices(exporter: Exporter) -> str:
    """Instant: the UUIDs of the NVIDIA devices whose busy-signal series name a holder."""
    return " or ".join(
        f"group by (UUID) ({{{_SIGNAL_FIELDS}, {m}}})" for m in holders.held_matchers(exporter)
    )


def max_steps(series: int, budget: int = SAMPLE_BUDGET) -> int:
    """Steps one range query may span: about one point per raw series and step is held
    (twice the series found now, for the pods that came and went), within 11,000."""
    return max(1, min(MAX_POINTS - 1, budget // max(1, 2 * series)))
