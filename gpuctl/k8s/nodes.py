"""Nodes as the API returns them: their labels, capacity, allocatable and taints, the labels
NVIDIA's GPU stack puts on them, the one rule for which node is a GPU node (NVIDIA's) and
which an accelerator node (any vendor's), and their accelerator inventory. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpuctl.common.quantity import count
from gpuctl.gpus.accelerators import DraSource, NodeInventory
from gpuctl.gpus.identity import NodeGpus, identify
from gpuctl.gpus.inventory import node_inventory
from gpuctl.gpus.names import GFD_PRODUCT_LABEL
from gpuctl.gpus.vendors import NVIDIA, VENDORS, Vendor, is_accelerator_resource
from gpuctl.k8s.objects import labels_of, name_of

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
# Set by GPU Feature Discovery on every node where it finds a GPU.
GFD_PRESENT = "nvidia.com/gpu.present"
GFD_COUNT = "nvidia.com/gpu.count"
# Set by GPU Feature Discovery from the config the device plugin actually loaded.
GFD_REPLICAS = "nvidia.com/gpu.replicas"
GFD_STRATEGY = "nvidia.com/gpu.sharing-strategy"
# Read by the GPU Operator's MIG manager (the layout wanted) and set by GFD (the strategy).
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STRATEGY = "nvidia.com/mig.strategy"


def allocatable(node: dict[str, Any]) -> dict[str, Any]:
    return (node.get("status") or {}).get("allocatable") or {}


def capacity(node: dict[str, Any]) -> dict[str, Any]:
    return (node.get("status") or {}).get("capacity") or {}


def taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return (node.get("spec") or {}).get("taints") or []


def is_gpu_resource(name: str) -> bool:
    """A resource the NVIDIA device plugin advertises for GPUs: `nvidia.com/gpu`, a MIG
    device `nvidia.com/mig-<profile>`, or either renamed by sharing (`nvidia.com/gpu.shared`,
    `nvidia.com/mig-1g.10gb.shared`). Other `nvidia.com/` resources are not GPUs: the
    Network Operator's SR-IOV and RDMA devices use that prefix too."""
    return NVIDIA.offers(name)


def gpu_resources(node: dict[str, Any]) -> dict[str, int]:
    """The GPU resources the node has allocatable, and how many of each."""
    return {k: count(v) for k, v in allocatable(node).items() if is_gpu_resource(k)}


def accelerator_resources(node: dict[str, Any]) -> dict[str, int]:
    """Every vendor's accelerator resources the node has allocatable, and how many of each."""
    return {k: count(v) for k, v in allocatable(node).items() if is_accelerator_resource(k)}


def is_gpu_node(node: dict[str, Any]) -> bool:
    """THE rule for which node is a GPU node, whatever its labels and sharing:

    - it advertises a GPU resource (see is_gpu_resource: whole GPUs, MIG devices, shared
      GPUs under their renamed names) in its capacity or its allocatable: capacity keeps
      the count while the device plugin finds its GPUs unhealthy, which sets allocatable to 0;
    - or GPU Feature Discovery labelled it (`nvidia.com/gpu.present=true`, or a
      `nvidia.com/gpu.count` above 0): a GPU node whose device plugin is not running yet,
      or advertises its GPUs under a name of the site's choosing.

    A node with only a cloud's instance-type label is not one: the label says nothing of
    whether the GPU stack works there, and that is what the callers ask."""
    return _has(node, NVIDIA)


def is_accelerator_node(node: dict[str, Any]) -> bool:
    """The same rule for any vendor's accelerators (gpuctl.gpus.vendors): the node
    advertises one of a vendor's resources, or the vendor's feature discovery labelled it."""
    return any(_has(node, vendor) for vendor in VENDORS)


def has_accelerators_of(node: dict[str, Any], vendor: Vendor) -> bool:
    """The same rule for one vendor (is_gpu_node is NVIDIA's)."""
    return _has(node, vendor)


def _has(node: dict[str, Any], vendor: Vendor) -> bool:
    if vendor.labelled(labels_of(node)):
        return True
    return any(
        vendor.offers(k) and count(v) > 0
        for where in (capacity(node), allocatable(node))
        for k, v in where.items()
    )


def mig_reason(node: dict[str, Any]) -> str | None:
    """Why this node counts as a MIG node (None if it does not)."""
    labels, alloc = labels_of(node), allocatable(node)
    mig = sorted(k for k, v in alloc.items() if k.startswith(MIG_PREFIX) and count(v) > 0)
    if mig:
        return f"it advertises {mig[0]}"
    if labels.get(MIG_CONFIG) not in (None, "", "all-disabled"):
        return f"{MIG_CONFIG}={labels[MIG_CONFIG]}"
    if "-MIG-" in labels.get(GFD_PRODUCT_LABEL, ""):
        return f"{GFD_PRODUCT_LABEL}={labels[GFD_PRODUCT_LABEL]}"
    if labels.get(MIG_STRATEGY) in ("single", "mixed") and any(
        k.startswith(MIG_PREFIX) and k.endswith(".count") for k in labels
    ):
        return f"{MIG_STRATEGY}={labels[MIG_STRATEGY]} with MIG devices"
    return None


def gpus_of(node: dict[str, Any]) -> NodeGpus:
    """The node's GPUs, whatever labelled it (gpuctl.gpus.identity)."""
    cap = {k: count(v) for k, v in capacity(node).items() if is_gpu_resource(k)}
    alloc = {k: count(v) for k, v in allocatable(node).items() if is_gpu_resource(k)}
    return identify(labels_of(node), cap, alloc)


def inventory_of(
    node: dict[str, Any], pods: Iterable[dict[str, Any]], *, dra: DraSource | None = None
) -> NodeInventory:
    """The node's accelerators from every source, allocated to PODS (gpuctl.gpus.inventory)."""
    cap = {k: count(v) for k, v in capacity(node).items() if is_accelerator_resource(k)}
    alloc = {k: count(v) for k, v in allocatable(node).items() if is_accelerator_resource(k)}
    return node_inventory(name_of(node), labels_of(node), cap, alloc, pods, dra=dra)


def other_vendors(node: dict[str, Any]) -> str | None:
    """A node's accelerators in words when it has no NVIDIA GPU but another vendor's
    (`amd MI300X (amd.com/gpu)`); None for an NVIDIA GPU node, or one without accelerators."""
    if is_gpu_node(node):
        return None
    rows = [a for a in inventory_of(node, []).accelerators if a.vendor != NVIDIA.name]
    words = [
        f"{a.vendor} {a.model or 'accelerators'} ({a.resource or a.device_class})" for a in rows
    ]
    return ", ".join(dict.fromkeys(words)) or None


def models_by_node(nodes: Iterable[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Each node's other vendors' accelerator model as its labels name it (the identity
    resolver: `amd.com/gpu.product-name` → MI300X), by node name and vendor; a vendor whose
    devices on a node are of several models, or of none named, is left out."""
    out: dict[str, dict[str, str]] = {}
    for node in nodes:
        found: dict[str, set[str]] = {}
        for a in inventory_of(node, []).accelerators:
            if a.vendor != NVIDIA.name:
                found.setdefault(a.vendor, set()).add(a.model or "")
        named = {v: min(m) for v, m in found.items() if len(m) == 1 and "" not in m}
        if named and (name := name_of(node)):
            out[name] = named
    return out
