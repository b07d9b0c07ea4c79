"""`gpuctl doctor`: is this cluster ready for GPU work? Each check turns plain API objects
(nodes, DaemonSets, the device plugin's ConfigMap data) into pass / warn / fail with a fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError
from gpuctl.common.numbers import whole_number
from gpuctl.dcgm import busy
from gpuctl.dcgm.metrics import IDENTITY, SM_ACTIVE, WHOLE
from gpuctl.gpus.accelerators import DraSource
from gpuctl.gpus.identity import GpuCount
from gpuctl.gpus.names import GFD_PRODUCT_LABEL as GFD_PRODUCT
from gpuctl.k8s import device_plugin
from gpuctl.k8s.nodes import (
    GFD_COUNT,
    GFD_REPLICAS,
    MIG_CONFIG,
    MIG_PREFIX,
    MIG_STRATEGY,
    accelerator_resources,
    allocatable,
    gpu_resources,
    gpus_of,
    is_accelerator_node,
    is_gpu_node,
    is_gpu_resource,
    mig_reason,
)
from gpuctl.k8s.objects import labels_of, name_of, namespace_of

PASS, WARN, FAIL = "pass", "warn", "fail"
GFD_LABELS = (GFD_PRODUCT, GFD_COUNT, "nvidia.com/gpu.memory")
MIG_STATE = "nvidia.com/mig.config.state"
_SHOWN = 5  # nodes named in one detail line


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _names(names: list[str]) -> str:
    more = len(names) - _SHOWN
    return ", ".join(names[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _name(obj: dict[str, Any]) -> str:
    return name_of(obj) or "?"


def _gpu_count(node: dict[str, Any]) -> int:
    return sum(gpu_resources(node).values())


def check_gpu_nodes(nodes: list[dict[str, Any]], dra: DraSource | None = None) -> Check:
    """NVIDIA's GPU nodes, and every other vendor's accelerator nodes beside them, and
    the nodes whose accelerators DRA publishes (DRA)."""
    gpu_nodes = _gpu_nodes(nodes)
    others = [n for n in nodes if is_accelerator_node(n) and not is_gpu_node(n)]
    through_dra = [n for n in nodes if dra is not None and dra.accelerators(_name(n))]
    silent = [_name(n) for n in gpu_nodes if _gpu_count(n) == 0]
    if silent:
        return Check(
            "gpu-nodes",
            FAIL,
            f"GPU present but no nvidia.com/gpu allocatable on {_names(silent)}",
            "check the device plugin pod on those nodes (kubectl -n <ns> logs <pod>) "
            "and the NVIDIA driver / container toolkit on the host",
        )
    if not gpu_nodes and not others and not through_dra:
        return Check(
            "gpu-nodes",
            FAIL,
            "no node has nvidia.com/gpu (or MIG) allocatable, nor another vendor's accelerator",
            "add GPU nodes (gpuctl provision) and install the NVIDIA GPU Operator or device plugin",
        )
    found = []
    if gpu_nodes:
        # physical GPUs, MIG slices apart: a slice or a time-shared replica is not a GPU
        total = sum((gpus_of(n).physical for n in gpu_nodes), GpuCount())
        found.append(f"{len(gpu_nodes)} GPU node(s), {total.text()}")
    if others:
        found.append(f"{len(others)} other accelerator node(s): {_other_accelerators(others)}")
    if through_dra and dra is not None:
        devices = sum(a.count for n in through_dra for a in dra.accelerators(_name(n)))
        found.append(f"{len(through_dra)} node(s) with {devices} device(s) through DRA")
    return Check("gpu-nodes", PASS, "; ".join(found))


def _other_accelerators(nodes: list[dict[str, Any]]) -> str:
    """Each non-NVIDIA accelerator resource the nodes have allocatable, summed."""
    summed: dict[str, int] = {}
    for node in nodes:
        for resource, n in accelerator_resources(node).items():
            if not is_gpu_resource(resource):
                summed[resource] = summed.get(resource, 0) + n
    listed = ", ".join(f"{n} {resource}" for resource, n in sorted(summed.items()))
    return f"{listed or 'none'} allocatable"


def _gpu_nodes(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n in nodes if is_gpu_node(n)]


def check_gfd(nodes: list[dict[str, Any]]) -> Check:
    gpu_nodes = _gpu_nodes(nodes)
    if not gpu_nodes:
        return Check("feature-discovery", WARN, "no GPU node to check", "fix gpu-nodes first")
    missing = {_name(n): [k for k in GFD_LABELS if k not in labels_of(n)] for n in gpu_nodes}
    missing = {k: v for k, v in missing.items() if v}
    if missing:
        first = next(iter(missing.values()))
        return Check(
            "feature-discovery",
            WARN,
            f"GPU Feature Discovery labels missing on {_names(sorted(missing))} "
            f"(e.g. {', '.join(first)})",
            "enable GPU Feature Discovery: the GPU Operator runs it; with the device "
            "plugin Helm chart: --set gfd.enabled=true",
        )
    products = sorted({labels_of(n)[GFD_PRODUCT] for n in gpu_nodes})
    return Check(
        "feature-discovery",
        PASS,
        f"labels present on {len(gpu_nodes)} node(s): {', '.join(products)}",
    )


def check_gpu_types(nodes: list[dict[str, Any]]) -> Check:
    """Can a job's gpu_type select each GPU node? Only where gpuctl can tell its GPU from
    its labels (gpuctl.gpus.identity: GFD, Karpenter, GKE, AKS, instance type, gpu-type)."""
    seen = [(_name(n), gpus_of(n)) for n in _gpu_nodes(nodes)]
    unknown = sorted(name for name, g in seen if g.model is None)
    if unknown:
        products = sorted({p for _, g in seen if g.model is None for p in g.products})
        return Check(
            "gpu-types",
            WARN,
            f"no GPU model gpuctl knows on {_names(unknown)}"
            + (f" (labelled {', '.join(products)})" if products else "")
            + ": a job's gpu_type cannot select them",
            "let GPU Feature Discovery label them (GPU Operator), or label them "
            "gpu-type=<model>; a gpu_type equal to their label value still selects them",
        )
    models: dict[str, set[str]] = {}
    for _, g in seen:
        models.setdefault(f"{g.model}", set()).add(g.scheme or "?")
    listed = ", ".join(f"{m} ({'/'.join(sorted(s))})" for m, s in sorted(models.items()))
    return Check("gpu-types", PASS, f"GPU models by label scheme: {listed or 'none'}")


def _ready(ds: dict[str, Any]) -> tuple[int, int]:
    st = ds.get("status") or {}
    return int(st.get("numberReady") or 0), int(st.get("desiredNumberScheduled") or 0)


def namespaced_name(obj: dict[str, Any]) -> str:
    """NAMESPACE/NAME of a namespaced object, "?" for a namespace it lacks."""
    return f"{namespace_of(obj) or '?'}/{name_of(obj)}"


def check_device_plugin(plugin: dict[str, Any] | None) -> Check:
    if plugin is None:
        return Check(
            "device-plugin",
            FAIL,
            "no NVIDIA device plugin DaemonSet found",
            "install the NVIDIA GPU Operator (helm install gpu-operator "
            "nvidia/gpu-operator -n gpu-operator --create-namespace) or the "
            "nvidia-device-plugin Helm chart",
        )
    ready, desired = _ready(plugin)
    if desired == 0:
        return Check(
            "device-plugin",
            FAIL,
            f"DaemonSet {namespaced_name(plugin)} schedules no pods",
            "check its nodeSelector / tolerations against the GPU nodes' labels and "
            "taints (GPU Operator: nodes need the label "
            "feature.node.kubernetes.io/pci-10de.present)",
        )
    if ready < desired:
        return Check(
            "device-plugin",
            FAIL,
            f"DaemonSet {namespaced_name(plugin)}: {ready}/{desired} pods ready",
            f"kubectl -n {namespaced_name(plugin).split('/')[0]} get pods -o wide; "
            "look at the pods that are not ready",
        )
    return Check(
        "device-plugin", PASS, f"DaemonSet {namespaced_name(plugin)}: {ready}/{desired} ready"
    )


def check_mig(nodes: list[dict[str, Any]]) -> Check:
    gpu_nodes = _gpu_nodes(nodes)
    problems, pending, mig_nodes = [], [], []
    strategies: dict[str, list[str]] = {}  # mig.strategy -> nodes
    for n in gpu_nodes:
        labels, name = labels_of(n), _name(n)
        strategy = labels.get(MIG_STRATEGY)
        if strategy:
            strategies.setdefault(strategy, []).append(name)
        wanted, state = labels.get(MIG_CONFIG), labels.get(MIG_STATE)
        mixed = any(k.startswith(MIG_PREFIX) for k in allocatable(n))
        # applied: the MIG manager reports success on a layout that enables MIG, or the node
        # offers MIG slices (MIG set up without the operator)
        asked = wanted not in (None, "", "all-disabled")
        if (asked and state == "success") or (not asked and gpus_of(n).mig_slices):
            mig_nodes.append(name)
        if state == "failed":
            problems.append(f"{name}: mig.config={wanted} failed")
        elif state in ("pending", "rebooting"):
            pending.append(f"{name}: mig.config={wanted} {state}")
        elif wanted and wanted != "all-disabled" and state is None:
            pending.append(f"{name}: mig.config={wanted} has no {MIG_STATE} (no MIG manager?)")
        if mixed and strategy and strategy != "mixed":
            problems.append(f"{name}: advertises nvidia.com/mig-* but mig.strategy={strategy}")
    if problems:
        return Check(
            "mig",
            FAIL,
            "; ".join(problems[:_SHOWN]),
            "read the MIG manager's logs (kubectl -n gpu-operator logs -l "
            "app=nvidia-mig-manager) and check the config name exists in its "
            "mig-parted config; then relabel nvidia.com/mig.config",
        )
    if pending:
        return Check(
            "mig",
            WARN,
            "; ".join(pending[:_SHOWN]),
            "wait for the MIG manager (it drains GPU pods and may reboot); if it never "
            "acts, enable it (GPU Operator: migManager.enabled=true)",
        )
    if len(strategies) > 1:
        return Check(
            "mig",
            WARN,
            "nodes use different MIG strategies: "
            + "; ".join(f"{s} on {_names(sorted(n))}" for s, n in sorted(strategies.items())),
            "use one strategy cluster-wide (GPU Operator: mig.strategy) so jobs can ask for "
            "MIG slices the same way everywhere",
        )
    if not mig_nodes:
        return Check(
            "mig",
            PASS,
            "MIG is not in use" + (f" (strategy {next(iter(strategies))})" if strategies else ""),
        )
    return Check(
        "mig",
        PASS,
        f"MIG applied on {_names(sorted(mig_nodes))}"
        + (f", strategy {next(iter(strategies))}" if strategies else ""),
    )


def check_sharing(
    nodes: list[dict[str, Any]], config_map: str | None, data: dict[str, Any] | None
) -> Check:
    labelled = [n for n in _gpu_nodes(nodes) if device_plugin.CONFIG_LABEL in labels_of(n)]
    if not labelled:
        return Check(
            "sharing",
            PASS,
            "no node selects a sharing config (nodes use the device plugin's default)",
        )
    if data is None:
        return Check(
            "sharing",
            FAIL,
            f"{_names([_name(n) for n in labelled])} select a config with "
            f"{device_plugin.CONFIG_LABEL}, but the device plugin reads no config ConfigMap"
            + (f" ({config_map} is missing)" if config_map else ""),
            "point the device plugin at a ConfigMap (GPU Operator: ClusterPolicy "
            "devicePlugin.config.name; Helm: config.name), e.g. with gpuctl share "
            "timeslice",
        )
    configs = device_plugin.parse_configs(data)
    failures, waiting = [], []
    for n in labelled:
        name, chosen = _name(n), labels_of(n)[device_plugin.CONFIG_LABEL]
        if chosen not in configs:
            failures.append(f"{name}: config {chosen!r} is not in ConfigMap {config_map}")
            continue
        s = configs[chosen]
        if isinstance(s, GpuctlError):
            failures.append(f"{name}: config {chosen!r} is invalid: {s}")
            continue
        if s is None:
            continue
        if s.strategy == device_plugin.MPS and mig_reason(n):
            failures.append(f"{name}: MPS config {chosen!r} on a MIG node ({mig_reason(n)})")
            continue
        labels = labels_of(n)
        applied = whole_number(labels.get(GFD_REPLICAS, "")) or 0
        if GFD_REPLICAS in labels and applied != s.replicas:
            waiting.append(
                f"{name}: wants {s.strategy} ×{s.replicas}, GPU Feature Discovery "
                f"reports ×{applied}"
            )
    if failures:
        return Check(
            "sharing",
            FAIL,
            "; ".join(failures[:_SHOWN]),
            "gpuctl share timeslice --node NODE ... (writes the config and the "
            "label), or remove the label: kubectl label node NODE "
            f"{device_plugin.CONFIG_LABEL}-",
        )
    if waiting:
        return Check(
            "sharing",
            WARN,
            "; ".join(waiting[:_SHOWN]),
            "the device plugin restarts with the new config within a minute; if not, "
            "read its config-manager container's logs",
        )
    return Check(
        "sharing", PASS, f"{len(labelled)} node(s) use configs from ConfigMap {config_map}"
    )


def check_dcgm(daemonsets: list[dict[str, Any]]) -> Check:
    found = [d for d in daemonsets if "dcgm-exporter" in _name(d)]
    if not found:
        return Check(
            "dcgm-exporter",
            WARN,
            "no DCGM exporter DaemonSet: no GPU metrics for "
            "`gpuctl top --prometheus` or `gpuctl alerts`",
            "GPU Operator: dcgmExporter.enabled=true; or helm install dcgm-exporter "
            "gpu-helm-charts/dcgm-exporter",
        )
    ds = found[0]
    ready, desired = _ready(ds)
    if desired == 0 or ready < desired:
        return Check(
            "dcgm-exporter",
            WARN,
            f"DaemonSet {namespaced_name(ds)}: {ready}/{desired} ready",
            f"kubectl -n {namespaced_name(ds).split('/')[0]} get pods -o wide",
        )
    return Check("dcgm-exporter", PASS, f"DaemonSet {namespaced_name(ds)}: {ready}/{desired} ready")


def run_checks(
    nodes: list[dict[str, Any]],
    daemonsets: list[dict[str, Any]],
    config_map: str | None,
    config_data: dict[str, Any] | None,
    dra: DraSource | None = None,
) -> list[Check]:
    plugin = device_plugin.find_device_plugin(daemonsets)
    return [
        check_gpu_nodes(nodes, dra),
        check_gfd(nodes),
        check_gpu_types(nodes),
        check_device_plugin(plugin),
        check_mig(nodes),
        check_sharing(nodes, config_map, config_data),
        check_dcgm(daemonsets),
    ]


def failed(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)


_KINDS = (("", WHOLE, "GPU"), ("_mig", 'GPU_I_ID!=""', "MIG slice"))  # field suffix, matcher, noun


def busy_signal_query() -> str:
    """How many whole GPUs and MIG slices report SM_ACTIVE, and how many any busy-signal
    field, now (a `field` label says which count is which: sm, any, sm_mig, any_mig)."""
    by = ", ".join(IDENTITY)

    def devices(selector: str, name: str) -> str:
        return f'label_replace(count(group by ({by}) ({{{selector}}})), "field", "{name}", "", "")'

    fields = "|".join(busy.SIGNALS)
    parts = []
    for suffix, matcher, _ in _KINDS:
        parts.append(devices(f'__name__="{SM_ACTIVE}", {matcher}', "sm" + suffix))
        parts.append(devices(f'__name__=~"{fields}", {matcher}', "any" + suffix))
    return " or ".join(parts)


def _devices(counts: dict[str, int], field: str, of: str | None = None) -> str:
    """`3 GPUs and 2 MIG slices` (those of them with FIELD), or with OF, `1 of 3 GPUs`:
    the GPUs and slices apart; a kind with none (with OF: none of FIELD) is left out."""
    said = []
    for suffix, _, noun in _KINDS:
        n, total = counts.get(field + suffix, 0), counts.get((of or field) + suffix, 0)
        if total and (n or not of):
            said.append(f"{n} of {total}" if of else str(n))
            said[-1] += f" {noun}{'s' * (total != 1)}"
    return " and ".join(said)


def check_busy_signal(counts: dict[str, int] | None, error: str | None = None) -> Check:
    """Which busy signal the cluster's Prometheus can give (gpuctl.dcgm.busy): SM activity
    measures work; a duty cycle (GPU_UTIL, GR_ENGINE_ACTIVE) reads 100 % for a kernel on
    one SM. counts: answer of busy_signal_query by field."""
    name = "busy signal"
    fix = (
        "enable DCGM_FI_PROF_SM_ACTIVE in dcgm-exporter's counters file (the GPU Operator's "
        "dcgmExporter.config; gpuctl provision's GPU stack ships one)"
    )
    if counts is None:
        return Check(name, WARN, f"cannot read Prometheus: {error}", "check --prometheus")
    counts = dict(counts)
    for suffix, _, _ in _KINDS:  # those without SM activity
        counts["duty" + suffix] = counts.get("any" + suffix, 0) - counts.get("sm" + suffix, 0)
    sm, duty = (sum(counts.get(f + s, 0) for s, _, _ in _KINDS) for f in ("sm", "duty"))
    if not sm + duty:
        return Check(name, WARN, "no DCGM busy-signal series in Prometheus", "deploy dcgm-exporter")
    if not duty:
        detail = f"SM activity (DCGM_FI_PROF_SM_ACTIVE) on all {_devices(counts, 'any')}"
        return Check(name, PASS, detail)
    if not sm:
        detail = f"only a duty cycle on all {_devices(counts, 'any')}: no DCGM_FI_PROF_SM_ACTIVE"
        return Check(name, WARN, detail, fix)
    detail = f"only a duty cycle on {_devices(counts, 'duty', of='any')}: no SM_ACTIVE"
    return Check(name, WARN, detail, fix)
