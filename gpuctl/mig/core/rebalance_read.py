"""What `gpuctl mig rebalance` reads off the cluster, as the planner's inputs: each GPU
Operator MIG node's GPUs (the layouts its nvidia.com/mig.config names in the mig-manager's
ConfigMap, checked against what the device plugin advertises), what its running pods use,
and the pending pods' MIG and whole-GPU requests. A node whose state is not known for sure
is left out, with why. Pure."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpuctl.common.errors import GpuctlError
from gpuctl.gpus.geometry import GpuModel, models
from gpuctl.gpus.identity import GPU, MIG_PREFIX, MIG_STRATEGY, NodeGpus
from gpuctl.gpus.resources import DONE_PHASES, requested
from gpuctl.k8s.nodes import gpus_of
from gpuctl.k8s.objects import Ref, annotations_of, labels_of, name_of, namespace_of
from gpuctl.mig.core import migparted
from gpuctl.mig.core.diff import GpuState
from gpuctl.mig.core.drain import DrainPolicy
from gpuctl.mig.core.operator import CONFIG_LABEL
from gpuctl.mig.core.rebalance import WHOLE, Finish, Layout, NodeNow, Pending, retry_name

ANNOTATION = "gpuctl.io/mig-rebalance"  # on a node gpuctl cordoned: why, and the config
_SINGLE_PRODUCT = re.compile(r"-MIG-(\d+g\.\d+gb.*)$")


def profile_of_resource(name: str) -> str | None:
    """``nvidia.com/mig-1g.10gb`` → ``1g.10gb``; the device plugin writes a profile's ``+``
    as a dot (``1g.10gb.me`` is ``1g.10gb+me``)."""
    if not name.startswith(MIG_PREFIX):
        return None
    return re.sub(r"^(\d+g\.\d+gb)\.", r"\1+", name[len(MIG_PREFIX) :])


def pod_name(pod: Mapping[str, Any]) -> str:
    return f"{namespace_of(pod) or 'default'}/{name_of(pod)}"


def _single_profile_wanted(pod: Mapping[str, Any]) -> str | None:
    """A pod asking nvidia.com/gpu of a single-strategy node selects its slice size by the
    product label GFD writes there (``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb``)."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    m = _SINGLE_PRODUCT.search(str(selector.get("nvidia.com/gpu.product", "")))
    return m.group(1) if m else None


def wants_of(pod: dict[str, Any], single_profile: str | None = None) -> dict[str, int]:
    """What the pod asks for, as the planner's keys: MIG profiles, WHOLE for whole GPUs; on a
    single-strategy node (SINGLE_PROFILE) its nvidia.com/gpu counts that profile's slices."""
    out: dict[str, int] = {}
    names = {
        k
        for c in (pod.get("spec") or {}).get("containers") or []
        for part in ("limits", "requests")
        for k in ((c.get("resources") or {}).get(part) or {})
    }
    for name in sorted(names):
        n = requested(pod, name)
        if n <= 0:
            continue
        profile = profile_of_resource(name)
        if profile:
            out[profile] = out.get(profile, 0) + n
        elif name == GPU:
            key = single_profile or _single_profile_wanted(pod) or WHOLE
            out[key] = out.get(key, 0) + n
    return out


def pending_pods(pods: Sequence[dict[str, Any]]) -> list[Pending]:
    """Pods not yet bound to a node that ask for MIG slices or GPUs, oldest first as listed."""
    out = []
    for p in pods:
        spec, status = p.get("spec") or {}, p.get("status") or {}
        if spec.get("nodeName") or status.get("phase") not in (None, "Pending"):
            continue
        wants = wants_of(p)
        if wants:
            out.append(Pending(pod_name(p), wants))
    return out


MAX_WORKLOAD_PODS = 10_000  # a podSet's count beyond this is read as this


