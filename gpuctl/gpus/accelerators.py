"""The vendor-neutral inventory model: what accelerators a node offers, through which source,
and how many of them are allocated and free. One model for every vendor and source: the
device-plugin readers (gpuctl.gpus.device_plugins) and DRA (a DraSource) each make
`Accelerator`s, and gpuctl.gpus.inventory puts a node's together. Pure.

`Accelerator.to_dict` is the JSON every command shows an accelerator as (`gpuctl nodes -o
json`; docs/nodes.md is its contract): its field names are stable, new fields may be added."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

DEVICE_PLUGIN = "device-plugin"
DRA = "dra"


@dataclass(frozen=True)
class Accelerator:
    """One kind of device a node offers through one source."""

    vendor: str  # gpuctl.gpus.vendors: nvidia, amd, aws, google, intel; "unknown"
    model: str | None  # canonical short name (H100-80GB, MI300X, Trainium2); None: unknown
    product: str | None  # the name as the source wrote it (GFD's product, a productName)
    # devices of this kind: the units of `resource` (MIG slices, partitions and time-shared
    # replicas count as devices of their kind) or of the DRA devices listed
    count: int
    memory_bytes: int | None  # per device
    source: str  # DEVICE_PLUGIN | DRA
    resource: str | None = None  # device plugin: the extended resource
    device_class: str | None = None  # DRA: the DeviceClass that selects these devices
    driver: str | None = None  # DRA: the driver that publishes them
    # MIG profile (1g.10gb), AMD compute/memory partition (cpx_nps4), neuroncore, TPU topology
    partition: str | None = None
    sharing: str | None = None  # time-slicing | mps | None; each GPU is `replicas` devices
    replicas: int = 1
    allocated: int = 0  # held by the pods bound to the node, or by allocated claims
    unhealthy: int = 0  # capacity less allocatable, or tainted / unhealthy DRA devices
    devices: tuple[str, ...] = ()  # DRA: the devices' names; device plugin: () (unknown)
    scheme: str | None = None  # what named the model: a label scheme (gfd, karpenter, …), dra
    # DRA: devices no claim holds whose shared counters (KEP-4815) others have used up
    blocked: int = 0

    @property
    def free(self) -> int:
        return max(self.count - self.unhealthy - self.allocated - self.blocked, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "vendor": self.vendor,
            "model": self.model,
            "product": self.product,
            "count": self.count,
            "memory_bytes": self.memory_bytes,
            "source": self.source,
            "resource": self.resource,
            "device_class": self.device_class,
            "partition": self.partition,
            "sharing": self.sharing,
            "replicas": self.replicas,
            "allocated": self.allocated,
            "free": self.free,
            "unhealthy": self.unhealthy,
            "blocked": self.blocked,
            "devices": list(self.devices),
            "driver": self.driver,
            "scheme": self.scheme,
        }


@dataclass(frozen=True)
class NodeInventory:
    """One node's accelerators, from every source, and what is wrong with how it offers them."""

    name: str
    accelerators: tuple[Accelerator, ...]
    problems: tuple[str, ...] = ()
    topology: Mapping[str, str] = field(default_factory=dict)  # domain label → value

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "accelerators": [a.to_dict() for a in self.accelerators],
            "problems": list(self.problems),
            "topology": dict(self.topology),
        }


class DraSource(Protocol):
    """The accelerators DRA publishes (ResourceSlices, with their claims' allocations),
    handed to gpuctl.gpus.inventory.node_inventory beside the device plugins' resources."""

    def accelerators(self, node: str) -> tuple[Accelerator, ...]:
        """NODE's DRA devices as Accelerators (source DRA), allocated counted."""
        ...

    def problems(self, node: str) -> tuple[str, ...]:
        """What is wrong with how NODE's devices are published."""
        ...
