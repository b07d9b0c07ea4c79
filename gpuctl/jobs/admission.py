"""What the cluster decides about a job before it is rendered for `gpuctl submit`: the
form of a multi-node job (a JobSet when the cluster has JobSet, else an Indexed Job), the
Kueue LocalQueue it goes to (the one asked for, else the namespace's only one), and
whether its namespace's GPU quota has room for it."""

from __future__ import annotations

import dataclasses

from gpuctl.adapters.kube import Forbidden, Kube, NotFound
from gpuctl.common.errors import GpuctlError, SpecError
from gpuctl.gpus import topology as domains
from gpuctl.gpus.dra import DraView
from gpuctl.jobs.core import autoscale, quota_check, serving
from gpuctl.jobs.core import topology as together
from gpuctl.jobs.core.spec import INDEXED_JOB, JOBSET, JobSpec, jobset_name_problem
from gpuctl.k8s import apis, compute_domain
from gpuctl.k8s.objects import labels_of, name_of, namespace_of
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


def compute_domain_served(kube: Kube, spec: JobSpec) -> None:
    """A job with a ComputeDomain needs a cluster that serves them (NVIDIA's DRA driver)."""
    if spec.compute_domain and not kube.serves(compute_domain.API_VERSION):
        raise GpuctlError(
            f"{spec.name} asks for a ComputeDomain (compute_domain: true), but this cluster "
            f"serves no {compute_domain.API_VERSION} API",
            hint=compute_domain.INSTALL,
        )


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


def topology(kube: Kube | None, spec: JobSpec, nodes: list[dict] | None, namespace: str) -> JobSpec:
    """The spec with its topology resolved: the label key its `within` means on the
    cluster's NODES (read here when not given; a name or key no node carries is refused,
    naming what they carry) and the engine that keeps its pods in one domain. With no
    cluster (KUBE None) the name's first key is assumed, kept by JobSet or pod affinity."""
    c = spec.topology
    if c is None:
        return spec
    assumed = None
    try:
        if kube is None:
            raise Forbidden("no cluster was read")
        nodes = kube.list_objects("Node") if nodes is None else nodes
        key = domains.resolve(c.within, [labels_of(n) for n in nodes])
    except Forbidden as e:  # RBAC for one namespace only: the name's first key is a guess
        key = domains.assumed(c.within)
        assumed = f"{e.message}: topology {c.within} assumed to be {key}" + (
            " (gpuctl submit reads the nodes' labels)" if c.within != key else ""
        )
    except domains.TopologyError as e:
        raise SpecError(e.message, file=spec.source, field="topology.within") from None
    tas = _tas_topologies(kube, spec, namespace)
    if tas:
        _listed(spec, key, tas)
    engine = together.engine_for(
        c.required,
        tas is not None,
        spec.multinode == JOBSET and spec.nodes > 1 and spec.serving is None,
    )
    resolved = dataclasses.replace(c, key=key, engine=engine, assumed=assumed)
    return dataclasses.replace(spec, topology=resolved)


def nvlink_domain(
    kube: Kube, spec: JobSpec, nodes: list[dict] | None, dra: DraView | None
) -> JobSpec:
    """The spec with a ComputeDomain where its required topology is one NVLink clique
    (`within: nvlink`) of whole NVIDIA GPUs across workers, on a cluster that serves
    ComputeDomains and whose clique nodes are DRA-managed trays (the driver's compute-domain
    kubelet plugin publishes their channels): there the workers share NVLink only through
    an IMEX channel of one ComputeDomain."""
    c = spec.topology
    if (
        spec.compute_domain
        or c is None
        or not c.required
        or c.key != compute_domain.CLIQUE_LABEL
        or spec.nodes < 2
        or spec.serving is not None
        or not spec.gpus
        or spec.mig
        or spec.accelerator is not None
        or nodes is None
        or dra is None
    ):
        return spec
    trays = [name_of(n) for n in nodes if compute_domain.CLIQUE_LABEL in labels_of(n)]
    managed = any(d.driver == compute_domain.DRIVER for t in trays for d in dra.on(t))
    if not managed or not kube.serves(compute_domain.API_VERSION):
        return spec
    return dataclasses.replace(spec, compute_domain=True)


def _tas_topologies(
    kube: Kube | None, spec: JobSpec, namespace: str
) -> dict[str, list[str] | None] | None:
    """Where Kueue will place SPEC by topology (it is queued, and a flavor of its
    ClusterQueue names a Topology: ResourceFlavor spec.topologyName), each Topology its
    flavors name → its levels (None: it does not exist); {} where RBAC hides the Topologies;
    None where Kueue does not place it by topology."""
    if kube is None or spec.queue is None:
        return None
    version = kube.kueue_version()
    if version is None:
        return None
    api = apis.kueue_api_version(version)
    try:
        local = kube.read("LocalQueue", spec.queue, namespace, api_version=api)
        cluster_queue = (local.get("spec") or {}).get("clusterQueue") or ""
        groups = (kube.read("ClusterQueue", cluster_queue, api_version=api).get("spec") or {}).get(
            "resourceGroups"
        ) or []
        flavors = sorted({f["name"] for g in groups for f in g.get("flavors") or []})
        named = [
            (kube.read("ResourceFlavor", f, api_version=api).get("spec") or {}).get("topologyName")
            for f in flavors
        ]
    except (NotFound, Forbidden):
        return None
    names = sorted({str(n) for n in named if n})
    if not names:
        return None
    topology_api = apis.kueue_topology_api_version(kube.api_versions(apis.KUEUE_GROUP), version)
    out: dict[str, list[str] | None] = {}
    for name in names:
        try:
            out[name] = domains.kueue_levels(kube.read("Topology", name, api_version=topology_api))
        except NotFound:
            out[name] = None
        except Forbidden:  # the Topologies are the admin's to read: Kueue will say
            return {}
    return out


def _listed(spec: JobSpec, key: str, topologies: dict[str, list[str] | None]) -> None:
    """Refuse a topology KEY that no Topology of the queue's flavors lists: Kueue admits
    a pod set that asks for a level its flavor's Topology lacks nowhere."""
    if any(levels and key in levels for levels in topologies.values()):
        return
    each = "; ".join(
        f"Topology {name} lists {', '.join(levels)}"
        if levels
        else f"Topology {name} does not exist"
        for name, levels in topologies.items()
    )
    raise SpecError(
        f"queue {spec.queue} places pods by Kueue's topology, and no Topology of its flavors "
        f"lists {key}: {each}; Kueue would never admit the job",
        file=spec.source,
        field="topology.within",
        hint="ask within one of those levels, or tie the flavors to a Topology of the nodes' "
        "levels (gpuctl quota set does)",
    )


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