def _true(obj: Mapping[str, Any], condition: str) -> bool:
    return any(
        c.get("type") == condition and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def pending_workloads(workloads: Sequence[dict[str, Any]]) -> list[Pending]:
    """Kueue Workloads not admitted (their jobs are suspended: no pods yet), one Pending a
    pod of each podSet that asks for MIG slices or GPUs. Admitted ones have pods, read as
    pods."""
    out = []
    for w in workloads:
        status = w.get("status") or {}
        if status.get("admission") or _true(w, "Finished") or _true(w, "Admitted"):
            continue
        name = pod_name(w)
        for ps in (w.get("spec") or {}).get("podSets") or []:
            wants = wants_of(ps.get("template") or {})
            count = ps.get("count", 1)
            if not wants or not isinstance(count, int) or count < 1:
                continue
            for i in range(min(count, MAX_WORKLOAD_PODS)):
                out.append(Pending(f"{name}[{ps.get('name', 'main')}#{i}]", wants))
    return out


def _model(g: NodeGpus) -> GpuModel | None:
    return next((m for m in models() if m.short_name == g.model), None)


def _layouts(
    cfg: migparted.MigConfigFile, config: str, model: GpuModel, count: int
) -> dict[int, Layout] | str:
    """Each GPU's layout under CONFIG, or why it cannot be told."""
    try:
        entries = cfg.select(config)
        gpus = [GpuState(i, model.nvml_name, "", model, (True, True)) for i in range(count)]
        desired = migparted.resolve(cfg, entries, gpus)
    except GpuctlError as e:  # a config mig-parted would refuse: the layout is not known
        return f"config {config!r} cannot be read: {e.message}"
    out = {}
    for i, d in desired.items():
        if d is None:
            return f"config {config!r} has no entry for GPU {i}: its layout is not known"
        out[i] = Layout(d.enabled, dict(d.layout) if d.enabled else {})
    return out


def offered(g: NodeGpus) -> dict[str, int]:
    """What the device plugin advertises (capacity), as the planner's keys."""
    out: dict[str, int] = {}
    for name, n in g.capacity.items():
        profile = profile_of_resource(name)
        if profile:
            out[profile] = n
        elif name == GPU and n:
            out[g.single_profile or WHOLE] = n
    return {k: v for k, v in out.items() if v}


def strategy_of(labels: Mapping[str, str], g: NodeGpus) -> str:
    """The device plugin's MIG strategy: GFD's nvidia.com/mig.strategy label (a mixed node
    whose GPUs all have MIG off still is one), else what its resources say."""
    label = labels.get(MIG_STRATEGY)
    return label if label in ("single", "mixed") else g.mig_strategy


def _count_from(
    cfg: migparted.MigConfigFile, config: str, model: GpuModel, plugin: Mapping[str, int]
) -> int | None:
    """The number of GPUs under which CONFIG offers what the plugin does (the single
    strategy's labels count slices, not GPUs)."""
    for n in range(1, 65):
        layouts = _layouts(cfg, config, model, n)
        if isinstance(layouts, str):
            return None
        total: dict[str, int] = {}
        for lay in layouts.values():
            for k, v in lay.offers().items():
                total[k] = total.get(k, 0) + v
        if total == dict(plugin):
            return n
    return None


def read_node(
    node: dict[str, Any], cfg: migparted.MigConfigFile | None, pods: Sequence[dict[str, Any]]
) -> NodeNow | str:
    """The node as the planner sees it, or why it is left out."""
    labels = labels_of(node)
    g = gpus_of(node)
    config = labels.get(CONFIG_LABEL)
    strategy = strategy_of(labels, g)
    if strategy not in ("single", "mixed"):
        return f"MIG strategy {strategy}: the device plugin offers no MIG devices"
    model = _model(g)
    if model is None:
        return f"GPU {g.name or 'unknown'}: gpuctl has no MIG geometry for it"
    if not config:
        return f"no {CONFIG_LABEL} label: the MIG manager does not manage it"
    if g.mig_state != "success":
        return f"{CONFIG_LABEL}.state is {g.mig_state or 'not set'}: the layout is not settled"
    if cfg is None:
        return "no mig-parted ConfigMap to read its config from"
    plugin = offered(g)
    count = g.count or _count_from(cfg, config, model, plugin)
    if not count:
        return "its number of GPUs is not known (in the single strategy GFD counts slices)"
    layouts = _layouts(cfg, config, model, count)
    if isinstance(layouts, str):
        return layouts
    now = NodeNow(name_of(node), model, strategy, config, layouts)
    if strategy == "single" and len({lay.key() for lay in layouts.values()}) > 1:
        return f"config {config!r} gives its GPUs different layouts under the single strategy"
    if dict(now.offers()) != plugin:
        return (
            f"the device plugin offers {plugin or 'nothing'}, not what {config!r} holds "
            f"({dict(now.offers())}): the layout may be stale"
        )
    running = {}
    single = None
    if strategy == "single":
        single = next(iter(layouts.values())).offers().most_common(1)[0][0]
    for p in pods:
        if (p.get("spec") or {}).get("nodeName") != now.name:
            continue
        if (p.get("status") or {}).get("phase") in DONE_PHASES:
            continue
        use = wants_of(p, single)
        if use:
            running[pod_name(p)] = use
    return NodeNow(now.name, model, strategy, config, layouts, running)


def left_by_us(node: dict[str, Any]) -> dict[str, Any] | None:
    """What an earlier run recorded on a node it cordoned ({why, from, to}), or None."""
    text = annotations_of(node).get(ANNOTATION)
    try:
        got = json.loads(text) if text else None
    except ValueError:
        return None
    return got if isinstance(got, dict) and isinstance(got.get("to"), str) else None


def _finish(
    node: dict[str, Any],
    cfg: migparted.MigConfigFile | None,
    pods: Sequence[dict[str, Any]],
    record: dict[str, Any],
) -> tuple[Finish, NodeNow | str]:
    """What is left on a node an earlier run cordoned, and the node as the plan sees it
    (every GPU kept while the manager works on it)."""
    labels = labels_of(node)
    g = gpus_of(node)
    name = name_of(node)
    to = record["to"]
    model = _model(g)
    gpus = record.get("gpus")
    count = gpus if isinstance(gpus, int) and gpus > 0 else g.count
    if labels.get(CONFIG_LABEL) != to or model is None or not count or cfg is None:
        return Finish(name, "uncordon", labels.get(CONFIG_LABEL) or ""), read_node(node, cfg, pods)
    layouts = _layouts(cfg, to, model, count)
    if isinstance(layouts, str):
        return Finish(name, "uncordon", to), layouts
    strategy = strategy_of(labels, g)
    now = read_node(node, cfg, pods)
    if g.mig_state == "success" and not isinstance(now, str):
        what, retry, seen = "uncordon", None, now
    else:
        failed = g.mig_state == "failed"
        what, retry = ("retry", retry_name(to)) if failed else ("wait", None)
        seen = NodeNow(name, model, strategy, to, layouts, settling=True)
    return Finish(name, what, to, retry, model.short_name, strategy, layouts), seen


def _drainable(
    now: NodeNow, pods: Sequence[dict[str, Any]], drain: DrainPolicy, owners: Mapping[Ref, Any]
) -> NodeNow:
    """NOW with the running pods DRAIN covers, and why each other one is not."""
    covered, why = set(), {}
    for p in pods:
        name = pod_name(p)
        if name in now.running and (p.get("spec") or {}).get("nodeName") == now.name:
            reason = drain.why_not(p, owners)
            if reason is None:
                covered.add(name)
            else:
                why[name] = reason
    return replace(now, covered=frozenset(covered), not_covered=why)


def read_cluster(
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]],
    cfg: migparted.MigConfigFile | None,
    drain: DrainPolicy | None = None,
    owners: Mapping[Ref, Any] | None = None,
) -> tuple[list[NodeNow], dict[str, str], list[Pending], list[Finish]]:
    """(the nodes the plan may change, node → why each other MIG node is left out, the
    pending pods, what is left on nodes an earlier run cordoned). Nodes without MIG or GPU
    Operator labels are not mentioned. With DRAIN, the running pods it covers (OWNERS: as
    DrainPolicy.why_not reads them) may be evicted."""
    out, skipped, finishing = [], {}, []
    for n in nodes:
        labels = labels_of(n)
        if CONFIG_LABEL not in labels and "nvidia.com/mig.strategy" not in labels:
            continue
        name = name_of(n)
        record = left_by_us(n)
        if record is not None:
            done, got = _finish(n, cfg, pods, record)
            finishing.append(done)
        elif (n.get("spec") or {}).get("unschedulable"):
            skipped[name] = "cordoned by someone else"
            continue
        else:
            got = read_node(n, cfg, pods)
        if isinstance(got, str):
            skipped[name] = got
        else:
            if drain and not got.settling:
                got = _drainable(got, pods, drain, owners or {})
            out.append(got)
    return out, skipped, pending_pods(pods), finishing
