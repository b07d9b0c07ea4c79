"""What Kueue's ClusterQueues hold and lend (`gpuctl quota list`) and whether their quotas
can be met by the nodes (`gpuctl quota lint`). Pure: ClusterQueues, ResourceFlavors and
nodes come in as the API returns them (v1beta2 or v1beta1: the fields read here are the
same but for the cohort's name).

Kueue records per ClusterQueue, flavor and resource the quota reserved by its workloads
(`status.flavorsReservation[].resources[].total`) and how much of it is borrowed from the
cohort (`.borrowed`); it does not record who lent it. Here the amount borrowed in a cohort
is shared among the queues with idle, lendable quota in proportion to that idle quota."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from gpuctl.common.quantity import from_api
from gpuctl.gpus.vendors import is_accelerator_resource, vendor_of
from gpuctl.k8s.nodes import GPU, allocatable, gpus_of, is_accelerator_node
from gpuctl.k8s.objects import labels_of, name_of
from gpuctl.quota.core import kueue_topology
from gpuctl.quota.core.kueue import format_quantity

Key = tuple[str, str]  # (flavor, resource)


def _name(obj: dict[str, Any]) -> str:
    return name_of(obj) or "?"


def cohort_of(cq: dict[str, Any]) -> str | None:
    spec = cq.get("spec") or {}
    return spec.get("cohortName") or spec.get("cohort") or None


def _amount(value: Any) -> Fraction | None:
    return None if value is None else from_api(value)


def quotas(cq: dict[str, Any]) -> dict[Key, dict[str, Fraction | None]]:
    """(flavor, resource) -> nominal, borrowingLimit, lendingLimit."""
    out: dict[Key, dict[str, Fraction | None]] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for f in group.get("flavors") or []:
            for r in f.get("resources") or []:
                out[(str(f.get("name")), str(r.get("name")))] = {
                    "nominal": _amount(r.get("nominalQuota")) or Fraction(0),
                    "borrowingLimit": _amount(r.get("borrowingLimit")),
                    "lendingLimit": _amount(r.get("lendingLimit")),
                }
    return out


def reserved(cq: dict[str, Any]) -> dict[Key, tuple[Fraction, Fraction]]:
    """(flavor, resource) -> (in use, borrowed): quota reserved by the queue's workloads,
    from status.flavorsReservation (status.flavorsUsage, admitted only, when absent)."""
    status = cq.get("status") or {}
    entries = status.get("flavorsReservation") or status.get("flavorsUsage") or []
    out: dict[Key, tuple[Fraction, Fraction]] = {}
    for f in entries:
        for r in f.get("resources") or []:
            out[(str(f.get("name")), str(r.get("name")))] = (
                _amount(r.get("total")) or Fraction(0),
                _amount(r.get("borrowed")) or Fraction(0),
            )
    return out


@dataclass(frozen=True)
class QueueRow:
    cluster_queue: str
    cohort: str | None
    flavor: str
    resource: str
    nominal: str
    in_use: str
    borrowed: str
    lent: str
    borrowing_limit: str | None
    lending_limit: str | None
    pending: int
    admitted: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _idle_lendable(q: dict[str, Fraction | None], used: Fraction) -> Fraction:
    idle = max((q["nominal"] or Fraction(0)) - used, Fraction(0))
    limit = q["lendingLimit"]
    return idle if limit is None else min(idle, limit)


def queue_rows(cluster_queues: list[dict[str, Any]]) -> list[QueueRow]:
    """One row per ClusterQueue, flavor and covered resource."""
    idle: dict[tuple[str, str, str], Fraction] = {}  # (cohort, flavor, resource) -> Σ idle
    borrowed: dict[tuple[str, str, str], Fraction] = {}  # -> Σ borrowed
    for cq in cluster_queues:
        cohort, usage = cohort_of(cq), reserved(cq)
        if cohort is None:
            continue
        for key, q in quotas(cq).items():
            used, took = usage.get(key, (Fraction(0), Fraction(0)))
            pool = (cohort, *key)
            idle[pool] = idle.get(pool, Fraction(0)) + _idle_lendable(q, used)
            borrowed[pool] = borrowed.get(pool, Fraction(0)) + took
    rows, filler = [], fillers(cluster_queues)
    for cq in sorted(cluster_queues, key=_name):
        cohort, usage, status = cohort_of(cq), reserved(cq), cq.get("status") or {}
        for (flavor, resource), q in quotas(cq).items():
            if (flavor, resource) in filler:
                continue
            used, took = usage.get((flavor, resource), (Fraction(0), Fraction(0)))
            lent = Fraction(0)
            pool = (cohort or "", flavor, resource)
            if cohort is not None and idle.get(pool):
                mine = _idle_lendable(q, used)
                lent = min(mine, borrowed[pool] * mine / idle[pool])

            def show(value: Fraction | None, resource: str = resource) -> str:
                return "-" if value is None else format_quantity(value, resource)

            rows.append(
                QueueRow(
                    cluster_queue=_name(cq),
                    cohort=cohort,
                    flavor=flavor,
                    resource=resource,
                    nominal=show(q["nominal"]),
                    in_use=show(used),
                    borrowed=show(took),
                    lent=show(lent),
                    borrowing_limit=None
                    if q["borrowingLimit"] is None
                    else show(q["borrowingLimit"]),
                    lending_limit=None if q["lendingLimit"] is None else show(q["lendingLimit"]),
                    pending=int(status.get("pendingWorkloads") or 0),
                    admitted=int(status.get("admittedWorkloads") or 0),
                )
            )
    return rows


# --- lint ---------------------------------------------------------------------------

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Finding:
    level: str
    message: str
    flavor: str | None = None
    resource: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CapacityRow:
    flavor: str
    resource: str
    nominal: str  # the sum over the ClusterQueues that use the flavor
    allocatable: str  # on the nodes the flavor selects
    queues: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def selects(flavor: dict[str, Any], node: dict[str, Any]) -> bool:
    """Whether a ResourceFlavor's nodeLabels all hold on the node (no nodeLabels: any)."""
    wanted = (flavor.get("spec") or {}).get("nodeLabels") or {}
    have = labels_of(node)
    return all(have.get(k) == v for k, v in wanted.items())


