"""Every other vendor's device exporter as Prometheus holds it, beside dcgm-exporter's: which
metric is each one's busy signal, which labels name its device, node, model and holder, and
its series turned into the shape the DCGM views read (so one frame, one idle rule, one waste
summary serve every vendor). Pure.

| vendor | exporter (port) | busy signal, best first | device / node / model labels | holder labels | source |
|---|---|---|---|---|---|
| amd | device-metrics-exporter (5000) | `gpu_gfx_activity`, percent: the graphics/compute engine's busy share, what amd-smi calls GFX activity. In CPX/DPX/QPX partition mode only partition 0 reports it | `gpu_uuid` (optional label) else `hostname` + `gpu_id` (+ `gpu_partition_id`); `card_model` (a board part number such as `102-D65209-0C`; the node's labels name the model: holders.Exporter.models) | `pod`, `namespace`, `container` (mandatory labels, empty for a free GPU) | ROCm/device-metrics-exporter pkg/exporter/proto/exporterconfig.proto (MetricLabel, GPUMetricLabel, GPUMetricField), pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go (labels lower-cased), docs/configuration/metricslist.md (units: VRAM in MB, power in W) |
| aws | neuron-monitor + neuron-monitor-prometheus.py (8000) | `neuroncore_utilization_ratio`, 0..1 per NeuronCore: the share of time the core ran a model; a device's is the mean of its cores | `instance_id` + `neuroncore` (cores of a device: the instance type's table); `instance_type` | none: the exporter knows no pods (the scrape's own target labels are the exporter's) | aws-neuron/aws-neuron-sdk neuron-monitor-prometheus.py (`process_neuroncore_counters`: value = neuroncore_utilization / 100) and its sample exposition in the Neuron monitor user guide |
| google | GKE TPU device plugin `/metrics` (2112) | `tensorcore_utilization` (percent of the TensorCores' capacity used), else `duty_cycle` (percent of time the chip was processing: blind to how much of it), else `duty_cycle_node` | `accelerator_id` (`<id>-<chip>`); `model` (`tpu-v5-lite-podslice`); the node from the scrape (`node`, else `instance`) | `pod`, `namespace`, `container` on the per-container series (`duty_cycle`, `memory_used`, ...); the `*_node` series carry none | tpu-device-plugin exposition as captured in facebookincubator/dynolog (tpumon tests, tpu-device-plugin v1.35.7-gke.0) and ray-project/ray (reporter tests); llm-d docs "GKE TPU Observability" |
| intel | Gaudi Prometheus Metric Exporter (41611) | `habanalabs_utilization`, percent: "Utilization of the device" | `UUID` else `hostname`/`node` + `device` (judgement: the label schema is not published); model from none | `pod`, `namespace`, `container` where the scrape sets them | Intel's metric exporter source (SampleMetadata: names, units mW / bytes); docs.habana.ai Orchestration/Prometheus_Metric_Exporter.html |

A device's memory is shown in MiB, its power in W, as for NVIDIA's. A series whose plain `pod`
is the exporter's own pod (its container is one of the exporter's) names no holder, as in
gpuctl.dcgm.holders.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from gpuctl.dcgm import busy, holders, metrics
from gpuctl.dcgm.promql import METRIC, duration_seconds, per_metric
from gpuctl.gpus import vendor_models

Sample = tuple[dict[str, Any], float]
MIB = float(1 << 20)
T = TypeVar("T")


@dataclass(frozen=True)
class DeviceExporter:
    vendor: str  # gpuctl.gpus.vendors' name
    busy: tuple[tuple[str, str, float], ...]  # (metric, signal name, scale to percent), best first
    uuid: str | None  # the label naming a device uniquely in the cluster, where it has one
    device: tuple[str, ...]  # labels naming a device on its node, joined by "."
    node: tuple[str, ...]  # labels naming its node, the first present
    model: str | None = None  # the label naming its model
    memory_used: tuple[str, float] | None = None  # (metric, scale to MiB)
    memory_total: tuple[str, float] | None = None
    temperature: str | None = None  # Celsius
    power: tuple[str, float] | None = None  # (metric, scale to W)
    matcher: str = ""  # what tells its series from another exporter's of the same name
    own: holders.Exporter = field(default_factory=lambda: holders.Exporter((), ()))

    def metrics(self) -> tuple[str, ...]:
        extra = (self.memory_used, self.memory_total, self.power)
        names = [m for m, _, _ in self.busy] + [m for m, _ in filter(None, extra)]
        return tuple(names + ([self.temperature] if self.temperature else []))


AMD = DeviceExporter(
    "amd",
    (("gpu_gfx_activity", "gfx_activity", 1.0),),
    uuid="gpu_uuid",
    device=("gpu_id", "gpu_partition_id"),
    node=("hostname",),
    model="card_model",
    memory_used=("gpu_used_vram", 1.0),  # MB as amd-smi reports it: MiB
    memory_total=("gpu_total_vram", 1.0),
    temperature="gpu_junction_temperature",
    power=("gpu_package_power", 1.0),
    # its Helm chart's containers (helm-charts/templates/daemonsets.yaml); jobLabel app
    own=holders.Exporter(
        ("amdgpu-metrics-exporter-container", "amd-device-metrics-exporter-container"),
        ("metrics-exporter",),
    ),
)
NEURON = DeviceExporter(
    "aws",
    (("neuroncore_utilization_ratio", "neuroncore_utilization", 100.0),),
    uuid=None,
    device=("neuroncore",),  # a core: grouped into its device by the instance type
    node=("node", "kubernetes_node", "instance_id", "instance"),
    model="instance_type",
    own=holders.Exporter(("neuron-monitor",), ("neuron-monitor",)),
)
TPU = DeviceExporter(
    "google",
    (
        ("tensorcore_utilization", "tensorcore_utilization", 1.0),
        ("duty_cycle", "duty_cycle", 1.0),
        ("duty_cycle_node", "duty_cycle", 1.0),
    ),
    uuid="accelerator_id",
    device=("accelerator_id",),
    node=("node", "kubernetes_node", "instance"),
    model="model",
    memory_used=("memory_used", 1 / MIB),
    memory_total=("memory_total", 1 / MIB),
    matcher='accelerator_id!=""',  # `memory_used` and `duty_cycle` are common names
    own=holders.Exporter(("tpu-device-plugin",), ("tpu-device-plugin",)),
)
GAUDI = DeviceExporter(
    "intel",
    (("habanalabs_utilization", "habanalabs_utilization", 1.0),),
    uuid="UUID",
    device=("device",),
    node=("hostname", "node", "kubernetes_node", "instance"),
    memory_used=("habanalabs_memory_used_bytes", 1 / MIB),
    memory_total=("habanalabs_memory_total_bytes", 1 / MIB),
    temperature="habanalabs_temperature_onchip",
    power=("habanalabs_power_mW", 1e-3),
    own=holders.Exporter(("metric-exporter",), ("metric-exporter",)),
)
EXPORTERS = (AMD, NEURON, TPU, GAUDI)
OWNER = {m: e for e in EXPORTERS for m in e.metrics()}
BUSY = {m: (e, name, scale) for e in EXPORTERS for m, name, scale in e.busy}
SIGNALS = tuple(dict.fromkeys(name for e in EXPORTERS for _, name, _ in e.busy))


def _selectors(names: Iterable[str]) -> str:
    """One selector per exporter for those of NAMES that are its metrics, joined by `or`."""
    wanted = set(names)
    parts = []
    for e in EXPORTERS:
        mine = [m for m in e.metrics() if m in wanted]
        if mine:
            matchers = ", ".join(filter(None, [f'__name__=~"{"|".join(mine)}"', e.matcher]))
            parts.append("{" + matchers + "}")
    return " or ".join(parts)


def current_query() -> str:
    """The latest value of every series of every exporter's metrics, with all its labels."""
    return _selectors(OWNER)


