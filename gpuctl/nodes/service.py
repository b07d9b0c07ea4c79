"""`gpuctl nodes`: reads the nodes and the pods bound to them, once each, and DRA's classes,
slices and claims where the cluster serves resource.k8s.io, and hands them to the pure
listing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuctl.common import selector
from gpuctl.gpus.accelerators import NodeInventory
from gpuctl.k8s.objects import labels_of
from gpuctl.nodes.core.listing import inventories

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube

# Pods on a node that still hold its resources: the server leaves the others out (the
# listing checks again: not every server applies field selectors)
BOUND = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def inventory(kube: Kube, selector_text: str | None, everything: bool) -> list[NodeInventory]:
    """The inventory of the nodes SELECTOR_TEXT selects (all when None)."""
    wanted = selector.parse(selector_text) if selector_text is not None else ()
    nodes = kube.list_objects("Node", selector=selector_text or None)
    nodes = [n for n in nodes if selector.matches(wanted, labels_of(n))]
    pods = kube.list_objects("Pod", field_selector=BOUND) if nodes else []
    return inventories(nodes, pods, everything=everything, dra=kube.dra() if nodes else None)
