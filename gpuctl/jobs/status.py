"""Summarise gpuctl-managed Jobs and Pods (as the API returns them) into rows."""

from __future__ import annotations

from typing import Any

from gpuctl.gpus.resources import requested
from gpuctl.jobs.manifests import JOB_LABEL

FINISHED = ("Succeeded", "Failed")


def status_of(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    if obj.get("kind") == "Pod":
        return status.get("phase") or "Pending"
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True":
            if cond.get("type") in ("Complete", "SuccessCriteriaMet"):
                return "Succeeded"
            if cond.get("type") in ("Failed", "FailureTarget"):
                return "Failed"
    if status.get("active"):
        return "Running"
    return "Pending"


def gpu_request(pod_spec_owner: dict[str, Any]) -> str:
    """'2 × nvidia.com/gpu' for a Pod or a Job's pod template; '-' when no GPU."""
    spec = pod_spec_owner.get("spec") or {}
    pod = (
        {"spec": (spec.get("template") or {}).get("spec") or {}}
        if "template" in spec
        else pod_spec_owner
    )
    for c in (pod.get("spec") or {}).get("containers") or []:
        for name in (c.get("resources") or {}).get("limits") or {}:
            if name.startswith("nvidia.com/"):
                return f"{requested(pod, name)} × {name}"
    return "-"


def row(obj: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    kind = obj.get("kind") or "?"
    workers = spec.get("completions") or 1 if kind == "Job" else 1
    return {
        "namespace": meta.get("namespace"),
        "name": (meta.get("labels") or {}).get(JOB_LABEL) or meta.get("name"),
        "kind": kind,
        "workers": workers,
        "gpus_per_worker": gpu_request(obj),
        "status": status_of(obj),
        "active": status.get("active", 0) if kind == "Job" else int(status_of(obj) == "Running"),
        "succeeded": status.get("succeeded", 0)
        if kind == "Job"
        else int(status_of(obj) == "Succeeded"),
        "failed": status.get("failed", 0) if kind == "Job" else int(status_of(obj) == "Failed"),
    }
