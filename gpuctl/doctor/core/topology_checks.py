"""Can a gang be kept within one block, spine or NVLink domain? `gpuctl doctor`'s topology
check: the nodes of each multi-node accelerator pool (two or more nodes of one instance type,
else of one accelerator model) should carry network topology labels
(gpuctl.gpus.topology.LEVELS less the zone and the hostname: EKS's network-node layers,
GKE's block and sub-block, GFD's NVLink clique, Topograph's), which `topology:` in a spec,
Kueue's Topology Aware Scheduling and `quota set`'s Topology rely on."""

from __future__ import annotations

from typing import Any

from gpuctl.doctor.core.checks import PASS, WARN, Check, _name, _names
from gpuctl.gpus import topology
from gpuctl.gpus.identity import INSTANCE_TYPE
from gpuctl.k8s.nodes import gpus_of, is_accelerator_node
from gpuctl.k8s.objects import labels_of

NAME = "topology"
FIX = (
    "label each node with where it sits in the network: EKS does on p4d, p5, p6 and trn "
    "instances (topology.k8s.aws/network-node-layer-N), GKE on compact placement "
    "(cloud.google.com/gce-topology-*), GPU Feature Discovery on NVLink racks "
    "(nvidia.com/gpu.clique), NVIDIA Topograph elsewhere (network.topology.nvidia.com/*)"
)


def pools(nodes: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Accelerator nodes by pool: their instance type, else their accelerator model."""
    out: dict[str, list[dict[str, Any]]] = {}
    for n in nodes:
        if not is_accelerator_node(n):
            continue
        pool = labels_of(n).get(INSTANCE_TYPE) or gpus_of(n).name or "unknown model"
        out.setdefault(pool, []).append(n)
    return out


def check_topology(nodes: list[dict[str, Any]]) -> Check:
    """Warn about multi-node pools with nodes that carry no network topology label."""
    multi = {p: ns for p, ns in pools(nodes).items() if len(ns) > 1}
    if not multi:
        return Check(NAME, PASS, "no multi-node accelerator pool (a gang fits one node)")
    bare, labelled = [], []
    for pool, members in sorted(multi.items()):
        without = [_name(n) for n in members if not topology.NETWORK & set(labels_of(n))]
        if without:
            bare.append(f"{pool}: {len(without)} of {len(members)} ({_names(without)})")
        else:
            keys = sorted({k for n in members for k in labels_of(n) if k in topology.NETWORK})
            labelled.append(f"{pool} ({', '.join(keys)})")
    if bare:
        return Check(
            NAME,
            WARN,
            "nodes of multi-node pools carry no network topology label, so no gang can be "
            f"kept within one block or NVLink domain there: {'; '.join(bare)}",
            FIX,
        )
    return Check(
        NAME, PASS, f"multi-node pools with network topology labels: {'; '.join(labelled)}"
    )