def means_query(window: str) -> str:
    """Each busy series' mean over the window, its metric named by a `metric` label."""
    duration_seconds(window, "--window")

    return over_window("avg_over_time({})", BUSY, window)


@dataclass
class Shaped:
    """Other vendors' devices in the DCGM views' shape (`current`, `attributes`, `means`,
    as gpuctl.top.cluster.core.usage's three answers), and each device's vendor and the
    signal its latest reading is, by device key (gpuctl.dcgm.metrics.key_of)."""

    current: list[Sample] = field(default_factory=list)
    attributes: list[Sample] = field(default_factory=list)
    means: list[Sample] = field(default_factory=list)
    vendors: dict[metrics.Key, tuple[str, str | None]] = field(default_factory=dict)


def _cores_per_device(exp: DeviceExporter, labels: Mapping[str, Any]) -> int:
    if exp is not NEURON:
        return 0
    row = vendor_models.instance({vendor_models.INSTANCE_TYPE: labels.get("instance_type", "")})
    return row[2] // row[1] if row and row[1] and row[2] >= row[1] else 0


Models = Mapping[str, Mapping[str, str]]  # node → vendor → model (holders.Exporter.models)
NO_MODELS: Models = MappingProxyType({})


def _model(exp: DeviceExporter, labels: Mapping[str, Any], node: str, models: Models) -> str | None:
    """The model the node's labels name, else the one the series' label tells."""
    if named := models.get(node, {}).get(exp.vendor):
        return named
    value = labels.get(exp.model) if exp.model else None
    if not value:
        return None
    if exp is NEURON:
        row = vendor_models.instance({vendor_models.INSTANCE_TYPE: value})
        return row[0] if row else value
    if exp is TPU:
        return (
            vendor_models.named("google", {vendor_models.TPU_ACCELERATOR: value}, "").model or value
        )
    return str(value)


