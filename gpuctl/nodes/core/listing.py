"""`gpuctl nodes`, the pure part: the nodes and pods as read in → each node's inventory, in
the order people read node names. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuctl.common.ordering import natural_key
from gpuctl.gpus.accelerators import DraSource, NodeInventory
from gpuctl.k8s.nodes import inventory_of, is_accelerator_node
from gpuctl.k8s.objects import name_of


def inventories(
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]],
    *,
    everything: bool = False,
    dra: DraSource | None = None,
) -> list[NodeInventory]:
    """Each accelerator node's inventory (EVERYTHING: every node's, none on a node without
    accelerators), its allocations counted from PODS, with DRA's devices when given."""
    bound: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        bound.setdefault(str((pod.get("spec") or {}).get("nodeName") or ""), []).append(pod)
    shown = [
        n
        for n in nodes
        if everything
        or is_accelerator_node(n)
        or (dra is not None and dra.accelerators(name_of(n)))
    ]
    shown.sort(key=lambda n: natural_key(name_of(n)))
    return [inventory_of(n, bound.get(name_of(n), []), dra=dra) for n in shown]
