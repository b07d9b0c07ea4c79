"""The simulated cluster of `gpuctl sandbox`: its nodes, labelled as the GPU Operator (GPU
Feature Discovery) and a site label label them, the GPUs and MIG slices each advertises
(single strategy: slices as nvidia.com/gpu, the product label ending -MIG-<profile>; mixed:
nvidia.com/mig-<profile> and GFD's nvidia.com/mig-<profile>.count/.memory/.product labels,
after NVIDIA/k8s-device-plugin internal/lm/mig-strategy.go), and where kube-scheduler would
put a pod. No I/O: objects come in and go out as the API returns them.

Placement follows kube-scheduler's filters that matter for GPU pods (cordoned nodes,
nodeSelector, required node affinity, taints, requests against allocatable minus what
running pods request, whether the pod's DRA claims can be allocated there,
required pod affinity on a topology key) and scores the nodes that pass with
NodeResourcesFit MostAllocated at gpuctl's weights (gpuctl.gpus.scoring, the profile `gpuctl
sched render` writes and whatif's bin-packing replay scores with). Nodes of AWS's instance
types carry EKS's network topology labels in a synthetic layout (network_labels). Not
simulated: preemption, pod anti-affinity, preferred pod affinity, topology spread, ports.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import UsageError
from gpuctl.common.k8s_names import DEFAULT_GPU_LABEL_KEY
from gpuctl.common.quantity import from_api
from gpuctl.gpus import geometry
from gpuctl.gpus.names import product_label
from gpuctl.gpus.scoring import most_allocated, resource_weights
from gpuctl.k8s.fit import tolerates
from gpuctl.k8s.selectors import label_selector_matches, pod_may_run_on
from gpuctl.sim import accelerators
from gpuctl.sim.accelerators import VendorGroup

DEFAULT_NODES = "2xH100-80GB,1xA100-80GB,1xA100-80GB:mig=1g.10gb"
GPUS_PER_NODE = 8
# on a node whose GPUs the simulated DRA driver publishes: their model
DRA_NODE = "gpuctl.io/sandbox-dra-model"
DONE = ("Succeeded", "Failed")
GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
# Instance types of AWS's 8-GPU boards, for the node.kubernetes.io/instance-type label.
INSTANCE_TYPES = {
    "H100-80GB": "p5.48xlarge",
    "H200": "p5en.48xlarge",
    "A100-80GB": "p4de.24xlarge",
    "A100-40GB": "p4d.24xlarge",
    "B200": "p6-b200.48xlarge",
}
# The network layers EKS labels p4d/p5/p6 nodes with (DescribeInstanceTopology's NetworkNodes,
# widest first): docs.aws.amazon.com/eks/latest/userguide/ (topology labels), and
# docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html
NETWORK_LAYERS = tuple(f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3))
BLOCK_NODES = 2  # nodes under one layer-3 network node (a block) in the sandbox's layout
SPINE_BLOCKS = 2  # blocks under one layer-2 network node (a spine)
_SPEC = re.compile(
    r"^(\d+)x([A-Za-z0-9.\-]+)(?::mig=([0-9a-z.+]+)|:mig-config=([0-9A-Za-z._+-]+)|(:dra))?$"
)
SINGLE, MIXED = "single", "mixed"
MIG_LABELS = (  # what GPU Feature Discovery and the MIG manager write about MIG
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/mig.strategy",
)


@dataclass(frozen=True)
class GpuLayout:
    """One GPU: MIG off, or on with these slices (profile -> count)."""

    enabled: bool
    slices: tuple[tuple[str, int], ...] = ()


WHOLE = GpuLayout(False)


@dataclass(frozen=True)
class NodeGroup:
    count: int
    model: geometry.GpuModel
    mig_profile: str | None  # every GPU split into this profile (MIG single strategy)
    mig_config: str | None = None  # a config of the MIG manager's ConfigMap (mixed strategy)
    dra: bool = False  # its GPUs published by the simulated DRA driver, no device plugin

    @property
    def strategy(self) -> str | None:
        return SINGLE if self.mig_profile else MIXED if self.mig_config else None


@dataclass(frozen=True)
class Device:
    """What the device plugin hands a container: a whole GPU or one MIG slice of it."""

    resource: str
    gpu: int
    profile: str | None  # the MIG profile of a slice


# A mig-parted config's layout of each of a node's GPUs (model, GPU count) -> layouts; None
# when the config does not exist or fits no GPU of the model.
Layouts = Callable[[str, geometry.GpuModel, int], "list[GpuLayout] | None"]


def parse_nodes(text: str, layouts: Layouts | None = None) -> list[NodeGroup | VendorGroup]:
    """`2xH100-80GB,1xA100-80GB:mig=1g.10gb,1xA100-80GB:mig-config=all-balanced,1xL4:dra`:
    node counts, GPU models, MIG profiles (single strategy) or configs (mixed strategy), the
    configs checked with LAYOUTS, and GPUs published through DRA; other vendors' nodes
    (`1xMI300X`, `1xTPU-v5e:2x4`: gpuctl.sim.accelerators)."""
    groups: list[NodeGroup | VendorGroup] = []
    for part in (p.strip() for p in text.split(",")):
        vendor = accelerators.parse(part)
        if vendor is not None:
            groups.append(vendor)
            continue
        m = _SPEC.match(part)
        if not m or int(m.group(1)) < 1:
            raise UsageError(
                f"--gpu-nodes: {part!r} is not COUNTxMODEL[:mig=PROFILE|:mig-config=CONFIG|:dra]"
                " or COUNTxMI300X or COUNTxTPU-MODEL:TOPOLOGY",
                hint=f"e.g. {DEFAULT_NODES}",
            )
        model = geometry.find_model(m.group(2))
        profile, config = m.group(3), m.group(4)
        if profile is not None:
            model.profile(profile)  # refuses a profile the model does not have
        if config is not None and layouts is not None:
            if layouts(config, model, GPUS_PER_NODE) is None:
                raise UsageError(
                    f"--gpu-nodes: {part!r}: the MIG manager's ConfigMap has no config "
                    f"{config!r} for {model.short_name}",
                    hint="e.g. all-1g.10gb, all-balanced, all-disabled",
                )
        dra = m.group(5) is not None
        groups.append(NodeGroup(int(m.group(1)), model, profile, config, dra))
    return groups


def gpu_type(model: geometry.GpuModel) -> str:
    """The site label's value: the model's family in lower case (h100, a100)."""
    return model.short_name.split("-")[0].lower()


def first_layouts(group: NodeGroup, layouts: Layouts | None, gpus: int) -> list[GpuLayout]:
    """The layout each GPU of the group's nodes starts with."""
    if group.mig_profile:
        profile = group.model.profile(group.mig_profile)
        return [GpuLayout(True, ((profile.name, profile.max_instances),))] * gpus
    if group.mig_config and layouts is not None:
        return layouts(group.mig_config, group.model, gpus) or [WHOLE] * gpus
    return [WHOLE] * gpus


