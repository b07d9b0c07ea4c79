"""What each reclaim step writes: the patch that records and carries out the action in one
request where the API allows, the Event that says so, and the restore plan that puts
scaled and suspended workloads back. Pure."""

from __future__ import annotations

import json
from typing import Any

from gpuctl.common.errors import GpuctlError
from gpuctl.common.numbers import whole_number
from gpuctl.common.plan import Plan, Step
from gpuctl.k8s import events
from gpuctl.k8s.objects import annotations_of, name_of, namespace_of, uid_of
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
MAX_REPLICAS = 10_000  # the most replicas restore puts back (a record above it is refused)


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


def recorded_replicas(kind: str, namespace: str, name: str, annotations: dict[str, str]) -> int:
    """The replica count gpuctl recorded on the object before scaling it to zero: a whole
    number from 0 to MAX_REPLICAS, else a GpuctlError naming the object and the annotation."""
    text = annotations[REPLICAS]
    count = whole_number(text) if isinstance(text, str) else None
    if count is None or count > MAX_REPLICAS:
        raise GpuctlError(
            f"{kind} {namespace}/{name}: annotation {REPLICAS} is {text!r}, not a replica "
            f"count from 0 to {MAX_REPLICAS}; nothing was restored",
            hint=f"set it to the count to restore, or remove it (kubectl annotate "
            f"{kind.lower()} {name} -n {namespace} {REPLICAS}-), and run it again",
        )
    return count


def restore_plan(objects: list[tuple[str, dict[str, Any]]], namespace: str | None) -> Plan:
    """Scale back each Deployment and StatefulSet gpuctl scaled to zero (the replica count
    it recorded), and resume each Job, JobSet and Kueue Workload it suspended. OBJECTS:
    (kind, object) as read; only what carries gpuctl's record is touched. Every recorded
    count of a workload still at zero is checked before the plan is made: one that is not a
    count is an error."""
    steps = []
    for kind, obj in objects:
        ns, name, annotations = namespace_of(obj), name_of(obj), annotations_of(obj)
        if namespace and ns != namespace:
            continue
        record = record_of(annotations)
        target = f"{kind} {ns}/{name}"
        spec = obj.get("spec") or {}
        detail = {"kind": kind, "namespace": ns, "name": name, "uid": uid_of(obj)}
        if kind in ("Deployment", "StatefulSet") and REPLICAS in annotations:
            if spec.get("replicas") not in (0, None):
                continue  # someone scaled it since: theirs now, its record not read
            replicas = recorded_replicas(kind, ns, name, annotations)
            patch = {"metadata": {"annotations": {REPLICAS: None}}, "spec": {"replicas": replicas}}
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


def restore_changed(step: Step, obj: dict[str, Any]) -> str | None:
    """Why OBJ, read again just before a restore step, is not as the plan found it (someone
    scaled, resumed or reactivated it since: theirs now), or None."""
    spec = obj.get("spec") or {}
    if step.action == "scale":
        if spec.get("replicas") not in (0, None):
            return f"scaled to {spec.get('replicas')} since the plan was made: theirs now"
        recorded = annotations_of(obj).get(REPLICAS)
        if whole_number(str(recorded)) != step.detail["patch"]["spec"]["replicas"]:
            return f"its annotation {REPLICAS} changed since the plan was made"
    elif step.action == "resume" and not spec.get("suspend"):
        return "resumed since the plan was made"
    elif step.action == "reactivate" and spec.get("active") is not False:
        return "reactivated since the plan was made"
    return None
