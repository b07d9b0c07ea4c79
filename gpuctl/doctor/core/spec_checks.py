"""Can gpuctl's jobs land on a node? `gpuctl doctor --spec`: each job spec's GPU request,
placed as `submit` places it (gpuctl.k8s.placement, the label scheme detected from the
nodes), matched against the nodes: a node is selected when it meets the affinity and
offers the resource (advertised, even if unhealthy or full now). And the pending pods of
jobs gpuctl submitted whose nodeSelector / required node affinity selects no node."""

from __future__ import annotations

from collections import Counter
from typing import Any

from gpuctl.common.quantity import count
from gpuctl.doctor.core.checks import FAIL, PASS, WARN, Check, _name, _names, namespaced_name
from gpuctl.gpus.vendors import NVIDIA, vendor_of
from gpuctl.k8s.nodes import allocatable, capacity, gpus_of, has_accelerators_of, is_gpu_node
from gpuctl.k8s.objects import labels_of
from gpuctl.k8s.placement import GpuRequest, Placement, place, terms_match
from gpuctl.k8s.selectors import pod_may_run_on

NAME = "job-spec"
PENDING = "pending-pods"


def selected(nodes: list[dict[str, Any]], where: Placement) -> list[str]:
    """The accelerator nodes (of WHERE's resource's vendor; GPU nodes for none) WHERE's
    affinity selects that offer its resource."""
    vendor = (vendor_of(where.resource) if where.resource else None) or NVIDIA
    out = []
    for n in nodes:
        if not has_accelerators_of(n, vendor) or not terms_match(labels_of(n), where.terms):
            continue
        if where.resource is None or any(
            count(amounts.get(where.resource, 0)) for amounts in (capacity(n), allocatable(n))
        ):
            out.append(_name(n))
    return out


def offered(nodes: list[dict[str, Any]]) -> str:
    """What the GPU nodes have, e.g. `A100-80GB (4 nodes), L4 MIG single: 1g.6gb × 4 (1 node)`."""
    counts = Counter(_offer(n) for n in nodes if is_gpu_node(n))
    if not counts:
        return "there is no GPU node"
    listed = ", ".join(
        f"{what} ({k} node{'s' if k != 1 else ''})" for what, k in sorted(counts.items())
    )
    return "the GPU nodes have " + listed


def _offer(node: dict[str, Any]) -> str:
    g = gpus_of(node)
    what = g.name or "an unknown GPU"
    if g.mig_slices:
        what += f" MIG {g.mig_strategy} " + ", ".join(sorted(g.mig_slices))
    if g.sharing != "none":
        what += f" {g.sharing}"
    return what


def _asked(request: GpuRequest) -> str:
    if request.accelerator is not None:
        return f"accelerator {request.accelerator.wanted}"
    parts = []
    if request.gpu_types:
        parts.append("gpu_type " + ", ".join(request.gpu_types))
    if request.mig:
        parts.append(f"mig {request.mig}")
    elif request.shared:
        parts.append("shared")
    return " ".join(parts) or f"{request.gpus} GPU(s)"


def check_spec(
    file: str, request: GpuRequest, nodes: list[dict[str, Any]], label_key: str
) -> Check:
    """Whether the job spec in FILE asking for REQUEST selects a node (NODES: the cluster's),
    under LABEL_KEY (auto: the scheme the nodes carry)."""
    if not (request.gpus or request.mig or request.gpu_types):
        return Check(NAME, PASS, f"{file}: asks for no GPU")
    where = place(request, label_key, nodes)
    hits = selected(nodes, where)
    asked = _asked(request)
    if hits:
        return Check(
            NAME, PASS, f"{file}: {asked} selects {len(hits)} node(s): {_names(sorted(hits))}"
        )
    also = f"; {where.refusal}" if where.refusal else ""
    resource = f" with {where.resource}" if where.resource else ""
    return Check(
        NAME,
        FAIL,
        f"{file}: {asked} selects no node{resource}: {offered(nodes)}{also}",
        "change the spec's gpu_type / mig / shared to what the nodes offer, or add nodes "
        "with that GPU (gpuctl provision); --gpu-label-key auto detects the label scheme",
    )


def check_specs(
    specs: list[tuple[str, GpuRequest]], nodes: list[dict[str, Any]], label_key: str
) -> list[Check]:
    return [check_spec(file, request, nodes, label_key) for file, request in specs]


def check_pending(pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> Check | None:
    """Whether each of PODS (gpuctl's) that pends unscheduled may run on one of NODES by its
    nodeSelector and required node affinity (taints and room are the scheduler's other
    filters: `jobs why`); None when none pends."""
    pending = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Pending"
        and not (p.get("spec") or {}).get("nodeName")
    ]
    if not pending:
        return None
    stuck = sorted(
        namespaced_name(p)
        for p in pending
        if not any(pod_may_run_on(p.get("spec") or {}, n) for n in nodes)
    )
    if not stuck:
        return Check(PENDING, PASS, f"{len(pending)} gpuctl pod(s) pending, each may run on a node")
    return Check(
        PENDING,
        WARN,
        f"{_names(stuck)} pending: their nodeSelector / node affinity selects no node "
        f"({offered(nodes)})",
        "gpuctl jobs why JOB -n NAMESPACE; delete and resubmit with a gpu_type the nodes "
        "have (gpuctl doctor --spec checks a spec), unless a node autoscaler is to add "
        "such a node",
    )