def network_node(layer: int, index: int) -> str:
    """The id of the sandbox's INDEXth network node of LAYER, in EC2's form (nn- and 17 hex)."""
    return "nn-" + hashlib.sha1(f"{layer}/{index}".encode()).hexdigest()[:17]


def network_labels(groups: list[NodeGroup]) -> list[dict[str, str] | None]:
    """EKS's topology labels for each node of GROUPS, in order (None: an instance type EC2
    reports no topology for: the sandbox's models without an AWS instance type). The
    sandbox's synthetic layout: a group's nodes fill blocks of BLOCK_NODES (a group starts a
    new block, as a capacity reservation does), blocks fill spines of SPINE_BLOCKS in order,
    one layer-1 network node above them all."""
    out: list[dict[str, str] | None] = []
    blocks = 0
    for group in groups:
        if group.model.short_name not in INSTANCE_TYPES:
            out += [None] * group.count
            continue
        for i in range(group.count):
            block = blocks + i // BLOCK_NODES
            path = (0, block // SPINE_BLOCKS, block)
            out.append({k: network_node(n, p) for n, (k, p) in enumerate(zip(NETWORK_LAYERS, path), 1)})  # fmt: skip
        blocks += -(-group.count // BLOCK_NODES)
    return out


def node_objects(
    groups: list[NodeGroup | VendorGroup],
    layouts: Layouts | None = None,
    gpus_per_node: int = GPUS_PER_NODE,
) -> list[dict]:
    """One Node per node of each group, plus a CPU-only node for the system pods."""
    nodes = [_node("cpu-node-1", {}, {"cpu": "16", "memory": "64Gi"}, taint=None)]
    network = iter(network_labels([g for g in groups if isinstance(g, NodeGroup)]))
    for group in groups:
        if isinstance(group, VendorGroup):
            names = [n["metadata"]["name"] for n in nodes]
            nodes += accelerators.node_objects(group, names, _node)
            continue
        name = gpu_type(group.model) + ("-mig" if group.strategy else "")
        name += "-dra" if group.dra else ""
        for _ in range(group.count):
            if group.dra:  # the DRA driver publishes its GPUs; no device plugin, no GFD
                labels = {DEFAULT_GPU_LABEL_KEY: gpu_type(group.model), DRA_NODE: group.model.short_name}  # fmt: skip
                gpu_resources: dict[str, str] = {}
            else:
                labels = _gpu_labels(group)
                first = first_layouts(group, layouts, gpus_per_node)
                mig_labels, gpu_resources = describe(group.model, first, group.strategy)
                labels |= {k: v for k, v in mig_labels.items() if v is not None}
            topology = next(network)
            labels |= topology if topology is not None else {}
            taken = sum(1 for n in nodes if n["metadata"]["name"].startswith(f"{name}-node-"))
            resources = {"cpu": "192", "memory": "2048Gi", **gpu_resources}
            nodes.append(_node(f"{name}-node-{taken + 1}", labels, resources, taint=GPU))
    return nodes


def _gpu_labels(group: NodeGroup) -> dict[str, str]:
    model = group.model
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.family": model.architecture.lower(),
        "nvidia.com/gpu.machine": "simulated",
        "nvidia.com/cuda.driver.major": "580",
        "nvidia.com/mig.capable": "true",
        DEFAULT_GPU_LABEL_KEY: gpu_type(model),
    }
    if model.short_name in INSTANCE_TYPES:
        labels["node.kubernetes.io/instance-type"] = INSTANCE_TYPES[model.short_name]
    if group.strategy:
        config = f"all-{group.mig_profile}" if group.mig_profile else str(group.mig_config)
        labels |= {"nvidia.com/mig.config": config, "nvidia.com/mig.config.state": "success"}
    return labels


def describe(
    model: geometry.GpuModel, layouts: list[GpuLayout], strategy: str | None
) -> tuple[dict[str, str | None], dict[str, str]]:
    """What GPU Feature Discovery labels and the device plugin advertises for GPUs in these
    layouts: (labels, None for one to remove; the GPU resources, every one named)."""
    product, memory = product_label(model), model.memory_total_mib
    labels: dict[str, str | None] = {k: None for k in MIG_LABELS}
    labels |= {"nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": str(memory)}
    resources = {GPU: str(len(layouts))}
    labels["nvidia.com/gpu.count"] = str(len(layouts))
    if strategy is None:
        return labels, resources
    labels["nvidia.com/mig.strategy"] = strategy
    slices: dict[str, int] = {}
    for layout in layouts:
        for p, n in layout.slices if layout.enabled else ():
            slices[p] = slices.get(p, 0) + n
    if strategy == SINGLE:
        kinds = {layout.slices if layout.enabled else None for layout in layouts}
        if len(kinds) == 1 and None in kinds:
            return labels, resources
        if len(kinds) > 1 or len(slices) != 1:  # GFD: the GPUs disagree
            labels |= {"nvidia.com/gpu.product": product + "-MIG-INVALID"}
            labels |= {"nvidia.com/gpu.count": "0", "nvidia.com/gpu.memory": "0"}
            return labels, {GPU: "0"}
        ((name, count),) = slices.items()
        labels |= {"nvidia.com/gpu.product": f"{product}-MIG-{name}"}
        labels |= {"nvidia.com/gpu.count": str(count)}
        labels["nvidia.com/gpu.memory"] = str(model.profile(name).memory_mib or memory)
        return labels, {GPU: str(count)}
    resources[GPU] = str(sum(1 for layout in layouts if not layout.enabled))
    for profile in model.profiles:
        key = profile.resource_name
        count = slices.get(profile.name, 0)
        resources[key] = str(count)
        labels[f"{key}.count"] = str(count) if count else None
        memory_mib = profile.memory_mib
        labels[f"{key}.memory"] = str(memory_mib) if count and memory_mib else None
        labels[f"{key}.product"] = f"{product}-MIG-{profile.name}" if count else None
    return labels, {k: v for k, v in resources.items() if v != "0" or k == GPU}


def devices(layouts: list[GpuLayout], strategy: str | None) -> list[Device]:
    """The devices a node's device plugin hands out, GPU by GPU."""
    out = []
    for gpu, layout in enumerate(layouts):
        if not layout.enabled:
            out.append(Device(GPU, gpu, None))
            continue
        for name, count in layout.slices:
            resource = GPU if strategy == SINGLE else MIG_PREFIX + name.replace("+", ".")
            out += [Device(resource, gpu, name)] * count
    return out


def _node(name: str, labels: dict[str, str], resources: dict[str, str], taint: str | None) -> dict:
    """A Ready node; TAINT: the key of its NoSchedule taint (value present), if any."""
    capacity = {**resources, "pods": "110", "ephemeral-storage": "1Ti"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **labels,
            },
            "annotations": {"gpuctl.io/sandbox": "a simulated node (gpuctl sandbox)"},
        },
        "spec": {"taints": [{"key": taint, "value": "present", "effect": "NoSchedule"}]}
        if taint
        else {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.29.0-sandbox", "architecture": "amd64"},
        },
    }


