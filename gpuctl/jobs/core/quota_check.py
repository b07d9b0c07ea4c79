"""The quota pre-check of `gpuctl submit`: would the job push its namespace over a GPU
ResourceQuota? A worker is charged its limit, and its DRA claim's devices per DeviceClass
(`<class>.deviceclass.resource.k8s.io/devices`) as the API server charges them — the claim
kube-scheduler makes for a limit a DeviceClass maps (KEP-5004) too (gpuctl.gpus.dra.charges).
Pure: quotas and pods come in as the API returns them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError
from gpuctl.common.quantity import rounded_down
from gpuctl.gpus import dra
from gpuctl.gpus.resources import DONE_PHASES, requested
from gpuctl.jobs.core.spec import JobSpec
from gpuctl.k8s import claims
from gpuctl.k8s.dra_quota import DRA_SUFFIX, quota_resource
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
    for name, per_worker in charged(where):
        total = per_worker * spec.pods
        excess = check_job(quotas, pods, namespace, name, total)
        if excess is not None:
            return _refused(spec, namespace, name, per_worker, excess)
    return None


def charged(where: Placement) -> list[tuple[str, int]]:
    """(quota resource, per worker) of what each worker placed WHERE is charged."""
    out = [(where.resource, where.per_worker)] if where.resource else []
    claim = where.claim
    if claim is not None:
        first = claim.choices[0]
        spec = (
            {"devices": {"requests": [{"name": first.name, "exactly": first.to_dict(claim.count)}]}}
            if claim.extended_resource
            else claim.template(claims.CLAIM)["spec"]["spec"]
        )
        out += [(quota_resource(c), n) for c, n in dra.charges(spec).items()]
    return out


def _refused(spec: JobSpec, namespace: str, name: str, per_worker: int, excess: Excess) -> GpuctlError:  # fmt: skip
    total = excess.requested
    noun = "replicas" if spec.serving else "workers"
    workers = f" ({spec.pods} {noun} × {per_worker})" if spec.pods > 1 else ""
    key = name if name.endswith(DRA_SUFFIX) else f"requests.{name}"
    how = f"quota {excess.quota}'s {key}"  # gpuctl quota set has no option for it
    options = {GPU: "--gpus N", quota_resource(claims.GPU_CLASS): "--gpus N", quota_resource(claims.MIG_CLASS): "--mig PROFILE=K"}  # fmt: skip
    if name in options or name.startswith(MIG_PREFIX):
        option = options.get(name, "--mig PROFILE=K")
        how = f"it (gpuctl quota set {namespace} {option})"
    return GpuctlError(
        f"{spec.name} would exceed the quota of namespace {namespace}: it requests "
        f"{total} {name}{workers}, {excess.used} are used and quota {excess.quota} allows "
        f"{excess.allowed} ({excess.free} free); nothing was sent",
        hint=f"raise {how} or wait for jobs in {namespace} to finish",
    )
