"""Which workload a pod belongs to: from kube-state-metrics' owner series where Prometheus
has them (kube_pod_owner, then kube_replicaset_owner / kube_job_owner one level up), else
from the cluster's own objects where gpuctl can read them (the pods' and their Jobs' and
ReplicaSets' controller references), else from the names Kubernetes controllers give their
pods. Pure: samples or objects in, names out."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuctl.dcgm.promql import per_metric
from gpuctl.k8s.objects import controller_of, name_of, namespace_of

# The alphabet of Kubernetes' generated name suffixes and pod-template hashes
# (apimachinery util/rand: no vowels, no 0, 1, 3).
_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
_DEPLOYMENT_POD = re.compile(rf"(.+)-{_SAFE}{{6,10}}-{_SAFE}{{5}}")  # NAME-HASH-xxxxx
_INDEXED_JOB_POD = re.compile(rf"(.+)-[0-9]+-{_SAFE}{{5}}")  # NAME-INDEX-xxxxx
_GENERATED_POD = re.compile(rf"(.+)-{_SAFE}{{5}}")  # a Job's, ReplicaSet's, DaemonSet's
_STATEFUL_POD = re.compile(r"(.+)-[0-9]+")  # NAME-ORDINAL
_REPLICASET = re.compile(rf"(.+)-{_SAFE}{{6,10}}")  # a Deployment's ReplicaSet: NAME-HASH

KSM, CLUSTER, POD_NAME = "kube-state-metrics", "cluster", "pod name"
OWNER_METRICS = ("kube_pod_owner", "kube_replicaset_owner", "kube_job_owner")
NONE = "<none>"  # kube-state-metrics' owner_kind and owner_name for a pod without owner

Holder = tuple[str, str]  # (namespace, pod)


@dataclass(frozen=True)
class Workload:
    namespace: str
    kind: str | None  # None: a ReplicaSet's, Job's or DaemonSet's pod, told only by its name
    name: str
    source: str  # KSM or POD_NAME


def query(window: str) -> str:
    """One query for every owner series over the window; each kind keeps its own label
    (pod, replicaset, job_name), so the metric name is not needed to tell them apart once
    aggregated (before, each metric's series are kept apart: see per_metric)."""
    by = "namespace, exported_namespace, pod, exported_pod, replicaset, job_name, owner_kind, owner_name, owner_is_controller"
    over = per_metric(lambda m: f"max_over_time({m}[{window}])", OWNER_METRICS)
    return f"max by ({by}) ({over})"


@dataclass
class Owners:
    pods: dict[Holder, tuple[str, str]]  # (namespace, pod) -> (owner kind, owner name)
    replicasets: dict[tuple[str, str], tuple[str, str]]
    jobs: dict[tuple[str, str], tuple[str, str]]
    source: str = KSM
    then: Owners | None = None  # asked for the pods these owners do not know

    def workload(self, holder: Holder) -> Workload:
        namespace, pod = holder
        owner = self.pods.get(holder)
        if owner is None:
            return self.then.workload(holder) if self.then else from_pod_name(namespace, pod)
        kind, name = owner
        if kind in ("", NONE):
            return Workload(namespace, "Pod", pod, self.source)
        if kind == "ReplicaSet":
            up = self.replicasets.get((namespace, name))
            if up and up[0] not in ("", NONE):
                return Workload(namespace, *up, self.source)
            m = _REPLICASET.fullmatch(name)  # no ReplicaSet's owner known: strip the hash
            found = ("Deployment", m.group(1)) if m else (kind, name)
            return Workload(namespace, *found, self.source)
        if kind == "Job":
            up = self.jobs.get((namespace, name))
            if up and up[0] not in ("", NONE):
                return Workload(namespace, *up, self.source)
        return Workload(namespace, kind, name, self.source)


def parse(samples: Iterable[tuple[dict[str, Any], float]]) -> Owners:
    """Owner series into lookups; a controller owner wins over any other of the same pod."""
    out = Owners({}, {}, {})
    tables = {"pod": out.pods, "replicaset": out.replicasets, "job": out.jobs}
    controlled: set[tuple[str, tuple[str, str]]] = set()
    for labels, _ in samples:
        # A scrape that attaches its own namespace/pod labels (prometheus-operator without
        # honorLabels) renames kube-state-metrics' ones to exported_*.
        namespace = labels.get("exported_namespace") or labels.get("namespace") or ""
        pod = labels.get("exported_pod") or labels.get("pod")
        if labels.get("replicaset"):
            which, key = "replicaset", (namespace, labels["replicaset"])
        elif labels.get("job_name"):
            which, key = "job", (namespace, labels["job_name"])
        elif pod:
            which, key = "pod", (namespace, pod)
        else:
            continue
        controller = labels.get("owner_is_controller") == "true"
        if (which, key) in controlled and not controller:
            continue
        tables[which][key] = (labels.get("owner_kind", ""), labels.get("owner_name", ""))
        if controller:
            controlled.add((which, key))
    return out


def from_objects(
    pods: Iterable[dict[str, Any]],
    jobs: Iterable[dict[str, Any]],
    replicasets: Iterable[dict[str, Any]],
) -> Owners:
    """Owners as the cluster's objects say: each pod's controller, and the controllers of
    its Job (a CronJob's, a JobSet's) or ReplicaSet (a Deployment's)."""
    out = Owners({}, {}, {}, CLUSTER)

    def owner(obj: dict[str, Any]) -> tuple[str, str]:
        ref = controller_of(obj) or {}
        return str(ref.get("kind") or ""), str(ref.get("name") or "")

    for table, objects in ((out.jobs, jobs), (out.replicasets, replicasets), (out.pods, pods)):
        for obj in objects:
            table[namespace_of(obj), name_of(obj)] = owner(obj)
    return out


def from_pod_name(namespace: str, pod: str) -> Workload:
    """The workload a pod's name implies: NAME-HASH-xxxxx a Deployment, NAME-INDEX-xxxxx an
    Indexed Job, NAME-xxxxx some controller's (kind unknown), NAME-N a StatefulSet, else the
    pod itself."""
    for pattern, kind in (
        (_DEPLOYMENT_POD, "Deployment"),
        (_INDEXED_JOB_POD, "Job"),
        (_GENERATED_POD, None),
        (_STATEFUL_POD, "StatefulSet"),
    ):
        m = pattern.fullmatch(pod)
        if m:
            return Workload(namespace, kind, m.group(1), POD_NAME)
    return Workload(namespace, "Pod", pod, POD_NAME)
