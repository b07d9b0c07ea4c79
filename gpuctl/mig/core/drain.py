"""`gpuctl mig rebalance --drain`: which running GPU pods the plan may evict to change the
GPUs they may be on. Only what this rule covers, never on a guess; the same exemptions as
gpuctl reclaim and make-room. Pure.

A pod is covered when all of these hold:
- its namespace is one the user named with --drain-namespace (none by default: --drain
  alone covers nothing);
- a controller recreates it: it is a Job's, a ReplicaSet's (a Deployment's) or a
  StatefulSet's pod (a bare pod, a DaemonSet's or anything else's never is);
- neither it nor its owners up the chain (the ReplicaSet's Deployment, …) is marked
  `gpuctl.io/reclaim: never` or `gpuctl.io/evict: never` (label or annotation, each read on
  its own, as make-room reads them); an owner that could not be read covers nothing;
- it keeps no data on the node (no emptyDir or hostPath volume: kubectl drain, too, asks
  before deleting emptyDir data);
- no PodDisruptionBudget selecting it allows no disruption now (status.disruptionsAllowed,
  which the Eviction API reads too); budgets that could not be read cover nothing.
A budget that several evictions use up is left to the Eviction API: its refusal (429)
stops that node when applying.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import UsageError
from gpuctl.k8s import events
from gpuctl.k8s.objects import (
    Ref,
    annotations_of,
    controller_of,
    labels_of,
    name_of,
    namespace_of,
    owner_chain,
    uid_of,
)
from gpuctl.k8s.selectors import label_selector_matches

OWNER_KINDS = ("Job", "ReplicaSet", "Deployment", "StatefulSet")  # the kinds read as owners
BUDGET = "PodDisruptionBudget"
READ_KINDS = (*OWNER_KINDS, BUDGET)  # what the policy reads in its namespaces


def budgets_unread(namespace: str) -> Ref:
    """The key that says NAMESPACE's PodDisruptionBudgets could not be read (RBAC): its
    pods are then not covered."""
    return (BUDGET, namespace, "")


NEVER = (("gpuctl.io/reclaim", "never"), ("gpuctl.io/evict", "never"))
RECREATED_BY = ("Job", "ReplicaSet", "StatefulSet")
RECORD = "gpuctl.io/mig-rebalance-evicted"  # on an evicted pod: why (JSON)
REASON = "MigRebalanceEvict"  # the Event's reason


@dataclass(frozen=True)
class DrainPolicy:
    namespaces: frozenset[str]

    def why_not(
        self, pod: Mapping[str, Any], owners: Mapping[Ref, Mapping[str, Any]]
    ) -> str | None:
        """None when the policy covers POD, else why it does not (in words). OWNERS: the
        objects of READ_KINDS in the policy's namespaces, by (kind, namespace, name)."""
        ns = namespace_of(pod) or "default"
        if ns not in self.namespaces:
            return f"namespace {ns} is not one --drain-namespace names"
        marked = _marked(pod)
        if marked:
            return f"marked {marked}"
        owner = controller_of(pod)
        if owner is None:
            return "a bare pod: nothing would recreate it"
        if owner.get("kind") not in RECREATED_BY:
            return f"a {owner.get('kind')}'s pod: only Jobs', ReplicaSets' and StatefulSets' are"
        for v in (pod.get("spec") or {}).get("volumes") or []:
            if "emptyDir" in v or "hostPath" in v:
                return f"keeps data on the node (volume {v.get('name')})"
        if budgets_unread(ns) in owners:
            return f"the PodDisruptionBudgets of namespace {ns} could not be read"
        budget = _spent_budget(pod, ns, owners)
        if budget:
            return f"its PodDisruptionBudget {ns}/{budget} allows no disruption now"
        # the pod's owner, its owner's owner, …
        for ref, seen in itertools.islice(owner_chain(pod, owners), 3):
            if ref.get("kind") not in OWNER_KINDS:
                return None
            what = f"{ref.get('kind')} {ns}/{ref.get('name')}"
            if seen is None:
                return f"its {what} could not be read"
            marked = _marked(seen)
            if marked:
                return f"its {what} is marked {marked}"
        return None


def drain_policy(drain: bool, namespaces: list[str]) -> DrainPolicy | None:
    """--drain's policy (None without --drain); --drain names at least one namespace."""
    if not drain:
        if namespaces:
            raise UsageError("--drain-namespace needs --drain")
        return None
    if not namespaces:
        raise UsageError(
            "--drain needs --drain-namespace NS: the namespaces whose GPU pods may be evicted",
            hint="e.g. gpuctl mig rebalance --drain --drain-namespace ml-batch --dry-run",
        )
    return DrainPolicy(frozenset(namespaces))


def _spent_budget(
    pod: Mapping[str, Any], ns: str, owners: Mapping[Ref, Mapping[str, Any]]
) -> str | None:
    labels = labels_of(pod)
    for (kind, where, name), budget in sorted(owners.items()):
        if kind != BUDGET or where != ns or not name:
            continue
        if not label_selector_matches((budget.get("spec") or {}).get("selector"), labels):
            continue
        if ((budget.get("status") or {}).get("disruptionsAllowed") or 0) < 1:
            return name
    return None


def _marked(obj: Mapping[str, Any]) -> str | None:
    marks = (labels_of(obj), annotations_of(obj))
    return next((f"{k}: {v}" for k, v in NEVER for m in marks if m.get(k) == v), None)


def record(node: str, config_from: str | None, config_to: str) -> str:
    """The annotation an evicted pod carries: why gpuctl evicted it."""
    why = f"evicted by gpuctl mig rebalance --drain: node {node} changes MIG config"
    return json.dumps({"why": why, "node": node, "from": config_from, "to": config_to})


def event(pod: Mapping[str, Any], message: str, now: float) -> dict[str, Any]:
    """The Warning Event on an evicted pod."""
    involved = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": name_of(pod),
        "namespace": namespace_of(pod) or "default",
        "uid": uid_of(pod),
    }
    return events.event(involved, REASON, message, now, warning=True)