def _not_whole(node: dict[str, Any], resource: str) -> bool:
    """nvidia.com/gpu on this node is MIG slices (single strategy) or shared replicas."""
    if resource != GPU:
        return False
    g = gpus_of(node)
    return g.allocatable.get(GPU, 0) > 0 and g.whole_gpus == 0


def lint(
    cluster_queues: list[dict[str, Any]],
    flavors: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    topologies: list[dict[str, Any]] | None = None,
) -> tuple[list[CapacityRow], list[Finding]]:
    """For each flavor and GPU resource (nvidia.com/*): the nominal quotas of all
    ClusterQueues against what the flavor's nodes have allocatable. Errors: quota that can
    never be satisfied (a missing flavor, a flavor that selects no node, a queue's nominal
    quota above the nodes' capacity, nominal quotas that add up to more than it, a flavor
    naming a Topology that does not exist among TOPOLOGIES, None: Kueue serves none).
    Warnings: GPUs in no queue's nominal quota, which Kueue admits nothing onto; a flavor
    with no topology on nodes with network topology labels."""
    by_name = {_name(f): f for f in flavors}
    nominal: dict[Key, Fraction] = {}
    users: dict[Key, list[str]] = {}
    findings: list[Finding] = []
    for cq in sorted(cluster_queues, key=_name):
        for flavor in sorted({f for f, _ in quotas(cq)} - set(by_name)):
            findings.append(
                Finding(
                    ERROR,
                    f"ClusterQueue {_name(cq)} has quota on flavor {flavor}, which does not "
                    "exist: Kueue admits nothing against it",
                    flavor,
                )
            )
        for (flavor, resource), q in quotas(cq).items():
            if flavor not in by_name or not is_accelerator_resource(resource):
                continue
            nominal[(flavor, resource)] = nominal.get((flavor, resource), Fraction(0)) + (
                q["nominal"] or Fraction(0)
            )
            users.setdefault((flavor, resource), []).append(_name(cq))
    gpu_nodes = [n for n in nodes if is_accelerator_node(n)]
    capacity = {
        (flavor, resource): sum(
            (
                from_api(allocatable(n).get(resource, 0)) or Fraction(0)
                for n in gpu_nodes
                if selects(by_name[flavor], n)
            ),
            Fraction(0),
        )
        for flavor, resource in nominal
    }
    filler = fillers(cluster_queues, capacity)
    rows: list[CapacityRow] = []
    for flavor, resource in sorted(set(nominal) - filler):
        members = [n for n in gpu_nodes if selects(by_name[flavor], n)]
        have, want = capacity[(flavor, resource)], nominal[(flavor, resource)]
        queues = users[(flavor, resource)]
        rows.append(
            CapacityRow(
                flavor,
                resource,
                format_quantity(want, resource),
                format_quantity(have, resource),
                len(queues),
            )
        )
        split = sorted(_name(n) for n in members if _not_whole(n, resource))
        if split and want:
            findings.append(
                Finding(
                    WARNING,
                    f"flavor {flavor}: {resource} on {', '.join(split[:3])}"
                    f"{' and more' if len(split) > 3 else ''} counts MIG slices or "
                    "time-shared replicas, not whole GPUs",
                    flavor,
                    resource,
                )
            )
        if not members and want:
            findings.append(
                Finding(
                    ERROR,
                    f"flavor {flavor} selects no GPU node "
                    f"({_node_labels(by_name[flavor])}): the {format_quantity(want, resource)} "
                    f"{resource} of {', '.join(queues)} can never be used",
                    flavor,
                    resource,
                )
            )
            continue
        if want and not have:
            findings.append(
                Finding(
                    ERROR,
                    f"no node of flavor {flavor} has {resource} allocatable: the quota of "
                    f"{', '.join(queues)} on it can never be used",
                    flavor,
                    resource,
                )
            )
            continue
        for cq in sorted(cluster_queues, key=_name):
            mine = quotas(cq).get((flavor, resource))
            if mine is not None and (mine["nominal"] or 0) > have:
                findings.append(
                    Finding(
                        ERROR,
                        f"ClusterQueue {_name(cq)}: nominal {format_quantity(mine['nominal'] or Fraction(0), resource)} "
                        f"{resource} on flavor {flavor}, but its nodes have "
                        f"{format_quantity(have, resource)}: it can never be satisfied",
                        flavor,
                        resource,
                    )
                )
        if want > have:
            findings.append(
                Finding(
                    ERROR,
                    f"nominal quotas on flavor {flavor} add up to {format_quantity(want, resource)} "
                    f"{resource} ({', '.join(queues)}), its nodes have "
                    f"{format_quantity(have, resource)}: {format_quantity(want - have, resource)} "
                    "can never be satisfied at once",
                    flavor,
                    resource,
                )
            )
        elif have > want:
            findings.append(
                Finding(
                    WARNING,
                    f"{format_quantity(have - want, resource)} of the {format_quantity(have, resource)} "
                    f"{resource} on flavor {flavor} are in no ClusterQueue's nominal quota: "
                    "Kueue admits no workload onto them",
                    flavor,
                    resource,
                )
            )
    findings += topology_findings(sorted({f for f, _ in nominal}), by_name, gpu_nodes, topologies)
    used_flavors = [by_name[f] for f in {f for f, _ in nominal}]
    outside = [_name(n) for n in gpu_nodes if not any(selects(f, n) for f in used_flavors)]
    if outside and cluster_queues:
        findings.append(
            Finding(
                WARNING,
                f"{len(outside)} GPU node(s) match no flavor with GPU quota "
                f"({', '.join(sorted(outside)[:5])}{' …' if len(outside) > 5 else ''}): "
                "their GPUs are outside every ClusterQueue",
            )
        )
    return rows, findings


