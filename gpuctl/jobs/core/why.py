"""`gpuctl jobs why`: why a job is not running, in words. Pure: the job, its Kueue
Workload, its pods and the visibility API's answer come in as the API returns them.

Kueue's Workload conditions (kubernetes-sigs/kueue apis/kueue/v1beta2/workload_types.go):
QuotaReserved (quota held in a ClusterQueue), Admitted (quota and every admission check),
PodsReady (all pods ready: waitForPodsReady), Evicted / Preempted (and why), Requeued,
Finished. The visibility API's PendingWorkloadsSummary gives a pending workload's 0-based
position in its LocalQueue and ClusterQueue (apis/visibility/v1beta2/types.go)."""

from __future__ import annotations

from typing import Any

from gpuctl.gpus.resources import requested
from gpuctl.gpus.vendors import is_accelerator_resource
from gpuctl.jobs.core.status import pod_template, status_of, workers
from gpuctl.k8s.objects import meta, name_of, namespace_of, uid_of
from gpuctl.k8s.placement import Placement

EVICTED = {
    "Preempted": "preempted",
    "PodsReadyTimeout": "its pods were not all ready in time (waitForPodsReady.timeout)",
    "AdmissionCheck": "an admission check asked for it",
    "ClusterQueueStopped": "its ClusterQueue was stopped",
    "LocalQueueStopped": "its LocalQueue was stopped",
    "Deactivated": "it was deactivated",
    "InactiveWorkload": "it was deactivated",  # the same reason as older Kueue releases name it
    "NodeFailures": "a node it ran on failed",
    "MaximumExecutionTimeExceeded": "it ran past its maximum execution time",
    "RequeuingLimitExceeded": "it was requeued too many times",
}
PREEMPTED = {
    "InClusterQueue": "by a higher-priority workload of the same ClusterQueue",
    "InCohortReclamation": "so that a queue of the cohort could reclaim quota this one borrowed",
    "InCohortFairSharing": "to share the cohort's quota fairly",
    "InCohortReclaimWhileBorrowing": "by a workload that reclaims quota while borrowing",
}


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(c.get("type")): c for c in ((obj.get("status") or {}).get("conditions") or [])}


def _true(c: dict[str, Any] | None) -> bool:
    return c is not None and c.get("status") == "True"


def _said(c: dict[str, Any]) -> str:
    reason, message = c.get("reason"), (c.get("message") or "").strip()
    return f"({reason})" + (f": {message}" if message else "") if reason else message


