"""Per-team GPU quotas on a cluster: plan and apply `quota set`, usage for `quota list`, and
the pre-check `gpuctl submit` runs before it sends a job."""

from __future__ import annotations

from dataclasses import dataclass

from gpuctl.adapters.kube import Kube, NotFound
from gpuctl.common.errors import GpuctlError
from gpuctl.jobs.spec import JobSpec
from gpuctl.quota import rules as core


@dataclass
class QuotaPlan:
    team: str
    create_namespace: bool
    current: dict | None  # the existing quota's spec.hard, None if there is none
    desired: dict[str, str]

    @property
    def changes(self) -> list[tuple[str, str | None, str | None]]:
        return core.diff(self.current, self.desired)

    @property
    def quota_action(self) -> str:
        if self.current is None:
            return "create"
        return "update" if self.changes else "unchanged"

    def objects(self) -> list[dict]:
        """What gpuctl creates or updates (an existing namespace is left as it is)."""
        ns = [core.namespace_object(self.team)] if self.create_namespace else []
        return ns + [core.quota_object(self.team, self.desired)]


def plan_set(kube: Kube, team: str, gpus: int, mig: dict[str, int]) -> QuotaPlan:
    desired = core.hard(gpus, mig)
    try:
        kube.call(kube.core.read_namespace, team, what=f"reading namespace {team}")
        create_ns = False
    except NotFound:
        create_ns = True
    current = None
    if not create_ns:
        try:
            obj = kube.call(
                kube.core.read_namespaced_resource_quota,
                core.QUOTA_NAME,
                team,
                what=f"reading ResourceQuota {team}/{core.QUOTA_NAME}",
            )
            current = (obj.get("spec") or {}).get("hard") or {}
        except NotFound:
            pass
    return QuotaPlan(team, create_ns, current, desired)


def apply_set(kube: Kube, p: QuotaPlan) -> None:
    if p.create_namespace:
        kube.call(
            kube.core.create_namespace,
            core.namespace_object(p.team),
            what=f"creating namespace {p.team}",
        )
    if p.current is None:
        kube.call(
            kube.core.create_namespaced_resource_quota,
            p.team,
            core.quota_object(p.team, p.desired),
            what=f"creating ResourceQuota {p.team}/{core.QUOTA_NAME}",
        )
    elif p.changes:
        # gpuctl owns this quota object: its hard limits are replaced as a whole, so a MIG
        # profile left out of --mig is removed
        kube.call(
            kube.core.patch_namespaced_resource_quota,
            core.QUOTA_NAME,
            p.team,
            [{"op": "replace", "path": "/spec/hard", "value": p.desired}],
            what=f"updating ResourceQuota {p.team}/{core.QUOTA_NAME}",
        )


def usage(kube: Kube, namespace: str | None) -> list[dict]:
    if namespace:
        quotas = kube.call(
            kube.core.list_namespaced_resource_quota, namespace, what="listing ResourceQuotas"
        )["items"]
        pods = kube.call(kube.core.list_namespaced_pod, namespace, what="listing pods")["items"]
        quotas, pods = _in(namespace, quotas), _in(namespace, pods)
    else:
        quotas = kube.call(
            kube.core.list_resource_quota_for_all_namespaces, what="listing ResourceQuotas"
        )["items"]
        pods = kube.unfinished_pods()
    return core.usage_rows(quotas, pods)


def _in(namespace: str, items: list[dict]) -> list[dict]:
    """Objects from a namespaced list, each with its namespace set (and nothing from others)."""
    return [
        {**o, "metadata": {**(o.get("metadata") or {}), "namespace": namespace}}
        for o in items
        if (o.get("metadata") or {}).get("namespace") in (None, namespace)
    ]


def precheck(kube: Kube, spec: JobSpec, namespace: str) -> None:
    """Refuse (GpuctlError) a job that would push its namespace over a GPU quota."""
    resource = spec.gpu_resource
    if resource is None:
        return
    name, per_worker = resource
    total = per_worker * spec.nodes
    quotas = kube.call(
        kube.core.list_namespaced_resource_quota,
        namespace,
        what=f"reading quotas of namespace {namespace}",
    )["items"]
    pods = None
    if core.needs_pods(quotas, name):
        pods = _in(namespace, kube.unfinished_pods(namespace))
    excess = core.check_job(quotas, pods, namespace, name, total)
    if excess is None:
        return
    workers = f" ({spec.nodes} workers × {per_worker})" if spec.nodes > 1 else ""
    raise GpuctlError(
        f"{spec.name} would exceed the quota of namespace {namespace}: it requests "
        f"{total} {name}{workers}, {excess.used} are used and quota {excess.quota} allows "
        f"{excess.allowed} ({excess.free} free); nothing was sent",
        hint=(
            f"raise it (gpuctl quota set {namespace} --gpus N) or wait for jobs in "
            f"{namespace} to finish"
            if name == core.GPU
            else f"raise it (gpuctl quota set {namespace} --mig PROFILE=K) or wait for jobs in "
            f"{namespace} to finish"
        ),
    )
