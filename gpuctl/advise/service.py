"""Ask Prometheus the advice's five queries at once, and the cluster who owns the pods (where
there is one to ask), then decide."""

from __future__ import annotations

from gpuctl.adapters.kube import Forbidden, Kube
from gpuctl.advise.core import decide, owners
from gpuctl.common.errors import BackendError
from gpuctl.dcgm.holders import Exporter
from gpuctl.dcgm.metrics import FB_USED


def cluster_owners(kube: Kube | None, namespace: str | None) -> owners.Owners | None:
    """The pods' owners as the cluster's objects say; None without a cluster, or where RBAC
    hides them (kube-state-metrics' series and the pods' names then decide)."""
    if kube is None:
        return None
    try:
        return owners.from_objects(
            kube.unfinished_pods(namespace),
            kube.list_objects("Job", namespace),
            kube.list_objects("ReplicaSet", namespace),
        )
    except Forbidden:
        return None


def advise(
    client,
    window: str,
    idle_threshold: float,
    namespace: str | None,
    exporter: Exporter,
    kube: Kube | None = None,
) -> decide.Advice:
    """KUBE: the cluster whose pods' owners name the workloads (None: none to ask)."""
    queries = decide.queries(window)  # checks --window before anything is sent
    now, peak, p95, top, owner_samples = client.query_all(queries.all())
    if not now:
        raise BackendError(
            f"no DCGM-exporter metrics in Prometheus at {client.url} "
            f"(no {FB_USED} series of a whole GPU in the last 5 minutes)",
            hint="deploy dcgm-exporter (the NVIDIA GPU Operator does) and make "
            "sure this Prometheus scrapes it",
        )
    cluster = cluster_owners(kube, namespace)
    advice = decide.advise(
        now, peak, p95, top, owner_samples, idle_threshold, namespace, exporter, cluster
    )
    if "sm_active" in advice.signal:
        # How much SM activity changed the advice: the same, by the duty cycles alone.
        p95, top = client.query_all([queries.p95_duty_cycle, queries.max_duty_cycle])
        duty = decide.advise(
            now, peak, p95, top, owner_samples, idle_threshold, namespace, exporter, cluster
        )
        advice.duty_cycle_totals = duty.totals
    return advice
