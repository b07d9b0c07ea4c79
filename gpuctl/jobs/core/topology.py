"""How a job's pods are kept within one domain of a topology label (gpuctl.gpus.topology
says which label), by the engine the cluster runs. Pure.

| engine | chosen when | required | preferred |
|---|---|---|---|
| kueue | the job is queued and a flavor of its ClusterQueue has a `topologyName` (Kueue's Topology Aware Scheduling) | pod template annotation `kueue.x-k8s.io/podset-required-topology: KEY`: Kueue admits the pod set only into one domain with room for all of it, and pins its pods there | `kueue.x-k8s.io/podset-preferred-topology: KEY` |
| jobset | a JobSet (multinode: jobset) | JobSet annotation `alpha.jobset.sigs.k8s.io/exclusive-topology: KEY`: JobSet's webhook gives a child Job's pods affinity to each other on KEY and keeps other Jobs out of that domain | pod affinity, preferred |
| affinity | an Indexed Job; a service's Deployment | pod affinity on KEY to the job's own pods, required (the first pod goes anywhere, the rest follow it) | the same, preferred (weight 100) |

Sources: kubernetes-sigs/kueue site/content/en/docs/concepts/topology_aware_scheduling.md
(the annotations, on a PodSet's pod template); kubernetes-sigs/jobset
api/jobset/v1alpha2/jobset_types.go (ExclusiveKey) and docs "Exclusive Job placement";
Kubernetes' pod affinity (kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuctl.gpus.topology import Constraint
from gpuctl.k8s.fit import DomainFit
from gpuctl.k8s.labels import JOB_LABEL

KUEUE, JOBSET, AFFINITY = "kueue", "jobset", "affinity"
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
PREFERRED_WEIGHT = 100


def engine_for(required: bool, queued_on_tas: bool, jobset: bool) -> str:
    """Which engine keeps the pods together: Kueue where the job is queued on a flavor with
    a topology, JobSet's exclusive placement for a required JobSet, else pod affinity."""
    if queued_on_tas:
        return KUEUE
    return JOBSET if jobset and required else AFFINITY


def template_annotations(c: Constraint | None) -> dict[str, str]:
    """The pod template's annotations: Kueue's, when Kueue keeps the pods together."""
    if c is None or c.engine != KUEUE or c.key is None:
        return {}
    return {(KUEUE_REQUIRED if c.required else KUEUE_PREFERRED): c.key}


def jobset_annotations(c: Constraint | None) -> dict[str, str]:
    """The JobSet's annotations: JobSet's exclusive placement, when JobSet keeps them."""
    if c is None or c.engine != JOBSET or c.key is None:
        return {}
    return {JOBSET_EXCLUSIVE: c.key}


def pod_affinity(c: Constraint | None, job: str) -> dict[str, Any] | None:
    """The podAffinity that keeps the pods of JOB in one domain of the key, when neither
    Kueue nor JobSet does."""
    if c is None or c.key is None or c.engine in (KUEUE, None):
        return None
    if c.engine == JOBSET and c.required:
        return None
    term = {"labelSelector": {"matchLabels": {JOB_LABEL: job}}, "topologyKey": c.key}
    if c.required:
        return {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    preferred = {"weight": PREFERRED_WEIGHT, "podAffinityTerm": term}
    return {"preferredDuringSchedulingIgnoredDuringExecution": [preferred]}


def with_pin(affinity: dict[str, Any] | None, c: Constraint | None) -> dict[str, Any] | None:
    """AFFINITY (a pod's, node affinity and all) with the node affinity that pins the pods
    to the domain C was pinned to: each required term ANDed with KEY In [value]."""
    if c is None or c.pinned is None or c.key is None:
        return affinity
    pin = {"key": c.key, "operator": "In", "values": [c.pinned]}
    out = dict(affinity or {})
    node = dict(out.get("nodeAffinity") or {})
    required = dict(node.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        {**t, "matchExpressions": [*(t.get("matchExpressions") or []), pin]} for t in terms
    ]
    node["requiredDuringSchedulingIgnoredDuringExecution"] = required
    out["nodeAffinity"] = node
    return out


def pin_to(c: Constraint, domains: Sequence[DomainFit], workers: int) -> str | None:
    """The domain pod affinity alone may miss (it is not gang-aware: the first pod may land
    where the rest have no room): the tightest domain with room for all WORKERS now, for a
    required topology kept by pod affinity; None when none has room or another engine
    places the gang."""
    if c.engine != AFFINITY or not c.required:
        return None
    roomy = [d for d in domains if d.slots_now >= workers]
    return min(roomy, key=lambda d: (d.slots_now, d.value)).value if roomy else None


def how(c: Constraint) -> str:
    """What keeps the pods together, in words."""
    mode = "required" if c.required else "preferred"
    if c.engine == KUEUE:
        return f"Kueue's {mode} topology"
    if c.engine == JOBSET and c.required:
        return "JobSet's exclusive placement"
    pinned = f", pinned to {c.pinned}, the tightest with room now" if c.pinned else ""
    return f"pod affinity ({mode}){pinned}"


def of_job(job: dict[str, Any]) -> Constraint | None:
    """The topology a created job's pods are kept within, read back from what gpuctl
    rendered: Kueue's annotation, JobSet's exclusive placement (of a one-Job JobSet), or
    pod affinity to the job's own pods."""
    spec = job.get("spec") or {}
    replicated = spec.get("replicatedJobs") or [{}]
    if job.get("kind") == "JobSet":
        if len(replicated) == 1 and replicated[0].get("replicas", 1) == 1:
            key = ((job.get("metadata") or {}).get("annotations") or {}).get(JOBSET_EXCLUSIVE)
            if key:
                return Constraint(key, True, key, JOBSET)
        spec = ((replicated[0].get("template") or {}).get("spec")) or {}
    template = spec.get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    for annotation, required in ((KUEUE_REQUIRED, True), (KUEUE_PREFERRED, False)):
        if key := annotations.get(annotation):
            return Constraint(key, required, key, KUEUE)
    affinity = ((template.get("spec") or {}).get("affinity") or {}).get("podAffinity") or {}
    required_terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    terms = [(t, True) for t in required_terms] + [
        (p.get("podAffinityTerm") or {}, False) for p in preferred
    ]
    for term, required in terms:
        own = ((term.get("labelSelector") or {}).get("matchLabels") or {}).get(JOB_LABEL)
        if own and (key := term.get("topologyKey")):
            return Constraint(key, required, key, AFFINITY)
    return None
