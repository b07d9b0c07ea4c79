"""Where nodes sit in the network: the topology names a spec asks for (`topology.within`),
the node labels each means per cloud, and the levels a Kueue Topology lists (the domains
nodes form under one label are counted where they are used: gpuctl.k8s.fit.by_domain,
gpuctl.nodes.core.domains). Pure.

A name means the first of its keys that any node carries; a spec may also give a label key.

| name | keys, in the order tried | means | source |
|---|---|---|---|
| host | `cloud.google.com/gce-topology-host`, `kubernetes.io/hostname` | one machine | GKE: cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas ("the ID of the host on which the VM is located"); kubernetes.io/docs/reference/labels-annotations-taints |
| nvlink | `nvidia.com/gpu.clique`, `network.topology.nvidia.com/accelerator` | one NVLink domain (a GB200 NVL72 rack) | GFD: NVIDIA/k8s-device-plugin internal/lm/imex.go (fabric.go later) (`<cluster UUID>.<clique ID>` from NVML's fabric info); Topograph: NVIDIA/topograph docs/engines/k8s.md ("high-speed interconnect domains, such as NVLink") |
| block | `topology.k8s.aws/network-node-layer-3`, `cloud.google.com/gce-topology-subblock`, `network.topology.nvidia.com/leaf` | the nodes under one switch: the bottom network layer | EKS: docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html (layer 1 the top, the bottom layer closest to the instance; EKS writes NetworkNodes[i] as `network-node-layer-<i+1>`), awsankur/awesome-networking ec2-topology.md ("3 network nodes in common: same brick"); GKE: Compute API ResourceStatusPhysicalHostTopology ("instances in the same sub-block experience lower network latency than instances in the same block"); Topograph: "leaf: the switches directly connected to compute nodes" |
| spine | `topology.k8s.aws/network-node-layer-2`, `cloud.google.com/gce-topology-block`, `network.topology.nvidia.com/spine` | the next layer up: blocks under one spine | EKS: the same AWS page (layer ii), awsankur/awesome-networking ("2 network nodes in common: same spine"); GKE: the same TAS page ("a block is a collection of sub-blocks"); Topograph: "spine: the next tier of switches above the leaf level" |
| zone | `topology.kubernetes.io/zone` | one availability zone | kubernetes.io/docs/reference/labels-annotations-taints |

gpuctl's names follow the switch tiers (Topograph's leaf → spine → core), so one spec means the
same distance on every cloud: GKE's own "block" is gpuctl's spine, its sub-block gpuctl's block
(on A4X a sub-block is also one NVL72 domain). EKS's 4-layer instance types (p6-b200) carry a
deeper layer; `within: topology.k8s.aws/network-node-layer-4` asks for it by key.

A Kueue Topology lists its levels widest first with `kubernetes.io/hostname` last (Kueue's
docs, concepts/topology_aware_scheduling; GKE's TAS page lists block, subblock, host,
hostname): LEVELS is that order across clouds, and `levels` keeps the keys nodes carry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
CLIQUE = "nvidia.com/gpu.clique"
EKS_LAYERS = tuple(f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3, 4))
GKE_BLOCK = "cloud.google.com/gce-topology-block"
GKE_SUBBLOCK = "cloud.google.com/gce-topology-subblock"
GKE_HOST = "cloud.google.com/gce-topology-host"
TOPOGRAPH = "network.topology.nvidia.com/"

NAMES: Mapping[str, tuple[str, ...]] = {
    "host": (GKE_HOST, HOSTNAME),
    "nvlink": (CLIQUE, TOPOGRAPH + "accelerator"),
    "block": (EKS_LAYERS[2], GKE_SUBBLOCK, TOPOGRAPH + "leaf"),
    "spine": (EKS_LAYERS[1], GKE_BLOCK, TOPOGRAPH + "spine"),
    "zone": (ZONE,),
}

# Every topology key gpuctl knows, widest first: what a Kueue Topology's levels are.
LEVELS: tuple[str, ...] = (
    ZONE,
    *EKS_LAYERS,
    GKE_BLOCK,
    GKE_SUBBLOCK,
    TOPOGRAPH + "core",
    TOPOGRAPH + "spine",
    TOPOGRAPH + "leaf",
    TOPOGRAPH + "accelerator",
    CLIQUE,
    GKE_HOST,
    HOSTNAME,
)


class TopologyError(GpuctlError):
    """A topology the nodes do not describe."""


@dataclass(frozen=True)
class Constraint:
    """A spec's `topology`: its pods within one domain of WITHIN (a name or a label key);
    REQUIRED: they wait for one with room, else one is preferred. Once the cluster was
    asked, KEY is the label WITHIN means there and ENGINE what keeps the pods in one of its
    domains (gpuctl.jobs.core.topology); ASSUMED says what was guessed without nodes;
    PINNED the one domain pod affinity was helped to (its value of KEY)."""

    within: str
    required: bool = True
    key: str | None = None
    engine: str | None = None
    assumed: str | None = None
    pinned: str | None = None  # the domain (a value of KEY) the pods were pinned to

    def words(self) -> str:
        """'within one topology.k8s.aws/network-node-layer-3 domain (block)'."""
        key = self.key or self.within
        name = self.within if self.within in NAMES else name_of(key)
        return f"within one {key} domain" + (f" ({name})" if name and name != key else "")


def resolve(within: str, nodes_labels: Iterable[Mapping[str, str]]) -> str:
    """The label key WITHIN (a name of NAMES or a label key) means on nodes with these labels.

    Raises TopologyError, naming the topology keys the nodes do carry, when none carries it."""
    labels = list(nodes_labels)
    carried = {k for node in labels for k in node}
    candidates = NAMES.get(within, (within,))
    for key in candidates:
        if key in carried:
            return key
    what = (
        f"no node carries a {within!r} label (looked for {', '.join(candidates)})"
        if within in NAMES
        else f"no node carries the label {within!r}"
    )
    raise TopologyError(f"{what}; {_carried(labels)}")


def assumed(within: str) -> str:
    """The key WITHIN means when no nodes are known (offline render): its first candidate."""
    return NAMES.get(within, (within,))[0]


def name_of(key: str) -> str | None:
    """The name (of NAMES) a topology key stands for, if any."""
    return next((n for n, keys in NAMES.items() if key in keys), None)


# the levels that are the network's (switch layers, blocks, NVLink cliques): not the zone, not the host
NETWORK = frozenset(LEVELS) - {ZONE, HOSTNAME}


def levels(nodes_labels: Iterable[Mapping[str, str]]) -> list[str]:
    """The topology keys these nodes carry, widest first, kubernetes.io/hostname last."""
    carried = {k for node in nodes_labels for k in node}
    return [key for key in LEVELS if key in carried]


def kueue_levels(obj: Mapping[str, Any]) -> list[str]:
    """The levels (node label keys) of a Kueue Topology as the API returns it."""
    return [str(lv.get("nodeLabel")) for lv in (obj.get("spec") or {}).get("levels") or []]


def placed(labels: Mapping[str, str]) -> dict[str, str]:
    """Where a node with these labels sits: its topology labels, widest first, but for its
    own host name."""
    return {key: labels[key] for key in LEVELS if key in labels and key != HOSTNAME}


def _carried(nodes_labels: list[Mapping[str, str]]) -> str:
    if not nodes_labels:
        return "no nodes were found to read topology labels from"
    keys = levels(nodes_labels)
    shown = [f"{k} ({name_of(k)})" if name_of(k) else k for k in keys]
    return "the nodes carry: " + ", ".join(shown) if shown else "the nodes carry no topology label"
