"""`gpuctl doctor --spec` for job specs that ask for a ComputeDomain (multi-node NVLink,
gpuctl.k8s.compute_domain): the cluster serves the ComputeDomain API (NVIDIA's DRA driver
with `resources.computeDomains.enabled`), the driver's channel DeviceClass is there, and one
NVLink clique (nodes of one `nvidia.com/gpu.clique`) has GPUs for all the workers. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from gpuctl.common.quantity import count
from gpuctl.doctor.core.checks import FAIL, PASS, Check
from gpuctl.gpus.dra import DraView
from gpuctl.k8s import compute_domain as cd
from gpuctl.k8s.nodes import allocatable
from gpuctl.k8s.objects import labels_of, name_of
from gpuctl.k8s.placement import GpuRequest

NAME = "compute-domain"
LABELS = (
    "GPU Feature Discovery (GPU Operator) labels multi-node NVLink nodes with "
    f"{cd.CLIQUE_LABEL}; so does the driver's compute-domain kubelet plugin"
)


def check_compute_domains(
    specs: Sequence[tuple[str, GpuRequest]],
    served: bool,
    view: DraView | None,
    nodes: Sequence[dict[str, Any]],
) -> list[Check]:
    """One check per spec of SPECS that asks for a ComputeDomain, on a cluster that SERVED
    the API (or not), with its DRA (VIEW) and NODES."""
    asking = [(file, r) for file, r in specs if r.compute_domain]
    if not asking:
        return []
    if not served:
        files = ", ".join(f for f, _ in asking)
        why = f"{files}: asks for a ComputeDomain, but the cluster serves no {cd.API_VERSION}"
        return [Check(NAME, FAIL, why, cd.INSTALL)]
    if view is None or cd.CHANNEL_CLASS not in view.class_named:
        files = ", ".join(f for f, _ in asking)
        why = f"{files}: ComputeDomains are served, but there is no DeviceClass {cd.CHANNEL_CLASS} for their channels"  # fmt: skip
        return [Check(NAME, FAIL, why, cd.INSTALL)]
    gpus = _gpus_per_clique(view, nodes)
    return [_fits(file, r, gpus) for file, r in asking]


def _gpus_per_clique(view: DraView, nodes: Sequence[dict[str, Any]]) -> Counter[str]:
    """Each clique's GPUs: a device plugin's nvidia.com/gpu, else the node's DRA GPUs."""
    out: Counter[str] = Counter()
    for n in nodes:
        if clique := labels_of(n).get(cd.CLIQUE_LABEL):
            plugin = count(allocatable(n).get("nvidia.com/gpu", 0))
            dra = sum(1 for d in view.on(name_of(n) or "") if d.attribute("type") == "gpu")
            out[clique] += plugin or dra
    return out


def _fits(file: str, request: GpuRequest, gpus: Counter[str]) -> Check:
    workers = request.compute_domain
    if not gpus:
        return Check(NAME, FAIL, f"{file}: a ComputeDomain needs nodes in an NVLink clique; no node carries {cd.CLIQUE_LABEL}", LABELS)  # fmt: skip
    clique, most = gpus.most_common(1)[0]
    need = workers * request.gpus
    found = f"the largest clique, {clique}, has {most} GPUs ({len(gpus)} clique(s))"
    if most < need:
        return Check(NAME, FAIL, f"{file}: {workers} workers × {request.gpus} GPUs must be within one NVLink clique; {found}", LABELS)  # fmt: skip
    return Check(NAME, PASS, f"{file}: ComputeDomains served; {workers} workers × {request.gpus} GPUs fit one clique: {found}")  # fmt: skip
