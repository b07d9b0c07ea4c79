"""`gpuctl nodes --topology`, the pure part: the nodes' inventories grouped by each topology
label they carry (gpuctl.gpus.topology.LEVELS, widest first), with the accelerators and whole
free nodes of each domain: where a gang has room. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuctl.common.ordering import natural_key
from gpuctl.gpus.accelerators import Accelerator, NodeInventory
from gpuctl.gpus.topology import LEVELS, name_of


@dataclass(frozen=True)
class Pool:
    """One kind of accelerator in a domain, summed over its nodes."""

    vendor: str
    model: str | None
    resource: str | None
    count: int = 0
    allocated: int = 0
    free: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Domain:
    """One value of a topology label: its nodes, those with every accelerator free (what a
    gang of whole nodes needs), and its accelerators."""

    key: str
    value: str
    nodes: tuple[str, ...]
    free_nodes: tuple[str, ...]
    pools: tuple[Pool, ...]

    @property
    def name(self) -> str | None:
        return name_of(self.key)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "value": self.value,
            "nodes": list(self.nodes),
            "free_nodes": list(self.free_nodes),
            "accelerators": [p.to_dict() for p in self.pools],
        }


def levels(found: Sequence[NodeInventory]) -> list[str]:
    """The topology labels the nodes carry, widest first."""
    seen = {key for node in found for key in node.topology}
    return [key for key in LEVELS if key in seen]


def domains(found: Sequence[NodeInventory]) -> list[Domain]:
    """Every domain of every level the nodes carry, level by level (widest first), domains
    in natural order of their values."""
    out = []
    for key in levels(found):
        members: dict[str, list[NodeInventory]] = {}
        for node in found:
            if key in node.topology:
                members.setdefault(node.topology[key], []).append(node)
        for value in sorted(members, key=natural_key):
            nodes = members[value]
            out.append(
                Domain(
                    key,
                    value,
                    tuple(n.name for n in nodes),
                    tuple(n.name for n in nodes if _all_free(n)),
                    _pools(a for n in nodes for a in n.accelerators),
                )
            )
    return out


def _all_free(node: NodeInventory) -> bool:
    usable = [a for a in node.accelerators if a.count - a.unhealthy > 0]
    return bool(usable) and all(a.allocated == 0 for a in usable)


def _pools(accelerators: Iterable[Accelerator]) -> tuple[Pool, ...]:
    sums: dict[tuple[str, str | None, str | None], list[int]] = {}
    for a in accelerators:
        kind = (a.vendor, a.model, a.resource or a.device_class)
        total = sums.setdefault(kind, [0, 0, 0])
        total[0] += a.count
        total[1] += a.allocated
        total[2] += a.free
    return tuple(Pool(*kind, *total) for kind, total in sums.items())