def workload_of(job: dict[str, Any], workloads: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Workload Kueue made for JOB: the one it owns (ownerReferences kind and name, and
    uid where both have one)."""
    name, uid = name_of(job), uid_of(job)
    for w in workloads:
        for ref in meta(w).get("ownerReferences") or []:
            if ref.get("kind") != job.get("kind") or ref.get("name") != name:
                continue
            if ref.get("uid") and uid and ref["uid"] != uid:
                continue
            return w
    return None


def workload_in_words(workload: dict[str, Any], cluster_queue: str | None) -> list[str]:
    """What the Workload's conditions say, one line each, in the order things happen."""
    status, spec = workload.get("status") or {}, workload.get("spec") or {}
    cond = _conditions(workload)
    admission = status.get("admission") or {}
    cq = admission.get("clusterQueue") or cluster_queue or "?"
    lines = []
    if spec.get("active") is False:
        lines.append("deactivated (spec.active is false): Kueue admits it only once reactivated")
    finished = cond.get("Finished")
    if _true(finished):
        assert finished is not None
        return [f"finished {_said(finished)}"]
    evicted = cond.get("Evicted")
    if _true(evicted):
        assert evicted is not None
        why = EVICTED.get(str(evicted.get("reason")), "evicted")
        preempted = cond.get("Preempted")
        if _true(preempted):
            assert preempted is not None
            why += " " + PREEMPTED.get(str(preempted.get("reason")), "")
        lines.append(f"evicted: {why.strip()} {_said(evicted)}")
    requeue = status.get("requeueState") or {}
    if requeue.get("count"):
        at = f"; next try at {requeue['requeueAt']}" if requeue.get("requeueAt") else ""
        lines.append(f"requeued {requeue['count']} time(s){at}")
    reserved = cond.get("QuotaReserved")
    if reserved is None:
        lines.append(
            "quota: not considered yet (no QuotaReserved condition): is its LocalQueue's "
            "ClusterQueue active?"
        )
    elif _true(reserved):
        lines.append(f"quota reserved in ClusterQueue {cq}{_flavors(admission)}")
    else:
        lines.append(f"waiting for quota in ClusterQueue {cq} {_said(reserved)}")
    admitted = cond.get("Admitted")
    if _true(admitted):
        lines.append("admitted: Kueue let its pods start")
    elif admitted is not None and _true(reserved):
        checks = ", ".join(
            f"{c.get('name')} {c.get('state')}" for c in status.get("admissionChecks") or []
        )
        lines.append(
            f"not admitted yet {_said(admitted)}"
            + (f" (admission checks: {checks})" if checks else "")
        )
    ready = cond.get("PodsReady")
    if _true(admitted) and ready is not None:
        if _true(ready):
            lines.append("all pods ready")
        else:
            lines.append(
                f"waiting for all pods to be ready {_said(ready)}; with waitForPodsReady, "
                "Kueue evicts and requeues it if they are not ready in time"
            )
    return lines


def _flavors(admission: dict[str, Any]) -> str:
    used = sorted(
        {
            f"{resource} → {flavor}"
            for ps in admission.get("podSetAssignments") or []
            for resource, flavor in (ps.get("flavors") or {}).items()
            if is_accelerator_resource(resource)
        }
    )
    return f" (flavors: {', '.join(used)})" if used else ""


def position_in_words(summary: dict[str, Any], workload: str) -> str | None:
    """The Workload's place in line, from a PendingWorkloadsSummary; None when it is not
    pending there."""
    for item in summary.get("items") or []:
        if name_of(item) != workload:
            continue
        lq, cq = item.get("positionInLocalQueue"), item.get("positionInClusterQueue")
        parts = []
        if lq is not None:
            parts.append(f"{lq} workload(s) ahead in LocalQueue {item.get('localQueueName', '?')}")
        if cq is not None:
            parts.append(f"{cq} ahead in its ClusterQueue")
        return "position: " + ", ".join(parts) if parts else None
    return None


def pods_in_words(pods: list[dict[str, Any]]) -> list[str]:
    """Why pods wait: the scheduler's PodScheduled=False message, or a waiting container."""
    out = []
    for p in sorted(pods, key=name_of):
        name = name_of(p)
        status = p.get("status") or {}
        sched = _conditions(p).get("PodScheduled")
        if sched is not None and sched.get("status") == "False":
            out.append(f"pod {name}: not scheduled {_said(sched)}")
            continue
        for c in status.get("containerStatuses") or []:
            waiting = (c.get("state") or {}).get("waiting")
            if waiting:
                out.append(
                    f"pod {name}: container {c.get('name')} waiting ({waiting.get('reason')})"
                    + (f": {waiting['message']}" if waiting.get("message") else "")
                )
    return out


def fit_inputs(job: dict[str, Any]) -> tuple[Placement, int, list[dict[str, Any]]]:
    """What the fit check needs, read from a live job: its accelerator resource (any
    vendor's) per worker and the
    node affinity it was created with (the nodes it selects are the ones it may use), the
    workers, its tolerations."""
    pod = pod_template(job)
    limits = {
        name
        for c in pod.get("containers") or []
        for name in ((c.get("resources") or {}).get("limits") or {})
        if is_accelerator_resource(name)
    }
    resource = min(limits) if limits else None
    per_worker = requested({"spec": pod}, resource) if resource else 0
    affinity = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = tuple(
        tuple(term.get("matchExpressions") or [])
        for term in affinity.get("nodeSelectorTerms") or []
    )
    selector = pod.get("nodeSelector") or {}
    if selector:  # a nodeSelector holds beside the affinity: AND it into every term
        pinned = tuple({"key": k, "operator": "In", "values": [v]} for k, v in selector.items())
        terms = tuple((*t, *pinned) for t in terms) if terms else (pinned,)
    where = Placement(resource, per_worker, terms)
    return where, workers(job), list(pod.get("tolerations") or [])


def job_in_words(job: dict[str, Any]) -> str:
    state = status_of(job)
    what = {
        "Queued": "suspended until Kueue admits it",
        "Suspended": "suspended, and in no Kueue queue: nothing will start it",
        "Pending": "not running yet",
    }.get(state, "")
    return f"{job.get('kind')} {namespace_of(job)}/{name_of(job)}: {state}" + (
        f" ({what})" if what else ""
    )
