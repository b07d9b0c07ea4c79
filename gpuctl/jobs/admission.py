"""What the cluster decides about a job before it is rendered for `gpuctl submit`: the
form of a multi-node job (a JobSet when the cluster has JobSet, else an Indexed Job), the
Kueue LocalQueue it goes to (the one asked for, else the namespace's only one), and
whether its namespace's GPU quota has room for it."""

from __future__ import annotations

import dataclasses

from gpuctl.adapters.kube import Forbidden, Kube, NotFound
from gpuctl.common.errors import GpuctlError, SpecError
from gpuctl.jobs.core import autoscale, quota_check, serving
from gpuctl.jobs.core.spec import INDEXED_JOB, JOBSET, JobSpec, jobset_name_problem
from gpuctl.k8s import apis
from gpuctl.k8s.objects import name_of, namespace_of
from gpuctl.k8s.placement import Placement

INSTALL_JOBSET = (
    "install JobSet (kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/"
    "releases/download/v0.12.0/manifests.yaml) or use multinode: indexed-job"
)


def multinode(kube: Kube | None, spec: JobSpec, option: str | None) -> JobSpec:
    """The spec with its multi-node form decided: the option, else the spec's, else a
    JobSet when the cluster has JobSet's CRD (with no cluster: an Indexed Job)."""
    if spec.nodes == 1:
        return spec
    chosen = option or spec.multinode
    if chosen is None:
        chosen = (
            JOBSET if kube is not None and kube.serves(apis.JOBSET_API_VERSION) else INDEXED_JOB
        )
        if chosen == JOBSET and (problem := jobset_name_problem(spec.name, spec.nodes)):
            raise SpecError(
                problem,
                file=spec.source,
                field="name",
                hint="a shorter name, or --multinode indexed-job",
            )
    elif chosen == JOBSET:
        if problem := jobset_name_problem(spec.name, spec.nodes):
            raise SpecError(problem, file=spec.source, field="name", hint="a shorter name")
        if kube is not None and not kube.serves(apis.JOBSET_API_VERSION):
            raise GpuctlError(
                f"{spec.name} is a JobSet, but this cluster has no JobSet "
                f"(it serves no {apis.JOBSET_API_VERSION} API)",
                hint=INSTALL_JOBSET,
            )
    return dataclasses.replace(spec, multinode=chosen)


def queue(kube: Kube, spec: JobSpec, namespace: str) -> tuple[JobSpec, str | None]:
    """The spec with its LocalQueue decided, and a note for the user when the namespace
    has queues but the job goes to none. A queue the spec names must exist."""
    if spec.kind != "Job":
        return spec, None
    version = kube.kueue_version()
    if spec.queue is not None:
        if version is None:
            raise GpuctlError(
                f"{spec.name} asks for queue {spec.queue}, but this cluster has no Kueue "
                "(it serves no kueue.x-k8s.io API)",
                hint="install Kueue, or remove queue: from the job",
            )
        try:
            kube.read(
                "LocalQueue", spec.queue, namespace, api_version=apis.kueue_api_version(version)
            )
        except NotFound:
            names = _local_queues(kube, namespace, version)
            raise GpuctlError(
                f"no LocalQueue {spec.queue!r} in namespace {namespace}; nothing was sent",
                hint=f"queues there: {', '.join(names)}"
                if names
                else f"gpuctl quota set {namespace} --gpus N makes one",
            ) from None
        return spec, None
    if version is None:
        return spec, None
    try:
        names = _local_queues(kube, namespace, version)
    except Forbidden:
        return spec, f"cannot list the LocalQueues of namespace {namespace}: the job is not queued"
    if len(names) == 1:
        return dataclasses.replace(spec, queue=names[0]), None
    if names:
        return spec, (
            f"namespace {namespace} has LocalQueues {', '.join(names)}: name one with "
            "queue: to have Kueue admit the job; it is not queued"
        )
    return spec, None


def _local_queues(kube: Kube, namespace: str, version: str) -> list[str]:
    found = kube.list_objects("LocalQueue", namespace, api_version=apis.kueue_api_version(version))
    return sorted(name_of(q) for q in found if namespace_of(q) in ("", namespace))


def within_quota(
    kube: Kube, spec: JobSpec, where: Placement, namespace: str, pods: list[dict] | None = None
) -> None:
    """Refuse (GpuctlError) a job whose workers, placed WHERE, would push its namespace
    over a GPU quota. PODS: the unfinished pods when already read (of any namespaces: only
    NAMESPACE's count)."""
    if where.resource is None and where.claim is None:
        return
    quotas = kube.list_objects("ResourceQuota", namespace)
    if pods is None and any(quota_check.needs_pods(quotas, r) for r, _ in quota_check.charged(where)):  # fmt: skip
        pods = kube.unfinished_pods(namespace)
    refusal = quota_check.refusal(spec, where, namespace, quotas, pods)
    if refusal is not None:
        raise refusal


def serving_target(
    kube: Kube, spec: JobSpec, where: Placement, namespace: str, option: str | None
) -> serving.Target:
    """What the cluster decides for a service: its autoscaler (the option, else KEDA where
    its CRDs are served, else an HPA) and a rollout whose surge pods, placed WHERE, fit the
    GPU quota."""
    assert spec.serving is not None
    scale = spec.serving.autoscale
    chosen = option or (
        autoscale.KEDA if scale is None or kube.serves(apis.KEDA_API_VERSION) else autoscale.HPA
    )
    if scale is not None and chosen == autoscale.KEDA and not kube.serves(apis.KEDA_API_VERSION):
        raise GpuctlError(
            f"{spec.name} asks for KEDA, but this cluster has no KEDA (it serves no "
            f"{apis.KEDA_API_VERSION} API)",
            hint="install KEDA (helm install keda kedacore/keda -n keda --create-namespace), "
            "or --autoscaler hpa",
        )
    if scale is not None and chosen == autoscale.HPA and scale.min == 0:
        raise SpecError(
            "an HPA cannot scale to zero (minReplicas ≥ 1): scale to zero needs KEDA",
            file=spec.source,
            field="autoscale.min",
        )
    return serving.Target(namespace, chosen, rollout=_rollout(kube, spec, where, namespace))


def _rollout(kube: Kube, spec: JobSpec, where: Placement, namespace: str) -> serving.Rollout:
    assert spec.serving is not None
    if where.resource is None:
        return serving.NO_QUOTA
    resource, per_pod = where.resource, where.per_worker
    try:
        quotas = kube.list_objects("ResourceQuota", namespace)
        pods = kube.unfinished_pods(namespace) if quota_check.needs_pods(quotas, resource) else None
    except Forbidden:
        return serving.NO_QUOTA
    left = quota_check.free(quotas, pods, namespace, resource)
    return serving.rollout_within(per_pod, spec.serving.peak_replicas, left)