def identity(
    exp: DeviceExporter, labels: Mapping[str, Any], models: Models = NO_MODELS
) -> dict[str, str] | None:
    """A series' device in DCGM's labels (UUID, or Hostname and gpu; modelName, as MODELS
    name its node's where they do); None when the series names no device."""
    node = next((str(labels[n]) for n in exp.node if labels.get(n)), "")
    parts = [str(labels.get(d) or "") for d in exp.device]
    if not parts[0]:
        return None
    per = _cores_per_device(exp, labels)
    if per and parts[0].isdigit():
        parts[0] = str(int(parts[0]) // per)  # a NeuronCore's device
    if exp is AMD and parts[1] in ("", "0"):
        parts = parts[:1]  # a whole GPU, or its first partition
    if exp is TPU:
        parts = [parts[0].rpartition("-")[2]]  # the chip's index on its host
    out = {"Hostname": node, "gpu": ".".join(parts)}
    uuid = labels.get(exp.uuid) if exp.uuid else None
    if uuid:
        out["UUID"] = str(uuid)
    elif not node:
        return None
    if model := _model(exp, labels, node, models):
        out["modelName"] = model
    return out


def _held(exp: DeviceExporter, labels: Mapping[str, Any], ident: dict[str, str]) -> dict[str, str]:
    h = holders.holder(labels, exp.own)
    if h is None:
        return ident
    return {
        **ident,
        "exported_namespace": h.namespace or "",
        "exported_pod": h.pod,
        "exported_container": h.container or "",
    }


def shape(current: Iterable[Sample], means: Iterable[Sample], models: Models = NO_MODELS) -> Shaped:
    """The answers of current_query and means_query in the DCGM views' shape: per device,
    its busy signal (percent, best first; a Neuron device's the mean of its cores) as
    DCGM_FI_DEV_GPU_UTIL, memory as FB_USED and FB_FREE (MiB), temperature and power;
    each device's model as MODELS name its node's."""
    out = Shaped()
    readings: dict[metrics.Key, tuple[DeviceExporter, dict[str, str], dict[str, list[float]]]] = {}
    for labels, value in current:
        exp = OWNER.get(labels.get("__name__", ""))
        ident = identity(exp, labels, models) if exp else None
        if exp is None or ident is None or not math.isfinite(value):
            continue
        key = metrics.key_of(ident)
        readings.setdefault(key, (exp, ident, {}))[2].setdefault(labels["__name__"], []).append(
            value
        )
        out.attributes.append((_held(exp, labels, ident), 1.0))
    for key, (exp, ident, values) in readings.items():
        found = _best(exp, values)
        out.vendors[key] = (exp.vendor, found[0] if found else None)
        for name, value in _readings(exp, values, found):
            out.current.append(({**ident, "__name__": name}, value))
    out.means = _means(means, models)
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _best(exp: DeviceExporter, values: Mapping[str, list[float]]) -> tuple[str, float] | None:
    for metric, name, scale in exp.busy:
        if metric in values:
            return name, scale * _mean(values[metric])
    return None


def _readings(
    exp: DeviceExporter, values: Mapping[str, list[float]], found: tuple[str, float] | None
) -> list[tuple[str, float]]:
    out = [(metrics.UTIL, found[1])] if found else []
    used = exp.memory_used and values.get(exp.memory_used[0])
    total = exp.memory_total and values.get(exp.memory_total[0])
    if exp.memory_used and exp.memory_total and used and total:
        used_mib, total_mib = used[0] * exp.memory_used[1], total[0] * exp.memory_total[1]
        out += [(metrics.FB_USED, used_mib), (metrics.FB_FREE, total_mib - used_mib)]
    if exp.temperature and (temp := values.get(exp.temperature)):
        out.append((metrics.TEMP, temp[0]))
    if exp.power and (power := values.get(exp.power[0])):
        out.append((metrics.POWER, power[0] * exp.power[1]))
    return out


def _best_kept(ranked: Iterable[tuple[metrics.Key, int, T]]) -> list[list[T]]:
    """Per device key, the items of its best busy signal (the lowest rank: the place of
    its metric in DeviceExporter.busy); a device's several series of one signal all kept."""
    best: dict[metrics.Key, tuple[int, list[T]]] = {}
    for key, rank, item in ranked:
        known = best.get(key)
        if known is None or rank < known[0]:
            best[key] = (rank, [item])
        elif rank == known[0]:
            known[1].append(item)
    return [items for _, items in best.values()]


def _rank(exp: DeviceExporter, metric: str) -> int:
    return [m for m, _, _ in exp.busy].index(metric)


def _means(samples: Iterable[Sample], models: Models) -> list[Sample]:
    """Each device's window mean of its best busy signal, labelled with the signal's name."""
    ranked: list[tuple[metrics.Key, int, tuple[dict[str, str], str, float]]] = []
    for labels, value in samples:
        found = BUSY.get(labels.get(METRIC, ""))
        if found is None or not math.isfinite(value):
            continue
        exp, name, scale = found
        ident = identity(exp, labels, models)
        if ident is not None:
            ranked.append(
                (metrics.key_of(ident), _rank(exp, labels[METRIC]), (ident, name, scale * value))
            )
    return [
        ({**kept[0][0], busy.LABEL: kept[0][1]}, _mean([v for _, _, v in kept]))
        for kept in _best_kept(ranked)
    ]


def per_series(samples: Iterable[Sample], models: Models = NO_MODELS) -> list[Sample]:
    """SAMPLES with every other vendor's series put in DCGM's shape one by one, its holder
    kept (in exported_* labels) and `vendor` added: a busy series (by `__name__`, or by the
    `metric` label per_metric gives it) as DCGM_FI_DEV_GPU_UTIL in percent with `signal`
    naming it, only the best signal of each device kept; a memory-used series as
    DCGM_FI_DEV_FB_USED in MiB. DCGM's own series pass unchanged; other vendors' series
    that name no device, or carry no reading gpuctl reads per holder, are left out; MODELS
    name their nodes' models."""
    out: list[Sample] = []
    busiest: list[tuple[metrics.Key, int, Sample]] = []
    for labels, value in samples:
        name = labels.get("__name__") or labels.get(METRIC) or ""
        exp = OWNER.get(name)
        if exp is None:
            out.append((labels, value))
            continue
        ident = identity(exp, labels, models)
        if ident is None:
            continue
        shaped = {**_held(exp, labels, ident), "vendor": exp.vendor}
        if name in BUSY:
            _, signal, scale = BUSY[name]
            sample = ({**shaped, "__name__": metrics.UTIL, busy.LABEL: signal}, scale * value)
            busiest.append((metrics.key_of(ident), _rank(exp, name), sample))
        elif exp.memory_used and name == exp.memory_used[0]:
            out.append(({**shaped, "__name__": metrics.FB_USED}, exp.memory_used[1] * value))
    return out + [s for kept in _best_kept(busiest) for s in kept]


def memory_used_metrics() -> tuple[str, ...]:
    return tuple(e.memory_used[0] for e in EXPORTERS if e.memory_used)


def over_window(function: str, names: Iterable[str], window: str) -> str:
    """FUNCTION (e.g. `max_over_time({})`, `{}` the range) over each exporter's series of
    NAMES in the window, each labelled with its metric (per_metric)."""
    return per_metric(lambda m: function.format(f"{_selectors([m])}[{window}]"), names)


# --- the same in PromQL, for views aggregated by Prometheus (report) -----------------

PLAIN_HOLDER = "plain_holder"  # held_promql's mark on a holder read from the plain `pod`

# Those whose series are per device: neuron-monitor's are per NeuronCore (grouped into
# devices by the instance type, which PromQL does not know) and name no pod.
PER_DEVICE = tuple(e for e in EXPORTERS if e is not NEURON)


def own_labels(exp: DeviceExporter) -> str:
    """The exporter's labels that name a device, its node and model (to group by)."""
    names = (*exp.node, *((exp.uuid,) if exp.uuid else ()), *exp.device, *filter(None, [exp.model]))
    return ", ".join(dict.fromkeys(names))


def relabelled(exp: DeviceExporter, expr: str, models: Models = NO_MODELS) -> str:
    """EXPR, series grouped by own_labels, with DCGM's labels for the device: UUID,
    Hostname (the first node label present), gpu (a TPU chip's index) and modelName, as
    MODELS name its node's where they do (identity's rule)."""
    out = expr
    for n in reversed(exp.node):  # the first present wins: applied last
        out = f'label_replace({out}, "Hostname", "$1", "{n}", "(.+)")'
    if exp.uuid:
        out = f'label_replace({out}, "UUID", "$1", "{exp.uuid}", "(.+)")'
    regex = "(?:.*-)?([0-9]+)" if exp is TPU else "(.+)"
    out = f'label_replace({out}, "gpu", "$1", "{exp.device[0]}", "{regex}")'
    if exp.model:
        out = f'label_replace({out}, "modelName", "$1", "{exp.model}", "(.+)")'
    if exp is TPU:  # GKE's accelerator name, as _model reads it
        for value, model in sorted(vendor_models.tpu_accelerators().items()):
            out = _named_where(out, model, exp.model or "", [value])
    for model, nodes in sorted(_nodes_by_model(exp.vendor, models).items()):
        out = _named_where(out, model, "Hostname", nodes)
    return out


def _named_where(expr: str, model: str, label: str, values: list[str]) -> str:
    """EXPR, its modelName MODEL where LABEL is one of VALUES."""
    named = holders.literal(model.replace("$", "$$"))  # `$` is label_replace's reference
    return f'label_replace({expr}, "modelName", {named}, "{label}", {holders.any_of(values)})'


def _nodes_by_model(vendor: str, models: Models) -> dict[str, list[str]]:
    """The nodes MODELS name a model of VENDOR's on, by that model."""
    out: dict[str, list[str]] = {}
    for node, named in models.items():
        if model := named.get(vendor):
            out.setdefault(model, []).append(node)
    return out


def busy_series() -> str:
    """Every per-device exporter's busy-signal series (a selector each, joined by `or`)."""
    return _selectors(m for e in PER_DEVICE for m, _, _ in e.busy)


def selector(exp: DeviceExporter, metric: str, matchers: str = "") -> str:
    return "{" + ", ".join(filter(None, [f'__name__="{metric}"', matchers, exp.matcher])) + "}"


def busy_promql(step: str, by: str, labelled: bool = False, models: Models = NO_MODELS) -> str:
    """Every other vendor's busy signal in percent, its mean over each step, per device
    (DCGM's labels BY, the model as MODELS name its node's), best first; labelled: with the
    `signal` label naming it."""
    parts = []
    for exp in PER_DEVICE:
        for metric, name, scale in exp.busy:
            mean = f"avg_over_time({selector(exp, metric)}[{step}])"
            grouped = f"max by ({own_labels(exp)}) ({mean})"
            expr = f"{scale!r} * max by ({by}) ({relabelled(exp, grouped, models)})"
            if labelled:
                expr = f'label_replace({expr}, "{busy.LABEL}", "{name}", "", "")'
            parts.append(f"({expr})")
    return (f" or ignoring ({busy.LABEL}) " if labelled else " or ").join(parts)


def held_branches(exp: DeviceExporter) -> list[tuple[str, tuple[str, str, str]]]:
    """The one rule of who holds another vendor's device (report counts by it, reclaim acts
    by it): PromQL label matchers selecting the series that name a holder, as disjoint
    branches, each with the labels that name its holder's namespace, pod and container. A
    holder in exported_* (as a Prometheus Operator scrape keeps the exporter's own pod
    labels apart) is the series' own. One in the plain `pod` (a scrape with honorLabels
    true, AMD's Helm chart default) is taken only beside a `container` that is none of the
    exporter's: a plain `pod` without one may be the exporter's own pod, which held_promql
    marks for reclaim to check on the series' node. Unlike dcgm-exporter's
    (holders.held_branches), no exporter of these names its holder in the old pod_name."""
    own = f", container!~{holders.any_of(exp.own.containers)}" if exp.own.containers else ""
    return [
        ('exported_pod!=""', holders.EXPORTED),
        (f'exported_pod="", pod!="", container!=""{own}', holders.PLAIN),
    ]


def held_promql(inner: Callable[[str], str], by: str, scaled: bool) -> str:
    """For each per-device exporter's busy metrics, best first: INNER(selector) over its
    series that name a holder (held_branches), given DCGM's device labels, max by BY;
    scaled: times the metric's scale to percent. A holder in the plain `pod` is marked with
    PLAIN_HOLDER (its vendor): the exporter's own pod under a container name gpuctl does not
    know could pass for a holder, so an action must first find that pod on the series'
    node."""
    parts = []
    for exp in PER_DEVICE:
        for metric, _, scale in exp.busy:
            for matchers, labels in held_branches(exp):
                sel = selector(exp, metric, matchers)
                grouped = f"max by ({own_labels(exp)}, {', '.join(labels)}) ({inner(sel)})"
                expr = f"max by ({by}) ({relabelled(exp, grouped)})"
                if labels is holders.PLAIN:
                    expr = f'label_replace({expr}, "{PLAIN_HOLDER}", "{exp.vendor}", "", "")'
                parts.append(f"{scale!r} * {expr}" if scaled else expr)
    return " or ".join(parts)
