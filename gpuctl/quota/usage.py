"""What `quota list` reads: the Kueue API the cluster serves (which says where the quotas
are), and, without Kueue, the GPUs each namespace's ResourceQuotas allow and its pods use.
Kept apart from the `quota set` workflow, whose modules a listing does not need."""

from __future__ import annotations

from gpuctl.adapters.kube import Forbidden, Kube
from gpuctl.k8s.objects import meta, namespace_of
from gpuctl.quota.core import rules


def served_version(kube: Kube) -> str | None:
    """The Kueue API version gpuctl will speak with this cluster; None without Kueue, and
    where RBAC forbids discovery (readable by every authenticated user, unless RBAC says no)."""
    try:
        return kube.kueue_version()
    except Forbidden:
        return None


def usage(kube: Kube, namespace: str | None) -> list[dict]:
    if namespace:
        quotas = kube.list_objects("ResourceQuota", namespace)
        pods = kube.list_objects("Pod", namespace)
        quotas, pods = _in(namespace, quotas), _in(namespace, pods)
    else:
        quotas = kube.list_objects("ResourceQuota")
        pods = kube.unfinished_pods()
    rows = rules.usage_rows(quotas, pods, kube.dra())
    return [r for r in rows if not namespace or r["namespace"] == namespace]


def _in(namespace: str, items: list[dict]) -> list[dict]:
    """Objects from a namespaced list, each with its namespace set (and nothing from others)."""
    return [
        {**o, "metadata": {**meta(o), "namespace": namespace}}
        for o in items
        if namespace_of(o) in ("", namespace)
    ]