def fillers(
    cluster_queues: list[dict[str, Any]], capacity: dict[Key, Fraction] | None = None
) -> set[Key]:
    """The (flavor, resource) quotas that are their resource group's filler, left out of
    `quota list` and `quota lint`. Each flavor of a group must list every resource the group
    covers (ResourceGroup.flavors, kubernetes-sigs/kueue apis/kueue/v1beta1/
    clusterqueue_types.go), so one group covering every vendor's accelerator (as `quota set`
    writes it) lists, on one vendor's flavor, the others' at nominalQuota 0. Kueue counts a
    resource so listed as covered, with 0: a workload asking for it from that flavor is
    admitted only by borrowing the same (flavor, resource) from its cohort (a resource no
    group lists is "unavailable in ClusterQueue"). Filler, then: another vendor's
    accelerator than the flavor's (the vendors some ClusterQueue gives nominal quota of on
    it, or its nodes have; CAPACITY: (flavor, resource) → allocatable, where known), which
    no ClusterQueue gives quota, a borrowing or lending limit, or uses: there is nothing to
    borrow and nothing held. A flavor of no known vendor has no filler: its zeros show."""
    vendors: dict[str, set[str]] = {}  # flavor → the vendors it offers
    given: set[Key] = set()  # what some ClusterQueue gives, limits or uses
    for cq in cluster_queues:
        usage = reserved(cq)
        for key, q in quotas(cq).items():
            vendor = vendor_of(key[1])
            if vendor is None:
                continue
            if q["nominal"]:
                vendors.setdefault(key[0], set()).add(vendor.name)
            if q["nominal"] or q["borrowingLimit"] or q["lendingLimit"] or any(usage.get(key, ())):
                given.add(key)
    for (flavor, resource), have in (capacity or {}).items():
        if have and (vendor := vendor_of(resource)) is not None:
            vendors.setdefault(flavor, set()).add(vendor.name)
    return {
        (flavor, resource)
        for cq in cluster_queues
        for flavor, resource in quotas(cq)
        if (vendor := vendor_of(resource)) is not None
        and vendors.get(flavor)
        and vendor.name not in vendors[flavor]
        and (flavor, resource) not in given
    }


