"""GPU-holding pods grouped by the workload that owns them, read from the objects
themselves (ownerReferences), not guessed from names: a Deployment's pods through their
ReplicaSet, a JobSet's through its Jobs, a StatefulSet's, a Job's, a bare pod. A workload
whose top owner is a kind gpuctl does not act on (a Kubeflow Notebook, a RayCluster, a
LeaderWorkerSet) keeps that kind: its own controller would undo any change below it, and
gpuctl cannot read whether it is marked never, so it is left alone. Kueue-managed Jobs and
JobSets carry the Workload Kueue made for them. Each workload carries why gpuctl.k8s.marks
says to leave it alone, if it does (a mark on one of its pods or up their chains). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuctl.gpus.resources import DONE_PHASES, accelerator_resources, requested
from gpuctl.gpus.vendors import is_accelerator_resource
from gpuctl.k8s import marks
from gpuctl.k8s.labels import QUEUE_LABEL
from gpuctl.k8s.objects import (
    Ref,
    annotations_of,
    controller_of,
    labels_of,
    name_of,
    namespace_of,
    owner_chain,
)

Obj = dict[str, Any]
# Kinds read from the cluster to walk ownerReferences up.
OWNER_KINDS = ("ReplicaSet", "Deployment", "StatefulSet", "Job", "CronJob", "JobSet")


@dataclass
class Workload:
    kind: str
    namespace: str
    name: str
    api_version: str
    obj: Obj | None  # the top owner as read (None: a kind gpuctl does not read)
    pods: list[Obj] = field(default_factory=list)
    kueue_workload: str | None = None  # the Kueue Workload admitting it
    never: str | None = None  # why gpuctl.k8s.marks says to leave it alone
    claimed: dict[str, int] = field(default_factory=dict)  # pod name → DRA devices it holds

    @property
    def ref(self) -> Ref:
        return (self.kind, self.namespace, self.name)

    @property
    def target(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def labels(self) -> dict[str, str]:
        return dict(labels_of(self.obj))

    @property
    def annotations(self) -> dict[str, str]:
        return dict(annotations_of(self.obj))

    @property
    def gpus(self) -> int:
        return sum(self.gpus_of(p) for p in self.pods)

    def gpus_of(self, pod: Obj) -> int:
        """The GPUs POD holds: the device plugin's, and those its DRA claims hold."""
        return pod_gpus(pod) + self.claimed.get(name_of(pod) or "", 0)

    @property
    def team(self) -> str:
        labels = self.labels
        return labels.get("team") or labels.get(QUEUE_LABEL) or self.namespace


def pod_gpus(pod: Obj) -> int:
    """The accelerator devices a pod holds: NVIDIA's whole GPUs, MIG devices and shared
    replicas, and other vendors' devices (gpuctl.gpus.vendors)."""
    return sum(requested(pod, r) for r in accelerator_resources(pod) if is_accelerator_resource(r))


def holds_gpus(pod: Obj, claimed: int = 0) -> bool:
    """Whether POD, running or bound, holds GPUs (CLAIMED: DRA devices its claims hold)."""
    status = pod.get("status") or {}
    return (
        bool((pod.get("spec") or {}).get("nodeName"))
        and status.get("phase") not in DONE_PHASES
        and pod_gpus(pod) + claimed > 0
    )


def group(
    pods: Iterable[Obj],
    owners: dict[Ref, Obj],
    kueue_workloads: Iterable[Obj],
    claimed: Mapping[tuple[str, str], int] | None = None,
) -> list[Workload]:
    """The workloads of the pods that hold GPUs. OWNERS: objects of OWNER_KINDS by
    (kind, namespace, name); CLAIMED: (namespace, pod) → the DRA devices its claims hold."""
    found: dict[Ref, Workload] = {}
    for pod in pods:
        ns, name = namespace_of(pod) or "default", name_of(pod) or ""
        held = (claimed or {}).get((ns, name), 0)
        if not holds_gpus(pod, held):
            continue
        w = found.setdefault((top := _top(pod, owners)).ref, top)
        w.pods.append(pod)
        w.never = w.never or marks.never(pod, owners)
        if held:
            w.claimed[name] = held
    admitted = _kueue_owners(kueue_workloads)
    for w in found.values():
        w.kueue_workload = admitted.get(w.ref)
    return sorted(found.values(), key=lambda w: (w.namespace, w.kind, w.name))


def _top(pod: Obj, owners: dict[Ref, Obj]) -> Workload:
    namespace = namespace_of(pod) or "default"
    obj, kind, api = pod, "Pod", "v1"
    for ref, up in owner_chain(pod, owners):
        if up is None:  # a kind not read (a Notebook, a RayCluster): it is the workload
            return Workload(ref.get("kind", "?"), namespace, ref.get("name", "?"),
                            ref.get("apiVersion", ""), None)  # fmt: skip
        obj, kind, api = up, ref.get("kind", ""), ref.get("apiVersion", "")
    if kind == "ReplicaSet":  # a ReplicaSet of no Deployment: gpuctl scales neither
        return Workload(kind, namespace, name_of(obj) or "?", api, None)
    return Workload(kind, namespace, name_of(obj) or "?", api, obj)


def _kueue_owners(workloads: Iterable[Obj]) -> dict[Ref, str]:
    out = {}
    for wl in workloads:
        ref = controller_of(wl)
        if ref is not None:
            namespace = namespace_of(wl) or "default"
            out[(ref.get("kind", ""), namespace, ref.get("name", ""))] = name_of(wl)
    return out