# --- placement ----------------------------------------------------------------------------


def amount(value: object, resource: str) -> int:
    """A quantity in the unit kube-scheduler counts it in: millicores, bytes, units."""
    q = from_api(value)
    if q is None:
        return 0
    return int(q * 1000) if resource == "cpu" else int(q)


def requests(pod: dict) -> dict[str, int]:
    """What a pod requests (requests, else limits, as the API server defaults them)."""
    total: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for name, value in asked.items():
            total[name] = total.get(name, 0) + amount(value, name)
    return total


def _allocatable(node: dict) -> dict[str, int]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: amount(v, k) for k, v in alloc.items()}


def selected(pod: dict, node: dict) -> bool:
    """nodeSelector and required node affinity, as the scheduler's NodeAffinity filter."""
    return pod_may_run_on(pod.get("spec") or {}, node)


def _why_not(
    pod: dict,
    node: dict,
    used: dict[str, int],
    asked: dict[str, int],
    claimable: Callable[[str], bool] | None = None,
    affine: Callable[[dict], bool] | None = None,
    dra_backed: frozenset[str] = frozenset(),
) -> str | None:
    """kube-scheduler's reason for filtering the node out, None when it passes; CLAIMABLE
    says whether the pod's DRA claims can be allocated on a node, AFFINE whether the node
    meets its required pod affinity; a resource of DRA_BACKED that the node does not
    advertise is DRA's to give (KEP-5004), through CLAIMABLE."""
    if (node.get("spec") or {}).get("unschedulable"):
        return "node(s) were unschedulable"
    if not selected(pod, node):
        return "node(s) didn't match Pod's node affinity/selector"
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(taint, tolerations):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    alloc = _allocatable(node)
    for resource, amount in sorted(asked.items()):
        if resource in dra_backed and not alloc.get(resource, 0):
            continue
        if amount and used.get(resource, 0) + amount > alloc.get(resource, 0):
            return f"Insufficient {resource}"
    if affine is not None and not affine(node):  # after NodeResourcesFit, as kube-scheduler
        return "node(s) didn't match pod affinity rules"
    if claimable is not None and not claimable(node["metadata"]["name"]):
        return "cannot allocate all claims"
    return None


