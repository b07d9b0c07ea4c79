"""The quota pre-check of `gpuctl submit`: would the job push its namespace over a GPU
ResourceQuota? Pure: quotas and pods come in as the API returns them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError
from gpuctl.common.quantity import rounded_down
from gpuctl.gpus.resources import DONE_PHASES, requested
from gpuctl.jobs.core.spec import JobSpec
from gpuctl.k8s.nodes import GPU, MIG_PREFIX
from gpuctl.k8s.objects import name_of, namespace_of
from gpuctl.k8s.placement import Placement


@dataclass(frozen=True)
class Excess:
    quota: str
    resource: str
    used: int
    requested: int
    allowed: int
    source: str  # where `used` came from: "quota" status or "pods"

    @property
    def free(self) -> int:
        return max(self.allowed - self.used, 0)


def _keys(resource: str) -> tuple[str, str]:
    return f"requests.{resource}", resource


def needs_pods(quotas: list[dict[str, Any]], resource: str) -> bool:
    """Whether some quota on `resource` lacks a used count, so the pods must be counted."""
    for q in quotas:
        spec_hard = (q.get("spec") or {}).get("hard") or {}
        status_used = (q.get("status") or {}).get("used") or {}
        if any(k in spec_hard and k not in status_used for k in _keys(resource)):
            return True
    return False


def _held(pods: list[dict[str, Any]], namespace: str, resource: str) -> int:
    """How many of `resource` the unfinished pods of `namespace` request."""
    return sum(
        requested(p, resource)
        for p in pods
        if namespace_of(p) in ("", namespace)
        and (p.get("status") or {}).get("phase") not in DONE_PHASES
    )


def free(
    quotas: list[dict[str, Any]],
    pods: list[dict[str, Any]] | None,
    namespace: str,
    resource: str,
) -> int | None:
    """How many more of RESOURCE the namespace's quotas allow (the least of them); None
    when no quota limits it."""
    left = [
        excess.free
        for q in quotas
        if (excess := check_job([q], pods, namespace, resource, 2**62)) is not None
    ]
    return min(left) if left else None


def check_job(
    quotas: list[dict[str, Any]],
    pods: list[dict[str, Any]] | None,
    namespace: str,
    resource: str,
    total: int,
) -> Excess | None:
    """The first quota in `namespace` that `total` more of `resource` would exceed.
    `pods` may be None when every quota carries its used count in its status."""
    for q in sorted(quotas, key=name_of):
        spec_hard = (q.get("spec") or {}).get("hard") or {}
        status_used = (q.get("status") or {}).get("used") or {}
        for key in _keys(resource):
            if key not in spec_hard:
                continue
            limit = rounded_down(spec_hard[key])
            if limit is None:
                continue
            counted = rounded_down(status_used[key]) if key in status_used else None
            if counted is not None:
                used, source = counted, "quota"
            else:
                used, source = _held(pods or [], namespace, resource), "pods"
            if used + total > limit:
                name = name_of(q) or "?"
                return Excess(name, resource, used, total, limit, source)
    return None


def refusal(
    spec: JobSpec,
    where: Placement,
    namespace: str,
    quotas: list[dict[str, Any]],
    pods: list[dict[str, Any]] | None,
) -> GpuctlError | None:
    """The error that refuses a job which would exceed a GPU quota of its namespace, or
    None where it fits (or asks for no GPU). Its workers ask for what WHERE, the placement
    they are rendered with, says: under MIG's single strategy a MIG slice is nvidia.com/gpu,
    a shared GPU nvidia.com/gpu unless the device plugin renamed it."""
    if where.resource is None:
        return None
    name, per_worker = where.resource, where.per_worker
    total = per_worker * spec.pods
    excess = check_job(quotas, pods, namespace, name, total)
    if excess is None:
        return None
    noun = "replicas" if spec.serving else "workers"
    workers = f" ({spec.pods} {noun} × {per_worker})" if spec.pods > 1 else ""
    how = f"quota {excess.quota}'s requests.{name}"  # gpuctl quota set has no option for it
    if name == GPU or name.startswith(MIG_PREFIX):
        option = "--gpus N" if name == GPU else "--mig PROFILE=K"
        how = f"it (gpuctl quota set {namespace} {option})"
    return GpuctlError(
        f"{spec.name} would exceed the quota of namespace {namespace}: it requests "
        f"{total} {name}{workers}, {excess.used} are used and quota {excess.quota} allows "
        f"{excess.allowed} ({excess.free} free); nothing was sent",
        hint=f"raise {how} or wait for jobs in {namespace} to finish",
    )
