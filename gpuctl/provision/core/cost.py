"""The monthly cost estimate of a cluster spec, per component (network, control plane, node
groups, GPU stack), from the price table gpuctl ships (`gpuctl/data/ec2_gpu_prices.json`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from gpuctl.provision.core.spec import ClusterSpec

PRICE_TABLE = "ec2_gpu_prices.json"
NETWORK, CONTROL_PLANE, NODE_GROUPS, GPU_STACK = (
    "network",
    "control plane",
    "node groups",
    "GPU stack",
)
COMPONENTS = (NETWORK, CONTROL_PLANE, NODE_GROUPS, GPU_STACK)


@lru_cache(maxsize=1)
def price_table() -> dict[str, Any]:
    text = resources.files("gpuctl.data").joinpath(PRICE_TABLE).read_text("utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def price_source() -> str:
    t = price_table()
    return (
        f"{t['region']} On-Demand list prices as of {t['as_of']} ({t['source']}), from "
        f"gpuctl's table, not live. {t['note']}"
    )


def instance_price(instance_type: str) -> float | None:
    price: float | None = price_table()["prices"].get(instance_type)
    return price


def hours_per_month() -> int:
    hours: int = price_table()["hours_per_month"]
    return hours


@dataclass(frozen=True)
class CostItem:
    label: str  # what it is, e.g. "a100: 2–10 × p4d.24xlarge"
    priced: str  # the price table entry it uses (an instance type or a service)
    hourly_min: float | None  # None: not in the price table
    hourly_max: float | None
    # instances, at the group's min and max size (the label says them too, for the table)
    nodes_min: int | None = None
    nodes_max: int | None = None
    spot: bool = False


@dataclass
class ComponentCost:
    component: str
    items: list[CostItem] = field(default_factory=list)
    note: str = ""  # why there is nothing to pay for, where there is not

    def hourly(self, size: str) -> float | None:
        values = [i.hourly_min if size == "min" else i.hourly_max for i in self.items]
        if any(v is None for v in values):
            return None
        return round(sum(v for v in values if v is not None), 4)

    def monthly(self, size: str) -> float | None:
        hourly = self.hourly(size)
        return None if hourly is None else round(hourly * hours_per_month(), 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "monthly": {"min": self.monthly("min"), "max": self.monthly("max")},
            "hourly": {"min": self.hourly("min"), "max": self.hourly("max")},
            "items": [i.__dict__ for i in self.items],
            **({"note": self.note} if self.note else {}),
        }


def by_component(
    spec: ClusterSpec, group_prices: list[tuple[str, float | None]]
) -> list[ComponentCost]:
    """The cost of each component at every node group's min and at its max size."""
    services = price_table()["services"]
    network, control = ComponentCost(NETWORK), ComponentCost(CONTROL_PLANE)
    if spec.cluster.create:
        nat = services["nat_gateway"]["hourly"]
        network.items.append(CostItem("NAT gateway (one for the VPC)", "nat_gateway", nat, nat))
        eks = services["eks_cluster"]["hourly"]
        control.items.append(CostItem("EKS control plane", "eks_cluster", eks, eks))
        sys = spec.cluster.system_nodes
        price = instance_price(sys.instance_type)
        each = None if price is None else round(price * sys.count, 4)
        control.items.append(
            CostItem(
                f"system nodes: {sys.count} × {sys.instance_type}",
                sys.instance_type,
                each,
                each,
                nodes_min=sys.count,
                nodes_max=sys.count,
            )
        )
    else:
        network.note = f"the VPC of the existing cluster {spec.cluster.name!r}"
        control.note = f"the existing cluster {spec.cluster.name!r}"
    groups = ComponentCost(NODE_GROUPS)
    prices = dict(group_prices)
    for g in spec.node_groups:
        hourly = prices.get(g.name)
        groups.items.append(
            CostItem(
                f"{g.name}: {g.min_size}–{g.max_size} × {g.instance_type}"
                + (" (spot)" if g.capacity_type == "spot" else ""),
                g.instance_type,
                None if hourly is None else round(hourly * g.min_size, 4),
                None if hourly is None else round(hourly * g.max_size, 4),
                nodes_min=g.min_size,
                nodes_max=g.max_size,
                spot=g.capacity_type == "spot",
            )
        )
    stack = ComponentCost(
        GPU_STACK,
        note="nothing installed (gpu_stack: none)"
        if spec.gpu_stack == "none"
        else "runs on the nodes above; no instances of its own",
    )
    return [network, control, groups, stack]


def total(components: list[ComponentCost]) -> dict[str, Any]:
    """Hourly and monthly cost of all components at min and at max size (None when an
    item has no price)."""
    out = {}
    for size in ("min", "max"):
        hourly = [c.hourly(size) for c in components]
        known = all(h is not None for h in hourly)
        whole = sum(h for h in hourly if h is not None)
        out[size] = {
            "hourly": round(whole, 2) if known else None,
            "monthly": round(whole * hours_per_month(), 0) if known else None,
        }
    return out


def unpriced(components: list[ComponentCost]) -> list[str]:
    """A note for every item the price table has no price for."""
    return [
        f"{i.label}: no price for {i.priced} in gpuctl's price table; cost not estimated"
        for c in components
        for i in c.items
        if i.hourly_max is None
    ]