def in_use(pods: list[dict]) -> dict[str, dict[str, int]]:
    """Per node, what its pods that have not finished request."""
    used: dict[str, dict[str, int]] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node and (p.get("status") or {}).get("phase") not in DONE:
            into = used.setdefault(node, {})
            for k, v in requests(p).items():
                into[k] = into.get(k, 0) + v
    return used


def pod_affinity(pod: dict, nodes: list[dict], pods: list[dict]) -> Callable[[dict], bool] | None:
    """The InterPodAffinity filter of POD's required pod affinity (None: it has none), given
    PODS placed on NODES: a node passes when it carries each term's topologyKey with a value
    that a node running a pod the term selects also has. The first pod of a group that
    selects itself may go to any node carrying the keys (kube-scheduler's
    pkg/scheduler/framework/plugins/interpodaffinity/filtering.go, satisfyPodAffinity)."""
    spec = pod.get("spec") or {}
    terms = ((spec.get("affinity") or {}).get("podAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    if not terms:
        return None
    labels_of = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes}
    namespace = pod["metadata"].get("namespace")
    domains: list[set[str]] = []
    for term in terms:
        spaces = term.get("namespaces") or ([] if "namespaceSelector" in term else [namespace])
        key, found = term.get("topologyKey", ""), set()
        for other in pods:
            where = labels_of.get((other.get("spec") or {}).get("nodeName") or "", {})
            if (
                (other.get("status") or {}).get("phase") not in DONE
                and (not spaces or other["metadata"].get("namespace") in spaces)
                and label_selector_matches(term.get("labelSelector"), other["metadata"].get("labels") or {})
                and key in where
            ):  # fmt: skip
                found.add(where[key])
        domains.append(found)
    own = pod["metadata"].get("labels") or {}
    first = not any(domains) and all(
        label_selector_matches(t.get("labelSelector"), own) for t in terms
    )

    def affine(node: dict) -> bool:
        labels = node["metadata"].get("labels") or {}
        keys = [t.get("topologyKey", "") for t in terms]
        if not all(k in labels for k in keys):
            return False
        return first or all(labels[k] in d for k, d in zip(keys, domains))

    return affine


def place(
    pod: dict,
    nodes: list[dict],
    pods: list[dict],
    claimable: Callable[[str], bool] | None = None,
    dra_backed: frozenset[str] = frozenset(),
) -> tuple[str | None, str]:
    """(node name, "") for the best-scored node that passes the filters (CLAIMABLE: where
    the pod's DRA claims can be allocated), or (None, the PodScheduled=False message
    kube-scheduler writes)."""
    used, asked = in_use(pods), requests(pod)
    affine = pod_affinity(pod, nodes, pods)
    weights = tuple(
        (r, w) for r, w in resource_weights() if r in ("cpu", "memory") or asked.get(r, 0) > 0
    )
    best: tuple[int, int, str] | None = None
    reasons: dict[str, int] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        on_node = used.get(name, {})
        reason = _why_not(pod, node, on_node, asked, claimable, affine, dra_backed)
        if reason is not None:
            reasons[reason] = reasons.get(reason, 0) + 1
            continue
        after = {r: on_node.get(r, 0) + asked.get(r, 0) for r, _ in weights}
        score = most_allocated(after, _allocatable(node), weights)
        tie = zlib.crc32(name.encode())  # kube-scheduler breaks ties at random; stable here
        if best is None or (score, tie) > best[:2]:
            best = (score, tie, name)
    if best is not None:
        return best[2], ""
    detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    return None, f"0/{len(nodes)} nodes are available: {detail}."


def pod_devices(pod: dict[str, Any]) -> dict[str, int]:
    """The devices the pod asks of the device plugins: GPUs (or single-strategy MIG slices),
    mixed-strategy MIG slices, other vendors' GPUs and chips, by resource."""
    others = (accelerators.AMD, accelerators.TPU)
    return {
        r: n
        for r, n in requests(pod).items()
        if n > 0 and (r == GPU or r.startswith(MIG_PREFIX) or r in others)
    }
