"""Will a job fit on the cluster? Per GPU node, how many of its workers fit now and on an
empty node, by the scheduler's rules: allocatable, taints and tolerations, cordons. Pure:
works on nodes and pods as the API returns them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuctl.common.quantity import count
from gpuctl.gpus.resources import DONE_PHASES, requested
from gpuctl.k8s.nodes import allocatable, gpus_of, is_gpu_node, labels_of, taints
from gpuctl.k8s.placement import Placement, terms_match


@dataclass(frozen=True)
class NodeFit:
    name: str
    gpu_type: str | None  # the node's GPU in words (gpuctl.gpus.identity)
    allocatable: int  # of the job's GPU resource
    free: int
    slots_now: int  # workers that fit now
    slots_ever: int  # workers that fit on an empty node
    reason: str


@dataclass(frozen=True)
class FitReport:
    resource: str | None
    per_worker: int
    workers: int
    nodes: tuple[NodeFit, ...]
    wanted: str = ""  # the GPU the job's affinity selects, in words ("" any)
    refusal: str = ""  # why nodes of that GPU do not count (MIG slices, shared replicas)

    @property
    def can_ever_fit(self) -> bool:
        return self.resource is None or sum(n.slots_ever for n in self.nodes) >= self.workers

    def never_fits_reason(self) -> str:
        slots = sum(n.slots_ever for n in self.nodes)
        where = f"nodes with {self.wanted}" if self.wanted else "GPU nodes"
        need = f"{self.workers} × " if self.workers > 1 else ""
        also = f"; {self.refusal}" if self.refusal else ""
        return (
            f"needs {need}{self.per_worker} {self.resource}; {where} have room for "
            f"{slots} worker{'s' if slots != 1 else ''} at most{also}"
        )

    @property
    def fits_now(self) -> bool:
        return self.resource is None or sum(n.slots_now for n in self.nodes) >= self.workers


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
) -> FitReport:
    """Per GPU node: how many workers asking for WHERE's resource, on the nodes its
    affinity selects, fit now and on an empty node, and why not."""
    resource, per_worker = where.resource, where.per_worker
    if resource is None:
        return FitReport(None, 0, workers, ())
    used: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in DONE_PHASES:
            used[node] = used.get(node, 0) + requested(pod, resource)
    out = []
    for node in nodes:
        if not is_gpu_node(node):
            continue
        spec = node.get("spec") or {}
        name = (node.get("metadata") or {}).get("name", "?")
        gpus = gpus_of(node)
        gpu_type = gpus.name
        alloc = count(allocatable(node).get(resource, 0))
        free = max(alloc - used.get(name, 0), 0)
        reason = ""
        untolerated = [t for t in taints(node) if not tolerates(t, tolerations)]
        if not terms_match(labels_of(node), where.terms):
            reason = f"not {where.wanted}" if where.wanted else "outside the job's node affinity"
        elif alloc == 0:
            unhealthy = gpus.unhealthy.get(resource)
            reason = f"no {resource}" + (f" ({unhealthy} unhealthy)" if unhealthy else "")
            if not gpus.plugin_running:
                reason += " (the device plugin advertises no GPUs yet)"
        elif alloc < per_worker:
            reason = f"{alloc} {resource}, a worker needs {per_worker}"
        elif untolerated:
            t = untolerated[0]
            reason = f"taint {t.get('key')}={t.get('value', '')}:{t.get('effect')} not tolerated"
        elif spec.get("unschedulable"):
            reason = "cordoned"
        if reason:
            out.append(NodeFit(name, gpu_type, alloc, free, 0, 0, reason))
            continue
        now = free // per_worker
        reason = f"{free} of {alloc} free" + ("" if now else f", a worker needs {per_worker}")
        out.append(NodeFit(name, gpu_type, alloc, free, now, alloc // per_worker, reason))
    return FitReport(resource, per_worker, workers, tuple(out), where.wanted, where.refusal)
