"""What each reclaim step writes: the patch that records and carries out the action in one
request where the API allows, the Event that says so, and the restore plan that puts
scaled and suspended workloads back. Pure."""

from __future__ import annotations

import json
from typing import Any

from gpuctl.common.plan import Plan, Step
from gpuctl.k8s import events
from gpuctl.k8s.objects import annotations_of, meta, name_of, namespace_of
from gpuctl.reclaim.core import policy as pol
from gpuctl.reclaim.core.decide import RECORD, REPLICAS, WARN, record_of

REASONS = {
    pol.REPORT: "IdleGPUsReported",
    WARN: "IdleGPUsWarned",
    pol.SUSPEND: "IdleGPUsSuspended",
    pol.SCALE: "IdleGPUsScaledToZero",
    pol.DELETE: "IdleGPUsEvicted",
}
RESTORED = "IdleGPUsRestored"
RESTORE_BY = "gpuctl.io/restored"  # annotation: when restore put the workload back


def object_patch(step: Step) -> dict[str, Any]:
    """The patch of the workload's own object: the record, and the change itself where it
    is a field of that object (suspend without Kueue, scale-to-zero)."""
    d = step.detail
    annotations = {RECORD: json.dumps(d["record"], sort_keys=True)}
    body: dict[str, Any] = {"metadata": {"annotations": annotations}}
    if step.action == pol.SUSPEND and not d.get("kueueWorkload"):
        body["spec"] = {"suspend": True}
    if step.action == pol.SCALE:
        annotations[REPLICAS] = str(d["replicas"])
        body["spec"] = {"replicas": 0}
        if d.get("resourceVersion"):  # a precondition: the API refuses it (409) once changed
            body["metadata"]["resourceVersion"] = d["resourceVersion"]
    return body


def kueue_patch(step: Step) -> dict[str, Any]:
    """Kueue's own way to stop admitted work so that it can requeue: deactivate its
    Workload (Kueue evicts it and suspends the job; active: true requeues it)."""
    annotations = {RECORD: json.dumps(step.detail["record"], sort_keys=True)}
    return {"metadata": {"annotations": annotations}, "spec": {"active": False}}


def event(
    kind: str, api_version: str, namespace: str, name: str, uid: str | None,
    reason: str, message: str, now: float,
) -> dict[str, Any]:  # fmt: skip
    """A core/v1 Event about one object: Normal for a report or a restore, else Warning."""
    involved = {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "namespace": namespace,
        "uid": uid,
    }
    warning = reason not in (REASONS[pol.REPORT], RESTORED)
    return events.event(involved, reason, message, now, warning)


def restore_plan(objects: list[tuple[str, dict[str, Any]]], namespace: str | None) -> Plan:
    """Scale back each Deployment and StatefulSet gpuctl scaled to zero (the replica count
    it recorded), and resume each Job, JobSet and Kueue Workload it suspended. OBJECTS:
    (kind, object) as read; only what carries gpuctl's record is touched."""
    steps = []
    for kind, obj in objects:
        ns, name, annotations = namespace_of(obj), name_of(obj), annotations_of(obj)
        if namespace and ns != namespace:
            continue
        record = record_of(annotations)
        target = f"{kind} {ns}/{name}"
        spec = obj.get("spec") or {}
        detail = {"kind": kind, "namespace": ns, "name": name}
        if kind in ("Deployment", "StatefulSet") and REPLICAS in annotations:
            if spec.get("replicas") not in (0, None):
                continue  # someone scaled it since: theirs now
            replicas = int(annotations[REPLICAS])
            back: dict[str, Any] = {"annotations": {REPLICAS: None}}
            if version := meta(obj).get("resourceVersion"):  # scaled since this read: theirs
                back["resourceVersion"] = str(version)
            patch = {"metadata": back, "spec": {"replicas": replicas}}
            why = f"scaled to zero at {record.get('at', '?')}"
            steps.append(Step("scale", target, f"to {replicas}: {why}", {**detail, "patch": patch}))
        elif (
            record.get("action") == pol.SUSPEND
            and kind in ("Job", "JobSet")
            and spec.get("suspend")
        ):
            if record.get("kueueWorkload"):
                continue  # Kueue resumes it once its Workload is active again
            patch = {"spec": {"suspend": False}}
            why = f"suspended at {record.get('at', '?')}"
            steps.append(Step("resume", target, why, {**detail, "patch": patch}))
        elif (
            record.get("action") == pol.SUSPEND
            and kind == "Workload"
            and spec.get("active") is False
        ):
            patch = {"spec": {"active": True}}
            why = f"deactivated at {record.get('at', '?')}; Kueue requeues it"
            steps.append(Step("reactivate", target, why, {**detail, "patch": patch}))
    return Plan("restore what gpuctl reclaim scaled down or suspended", tuple(steps))
