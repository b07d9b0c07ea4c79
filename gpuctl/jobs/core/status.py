"""Summarise gpuctl-managed Jobs, JobSets, Pods and services (their Deployments, as the
API returns them) into rows.

A JobSet's status counts its Jobs (`replicatedJobsStatus`); a row counts workers, so each
Job counts as the pods it runs (its completions)."""

from __future__ import annotations

from typing import Any

from gpuctl.gpus.resources import requested
from gpuctl.k8s.labels import JOB_LABEL, QUEUE_LABEL
from gpuctl.k8s.objects import labels_of, meta, name_of

FINISHED = ("Succeeded", "Failed")


def status_of(obj: dict[str, Any]) -> str:
    """Pending, Queued (suspended until Kueue admits it), Suspended (with no queue),
    Running, Succeeded, Failed."""
    status = obj.get("status") or {}
    if obj.get("kind") == "Pod":
        return status.get("phase") or "Pending"
    if obj.get("kind") == "Deployment":
        return _service_status(obj)
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True":
            if cond.get("type") in ("Complete", "SuccessCriteriaMet", "Completed"):
                return "Succeeded"
            if cond.get("type") in ("Failed", "FailureTarget"):
                return "Failed"
    if (obj.get("spec") or {}).get("suspend"):
        return "Queued" if QUEUE_LABEL in labels_of(obj) else "Suspended"
    if _counts(obj)["active"]:
        ready = _ready(obj)
        return "Running" if ready is None or ready > 0 else "Pending"
    return "Pending"


def _service_status(obj: dict[str, Any]) -> str:
    """A service (its Deployment): Running with a Ready replica, Failed when its rollout
    passed its progress deadline, Scaled to zero, else Pending."""
    status = obj.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return "Failed"
    if int(status.get("readyReplicas") or 0):
        return "Running"
    if (obj.get("spec") or {}).get("replicas") == 0:
        return "Scaled to zero"
    return "Pending"


def _ready(obj: dict[str, Any]) -> int | None:
    """Pods ready (a Job's `ready`) or Jobs ready (a JobSet's), None where the API server
    does not report it: `active` counts pending pods too, so alone it cannot tell a job
    that runs from one whose pods wait for room."""
    status = obj.get("status") or {}
    if obj.get("kind") != "JobSet":
        return None if status.get("ready") is None else int(status["ready"])
    found = [rj.get("ready") for rj in status.get("replicatedJobsStatus") or []]
    if not found or any(r is None for r in found):
        return None
    return sum(int(r) for r in found)


def _counts(obj: dict[str, Any]) -> dict[str, int]:
    """Workers active, succeeded and failed (a service's replicas Ready, and none)."""
    status = obj.get("status") or {}
    if obj.get("kind") == "Deployment":
        return {"active": int(status.get("readyReplicas") or 0), "succeeded": 0, "failed": 0}
    if obj.get("kind") != "JobSet":
        return {k: int(status.get(k) or 0) for k in ("active", "succeeded", "failed")}
    per_job = {
        rj.get("name"): _pods_per_job(rj)
        for rj in (obj.get("spec") or {}).get("replicatedJobs") or []
    }
    out = {"active": 0, "succeeded": 0, "failed": 0}
    for rj in status.get("replicatedJobsStatus") or []:
        for k in out:
            out[k] += int(rj.get(k) or 0) * per_job.get(rj.get("name"), 1)
    return out


def _pods_per_job(replicated_job: dict[str, Any]) -> int:
    job = (replicated_job.get("template") or {}).get("spec") or {}
    return int(job.get("completions") or job.get("parallelism") or 1)


def workers(obj: dict[str, Any]) -> int:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "JobSet":
        return sum(
            int(rj.get("replicas") or 1) * _pods_per_job(rj)
            for rj in spec.get("replicatedJobs") or []
        )
    if obj.get("kind") == "Job":
        return int(spec.get("completions") or 1)
    if obj.get("kind") == "Deployment":
        replicas = spec.get("replicas")
        return 1 if replicas is None else int(replicas)
    return 1


def gpu_request(pod_spec_owner: dict[str, Any]) -> tuple[int, str | None]:
    """How many of which GPU resource a worker asks for, e.g. (2, "nvidia.com/gpu"), from a
    Pod or a Job's pod template; (0, None) when none."""
    pod = {"spec": pod_template(pod_spec_owner)}
    for c in (pod.get("spec") or {}).get("containers") or []:
        for name in (c.get("resources") or {}).get("limits") or {}:
            if name.startswith("nvidia.com/"):
                return requested(pod, name), name
    return 0, None


def image(pod_spec_owner: dict[str, Any]) -> str | None:
    """The image of a worker's first container."""
    containers = pod_template(pod_spec_owner).get("containers") or [{}]
    found = containers[0].get("image") if isinstance(containers[0], dict) else None
    return found if isinstance(found, str) else None


def pod_template(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a Pod, of a Job's template, of a JobSet's first replicatedJob."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "JobSet":
        first = (spec.get("replicatedJobs") or [{}])[0]
        spec = ((first.get("template") or {}).get("spec")) or {}
    if "template" in spec:
        return (spec.get("template") or {}).get("spec") or {}
    return spec


def row(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status") or {}
    kind = obj.get("kind") or "?"
    state = status_of(obj)
    counts = (
        _counts(obj)
        if kind != "Pod"
        else {
            k: int(state == s)
            for k, s in (("active", "Running"), ("succeeded", "Succeeded"), ("failed", "Failed"))
        }
    )
    gpus, resource = gpu_request(obj)
    return {
        "namespace": meta(obj).get("namespace"),
        "name": labels_of(obj).get(JOB_LABEL) or name_of(obj),
        "kind": kind,
        "workers": workers(obj),
        "gpus_per_worker": gpus,
        "gpu_resource": resource,
        "status": state,
        **counts,
        "restarts": int(status.get("restarts") or 0) if kind == "JobSet" else 0,
        "queue": labels_of(obj).get(QUEUE_LABEL),
        "image": image(obj),
        "created": meta(obj).get("creationTimestamp"),
    }
