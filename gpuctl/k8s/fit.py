"""Will a job fit on the cluster? Per GPU node, how many of its workers fit now and on an
empty node, by the scheduler's rules: allocatable, taints and tolerations, cordons; and, for
a job whose workers must share one domain of a topology label, per domain. Pure: works on
nodes and pods as the API returns them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gpuctl.common.quantity import count
from gpuctl.gpus.resources import DONE_PHASES, requested
from gpuctl.gpus.vendors import NVIDIA, Vendor, vendor_of
from gpuctl.k8s.nodes import allocatable, gpus_of, has_accelerators_of, inventory_of, taints
from gpuctl.k8s.objects import labels_of, name_of
from gpuctl.k8s.placement import Placement, terms_match


@dataclass(frozen=True)
class NodeFit:
    name: str
    gpu_type: str | None  # the node's accelerator in words (its model, else its product)
    allocatable: int  # of the job's GPU resource
    free: int
    slots_now: int  # workers that fit now
    slots_ever: int  # workers that fit on an empty node
    reason: str


@dataclass(frozen=True)
class DomainFit:
    """One value of a topology label: its usable nodes, their free units of the job's
    resource, and the workers they hold now and when empty."""

    value: str
    nodes: tuple[str, ...]
    free: int
    slots_now: int
    slots_ever: int


@dataclass(frozen=True)
class FitReport:
    resource: str | None
    per_worker: int
    workers: int
    nodes: tuple[NodeFit, ...]
    wanted: str = ""  # the GPU the job's affinity selects, in words ("" any)
    refusal: str = ""  # why nodes of that GPU do not count (MIG slices, shared replicas)
    extra: tuple[tuple[str, int], ...] = ()  # other resources a worker needs (EFA, hugepages)
    # the workers must share one domain of this label (None: any nodes); "within one … domain"
    key: str | None = None
    within: str = ""
    domains: tuple[DomainFit, ...] = ()  # the key's domains, the roomiest first

    @property
    def can_ever_fit(self) -> bool:
        if self.resource is None:
            return True
        if self.key is not None:
            return any(d.slots_ever >= self.workers for d in self.domains)
        return sum(n.slots_ever for n in self.nodes) >= self.workers

    def never_fits_reason(self) -> str:
        if self.key is not None:
            return self._no_domain_reason()
        slots = sum(n.slots_ever for n in self.nodes)
        where = f"nodes with {self.wanted}" if self.wanted else "GPU nodes"
        need = f"{self.workers} × " if self.workers > 1 else ""
        also = f"; {self.refusal}" if self.refusal else ""
        extra = "".join(f" + {n} {name}" for name, n in self.extra)
        return (
            f"needs {need}{self.per_worker} {self.resource}{extra}; {where} have room for "
            f"{slots} worker{'s' if slots != 1 else ''} at most{also}"
        )

    def _no_domain_reason(self) -> str:
        extra = "".join(f" + {n} {name}" for name, n in self.extra)
        need = f"needs {self.workers} × {self.per_worker} {self.resource}{extra} {self.within}"
        best = self.domains[0] if self.domains else None
        if best is None or best.slots_ever == 0:
            return f"{need}; no node with room for a worker carries {self.key}"
        nodes = f"{len(best.nodes)} node{'s' if len(best.nodes) != 1 else ''}"
        return (
            f"{need}; the largest has room for {best.slots_ever} "
            f"({best.value}: {nodes}, {best.free} free)"
        )

    @property
    def fits_now(self) -> bool:
        if self.resource is None:
            return True
        if self.key is not None:
            return any(d.slots_now >= self.workers for d in self.domains)
        return sum(n.slots_now for n in self.nodes) >= self.workers

    def waiting_reason(self) -> str:
        """Why a job that can fit does not now: what must be free, and where."""
        need = f"{self.workers} × {self.per_worker} {self.resource}"
        roomy = [d for d in self.domains if d.slots_ever >= self.workers]
        if self.key is None or not roomy:
            return f"{need} are not free right now"
        best = max(roomy, key=lambda d: (d.slots_now, d.free))
        return (
            f"no {self.key} domain has room for {need} now; {best.value} will when work "
            f"running there ends (room for {best.slots_now} now)"
        )


def by_domain(report: FitReport, nodes: list[dict[str, Any]], key: str, within: str) -> FitReport:
    """REPORT for workers that must share one domain of label KEY (WITHIN: that in words):
    its nodes summed per value of KEY; nodes without it hold none of them."""
    value_of = {name_of(n): labels_of(n).get(key) for n in nodes}
    groups: dict[str, list[NodeFit]] = {}
    for fit in report.nodes:
        value = value_of.get(fit.name)
        if value is not None:
            groups.setdefault(value, []).append(fit)
    domains = [
        DomainFit(
            value,
            tuple(f.name for f in fits),
            sum(f.free for f in fits if f.slots_ever),
            sum(f.slots_now for f in fits),
            sum(f.slots_ever for f in fits),
        )
        for value, fits in groups.items()
    ]
    domains.sort(key=lambda d: (-d.slots_ever, -d.slots_now, d.value))
    return dataclasses.replace(report, key=key, within=within, domains=tuple(domains))


def tolerates(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    if taint.get("effect") == "PreferNoSchedule":
        return True
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def keeps_out_plain_pods(node: dict[str, Any]) -> bool:
    """A taint that a pod with no tolerations does not tolerate (NoSchedule, NoExecute)."""
    return any(not tolerates(t, []) for t in taints(node))


def check_fit(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    where: Placement,
    workers: int,
    tolerations: list[dict[str, Any]],
    extra: tuple[tuple[str, str], ...] = (),
    node_selector: tuple[tuple[str, str], ...] = (),
) -> FitReport:
    """Per node with the vendor's accelerators (GPU nodes for NVIDIA's): how many workers
    asking for WHERE's resource, on the nodes its
    affinity selects, fit now and on an empty node, and why not. Besides the GPU resource,
    a worker needs EXTRA (other extended resources, huge pages: name and quantity), each
    counted as the scheduler counts it, on a node whose labels match NODE_SELECTOR."""
    resource, per_worker = where.resource, where.per_worker
    if resource is None:
        return FitReport(None, 0, workers, ())
    needs = tuple((name, count(amount)) for name, amount in extra if count(amount) > 0)
    wanted = (resource, *(name for name, _ in needs))
    used: dict[tuple[str, str], int] = {}  # (node, resource) -> requested by its pods
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in DONE_PHASES:
            for r in wanted:
                used[node, r] = used.get((node, r), 0) + requested(pod, r)
    out = []
    vendor = vendor_of(resource) or NVIDIA
    kind = "GPUs" if vendor is NVIDIA else "devices"
    for node in nodes:
        if not has_accelerators_of(node, vendor):
            continue
        spec = node.get("spec") or {}
        name = name_of(node) or "?"
        gpu_type, unhealthy, running = _accelerator_on(node, resource, vendor)
        alloc = count(allocatable(node).get(resource, 0))
        free = max(alloc - used.get((name, resource), 0), 0)
        reason = ""
        untolerated = [t for t in taints(node) if not tolerates(t, tolerations)]
        labels = labels_of(node)
        unmatched = [(k, v) for k, v in node_selector if labels.get(k) != v]
        short = [(r, n, count(allocatable(node).get(r, 0))) for r, n in needs]
        short = [(r, n, have) for r, n, have in short if have < n]
        if not terms_match(labels, where.terms):
            reason = f"not {where.wanted}" if where.wanted else "outside the job's node affinity"
        elif unmatched:
            k, v = unmatched[0]
            reason = f"node_selector {k}={v}: the node has {k}={labels.get(k, '(none)')}"
        elif alloc == 0:
            reason = f"no {resource}" + (f" ({unhealthy} unhealthy)" if unhealthy else "")
            if not running:
                reason += f" (the device plugin advertises no {kind} yet)"
        elif alloc < per_worker:
            reason = f"{alloc} {resource}, a worker needs {per_worker}"
        elif untolerated:
            t = untolerated[0]
            reason = f"taint {t.get('key')}={t.get('value', '')}:{t.get('effect')} not tolerated"
        elif short:
            r, n, have = short[0]
            reason = f"{have} {r}, a worker needs {n}" if have else f"no {r}"
        elif spec.get("unschedulable"):
            reason = "cordoned"
        if reason:
            out.append(NodeFit(name, gpu_type, alloc, free, 0, 0, reason))
            continue
        now, ever = free // per_worker, alloc // per_worker
        reason = f"{free} of {alloc} free" + ("" if now else f", a worker needs {per_worker}")
        for r, n in needs:  # every other resource bounds the workers too
            have = count(allocatable(node).get(r, 0))
            spare = max(have - used.get((name, r), 0), 0)
            if spare // n < now:
                now = spare // n
                reason = f"{spare} of {have} {r} free, a worker needs {n}"
            ever = min(ever, have // n)
        out.append(NodeFit(name, gpu_type, alloc, free, now, ever, reason))
    return FitReport(resource, per_worker, workers, tuple(out), where.wanted, where.refusal, needs)


def _accelerator_on(
    node: dict[str, Any], resource: str, vendor: Vendor
) -> tuple[str | None, int, bool]:
    """(the node's accelerator in words, its RESOURCE units the device plugin marks
    unhealthy, whether the plugin advertises any of VENDOR's devices)."""
    if vendor is NVIDIA:
        gpus = gpus_of(node)
        return gpus.name, gpus.unhealthy.get(resource, 0), gpus.plugin_running
    rows = [a for a in inventory_of(node, []).accelerators if a.vendor == vendor.name]
    mine = next((a for a in rows if a.resource == resource), None)
    named = next((a.model or a.product for a in rows if a.model or a.product), None)
    return named, mine.unhealthy if mine else 0, any(a.count for a in rows)
