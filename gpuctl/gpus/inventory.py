"""A node's accelerators from every source, allocated and free: THE inventory `gpuctl nodes`
shows and every capability reads (gpuctl.k8s.nodes.inventory_of hands it a node as the API
returns it). Pure.

Sources: the device plugins' extended resources (gpuctl.gpus.device_plugins, one reader per
vendor), allocated counted from the pods bound to the node that are not finished, as
gpuctl.gpus.resources counts their requests (init containers included); and DRA, when a
DraSource is given (its devices, allocated by their claims). The problems it names: a
vendor's accelerators offered through both sources, and accelerators the node is labelled
with that no source offers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from gpuctl.gpus import device_plugins, resources, topology
from gpuctl.gpus.accelerators import DraSource, NodeInventory


def node_inventory(
    name: str,
    labels: Mapping[str, str],
    capacity: Mapping[str, int],
    allocatable: Mapping[str, int],
    pods: Iterable[dict[str, Any]],
    *,
    dra: DraSource | None = None,
) -> NodeInventory:
    """The accelerators of node NAME, with these labels and accelerator resource counts,
    allocated to PODS (those bound to other nodes, or finished, are left out)."""
    held: dict[str, int] = {}
    for pod in pods:
        if resources.holds(pod, name):
            for resource, n in resources.accelerators_requested(pod).items():
                held[resource] = held.get(resource, 0) + n
    found, problems = device_plugins.advertised(labels, capacity, allocatable)
    plugin = [replace(a, allocated=held.get(a.resource or "", 0)) for a in found]
    claimed = dra.accelerators(name) if dra is not None else ()
    problems += dra.problems(name) if dra is not None else ()
    through_dra = {a.vendor: a for a in claimed if a.count}
    for a in plugin:
        other = through_dra.get(a.vendor)
        if a.count and other:
            problems.append(
                f"{a.resource} from both the device plugin and DRA "
                f"({other.device_class or other.driver})"
            )
    # a DRA node's feature-discovery labels are no device plugin's missing devices
    plugin = [a for a in plugin if a.count or a.vendor not in through_dra]
    problems += [
        f"labelled with {a.vendor} accelerators, but no device plugin advertises {a.resource}"
        for a in plugin
        if not a.count
    ]
    return NodeInventory(
        name, (*plugin, *claimed), tuple(dict.fromkeys(problems)), topology.placed(labels)
    )