def topology_findings(
    names: list[str],
    by_name: dict[str, dict[str, Any]],
    gpu_nodes: list[dict[str, Any]],
    topologies: list[dict[str, Any]] | None,
) -> list[Finding]:
    """The flavors NAMES (with GPU quota) whose Topology is missing, and those without one
    whose nodes carry network topology labels, which Kueue then cannot keep a gang within."""
    out = []
    known = None if topologies is None else {_name(t) for t in topologies}
    for name in names:
        flavor = by_name[name]
        tied = (flavor.get("spec") or {}).get("topologyName")
        if tied and (known is None or tied not in known):
            out.append(Finding(ERROR, f"flavor {name} names Topology {tied}, which does not exist: Kueue admits nothing onto it", name))  # fmt: skip
            continue
        members = [n for n in gpu_nodes if selects(flavor, n)]
        network = kueue_topology.network_levels(kueue_topology.levels_of(members))
        if not tied and network:
            out.append(
                Finding(
                    WARNING,
                    f"flavor {name} has no topologyName, but its nodes carry "
                    f"{', '.join(network)}: Kueue cannot keep a gang within one block or "
                    "spine (`gpuctl quota set` ties the flavor to a Topology of them)",
                    name,
                )
            )
    return out


def _node_labels(flavor: dict[str, Any]) -> str:
    labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "no nodeLabels"


def has_errors(findings: list[Finding]) -> bool:
    return any(f.level == ERROR for f in findings)
