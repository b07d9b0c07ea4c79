"""Per-team GPU quotas on a cluster: plan and apply `quota set`, usage for `quota list`."""

from __future__ import annotations

from dataclasses import dataclass

from gpuctl.adapters.kube import Kube, NotFound
from gpuctl.adapters.kube_atomic import create_all
from gpuctl.quota.core import rules as core


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


def plan_set(kube: Kube | None, team: str, gpus: int, mig: dict[str, int]) -> QuotaPlan:
    """What `quota set` would do. Without a cluster (kube None) both objects are new."""
    desired = core.hard(gpus, mig)
    if kube is None:
        return QuotaPlan(team, True, None, desired)
    try:
        kube.read("Namespace", team)
        create_ns = False
    except NotFound:
        create_ns = True
    current = None
    if not create_ns:
        try:
            obj = kube.read("ResourceQuota", core.QUOTA_NAME, team)
            current = (obj.get("spec") or {}).get("hard") or {}
        except NotFound:
            pass
    return QuotaPlan(team, create_ns, current, desired)


def apply_set(kube: Kube, p: QuotaPlan) -> None:
    """A new namespace and its quota are created together or not at all."""
    if p.create_namespace:
        create_all(kube, p.objects(), cleanup=f"kubectl delete namespace {p.team}")
    elif p.current is None:
        kube.create(core.quota_object(p.team, p.desired))
    elif p.changes:
        # gpuctl owns this quota object: its hard limits are replaced as a whole, so a MIG
        # profile left out of --mig is removed
        kube.patch(
            "ResourceQuota",
            core.QUOTA_NAME,
            p.team,
            [{"op": "replace", "path": "/spec/hard", "value": p.desired}],
        )


def usage(kube: Kube, namespace: str | None) -> list[dict]:
    if namespace:
        quotas = kube.list_objects("ResourceQuota", namespace)
        pods = kube.list_objects("Pod", namespace)
        quotas, pods = _in(namespace, quotas), _in(namespace, pods)
    else:
        quotas = kube.list_objects("ResourceQuota")
        pods = kube.unfinished_pods()
    return core.usage_rows(quotas, pods)


def _in(namespace: str, items: list[dict]) -> list[dict]:
    """Objects from a namespaced list, each with its namespace set (and nothing from others)."""
    return [
        {**o, "metadata": {**(o.get("metadata") or {}), "namespace": namespace}}
        for o in items
        if (o.get("metadata") or {}).get("namespace") in (None, namespace)
    ]
