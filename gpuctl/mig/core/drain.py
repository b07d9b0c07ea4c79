"""`gpuctl mig rebalance --drain`: which running GPU pods the plan may evict to change the
GPUs they may be on. Only what this rule covers, never on a guess; the same exemptions as
gpuctl reclaim and make-room. Pure.

A pod is covered when all of these hold:
- its namespace is one the user named with --drain-namespace (none by default: --drain
  alone covers nothing);
- a controller recreates it: it is a Job's, a ReplicaSet's (a Deployment's) or a
  StatefulSet's pod (a bare pod, a DaemonSet's or anything else's never is);
- gpuctl.k8s.marks, the rule reclaim and make-room read too, does not say to leave it
  alone: neither it nor its owners up the chain (its ReplicaSet's Deployment, its Job's
  CronJob or JobSet) is marked `gpuctl.io/reclaim: never` or `gpuctl.io/evict: never`
  (label or annotation), and every one of them could be read;
- it keeps no data on the node (no emptyDir or hostPath volume: kubectl drain, too, asks
  before deleting emptyDir data);
- no PodDisruptionBudget selecting it allows no disruption now (status.disruptionsAllowed,
  which the Eviction API reads too); budgets that could not be read cover nothing;
- its gang does not keep within one topology domain (gpuctl.k8s.pod_affinity): the plan
  counts the room evicted pods come back to cluster-wide, so one evicted from such a gang
  could find none in its domain and strand the gang.
A budget that several evictions use up is left to the Eviction API: its refusal (429)
stops that node when applying.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import UsageError
from gpuctl.k8s import events, marks
from gpuctl.k8s.objects import Ref, controller_of, labels_of, name_of, namespace_of, uid_of
from gpuctl.k8s.pod_affinity import gang_keys
from gpuctl.k8s.selectors import label_selector_matches

# the kinds read as owners (JobSet, a custom resource, where the cluster serves it)
OWNER_KINDS = ("Job", "CronJob", "JobSet", "ReplicaSet", "Deployment", "StatefulSet")
BUDGET = "PodDisruptionBudget"
READ_KINDS = (*OWNER_KINDS, BUDGET)  # what the policy reads in its namespaces


def budgets_unread(namespace: str) -> Ref:
    """The key that says NAMESPACE's PodDisruptionBudgets could not be read (RBAC): its
    pods are then not covered."""
    return (BUDGET, namespace, "")


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
        owner = controller_of(pod)
        if owner is None:
            return marks.never(pod, owners) or "a bare pod: nothing would recreate it"
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
        keys = gang_keys(pod)
        if keys:  # the plan counts room cluster-wide, not per domain
            return f"its gang keeps within one {', '.join(keys)} domain, which the plan does not count room in"
        return marks.never(pod, owners)


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
