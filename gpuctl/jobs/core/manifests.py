"""Render a JobSpec into Kubernetes manifests (plain dicts, ready for YAML or the API)."""

from __future__ import annotations

from typing import Any

from gpuctl.gpus.dra import DraView
from gpuctl.jobs.core import autoscale, jobset, serving
from gpuctl.jobs.core.pods import (
    labels_for,
    metadata,
    pod_spec,
    template_metadata,
    with_torchrun_env,
)
from gpuctl.jobs.core.spec import JOBSET, JobSpec
from gpuctl.k8s import claims
from gpuctl.k8s.labels import JOB_LABEL
from gpuctl.k8s.placement import AUTO, Placement, place


def placement(
    spec: JobSpec,
    gpu_label_key: str = AUTO,
    nodes: list[dict[str, Any]] | None = None,
    dra: DraView | None = None,
    allocation: str = AUTO,
) -> Placement:
    """The GPU resource and node affinity of SPEC's workers, or their DRA claim
    (gpuctl.k8s.placement), from the cluster's NODES and DRA when they were read."""
    return place(spec.gpu_request, gpu_label_key, nodes, dra, allocation)


def render(
    spec: JobSpec,
    gpu_label_key: str = AUTO,
    target: serving.Target | None = None,
    nodes: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """All objects of the job, in the order they must be created: a Pod; a Job; for a
    multi-node job a headless Service and an Indexed Job, or a JobSet (multinode: jobset);
    for a service (kind Service) a Deployment, a Service and its autoscaler, as TARGET
    says (default: KEDA, in the spec's namespace or default).
    A job with a queue is created suspended, with Kueue's queue-name label: Kueue starts
    it when its ClusterQueue has quota for all of it. The GPUs go where placement() says."""
    return render_placed(spec, placement(spec, gpu_label_key, nodes), target)


def render_placed(
    spec: JobSpec, where: Placement, target: serving.Target | None = None
) -> list[dict[str, Any]]:
    """render() with the placement decided; a DRA claim's ResourceClaimTemplate first."""
    objects = _objects(spec, where, target)
    if where.claim is None or where.claim.extended_resource:
        return objects
    template = where.claim.template(claims.template_name(spec.name))
    if spec.namespace:
        template["metadata"]["namespace"] = spec.namespace
    template["metadata"]["labels"] = labels_for(spec)
    return [template, *objects]


def _objects(
    spec: JobSpec, where: Placement, target: serving.Target | None
) -> list[dict[str, Any]]:
    if spec.serving is not None:
        return serving.render(spec, where, target or serving.Target(spec.namespace or "default"))
    if spec.nodes > 1 and spec.multinode == JOBSET:
        return [jobset.render(spec, where)]
    if spec.kind == "Pod":
        pod = pod_spec(spec, where)
        pod["restartPolicy"] = "Never"
        if spec.deadline:
            pod["activeDeadlineSeconds"] = spec.deadline
        return [{"apiVersion": "v1", "kind": "Pod", "metadata": metadata(spec), "spec": pod}]

    pod = pod_spec(spec, where)
    pod["restartPolicy"] = "Never"
    job_spec: dict[str, Any] = {"backoffLimit": spec.retries}
    if spec.ttl_after_finished:
        job_spec["ttlSecondsAfterFinished"] = spec.ttl_after_finished
    if spec.deadline:
        job_spec["activeDeadlineSeconds"] = spec.deadline
    objects = []
    if spec.nodes > 1:
        job_spec.update(completionMode="Indexed", completions=spec.nodes, parallelism=spec.nodes)
        pod["subdomain"] = spec.name  # gives worker i the DNS name <name>-i.<name>
        with_torchrun_env(pod, spec, master=f"{spec.name}-0.{spec.name}")
        objects.append(_headless_service(spec))
    if spec.queue:
        job_spec["suspend"] = True
    job_spec["template"] = {"metadata": template_metadata(spec), "spec": pod}
    objects.append(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata(spec), "spec": job_spec}
    )
    return objects


def _headless_service(spec: JobSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**metadata(spec), "labels": labels_for(spec)},
        "spec": {
            "clusterIP": "None",
            # Workers must resolve each other before they are Ready (rendezvous comes first).
            "publishNotReadyAddresses": True,
            "selector": {JOB_LABEL: spec.name},
            "ports": [
                {"name": "rendezvous", "port": spec.master_port, "targetPort": spec.master_port}
            ],
        },
    }


def render_offline(
    spec: JobSpec,
    where: Placement,
    autoscaler: str | None = None,
    namespace: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """What `gpuctl render` prints, with no cluster to ask: the objects (a service's in
    NAMESPACE, else the spec's, else default, with AUTOSCALER, else KEDA's ScaledObject,
    and one surge pod) and, for a service's HPA, the prometheus-adapter rule it needs."""
    if spec.serving is None:
        return render_placed(spec, where), None
    ns = namespace or spec.namespace or "default"
    target = serving.Target(ns, autoscaler or autoscale.KEDA)
    objects = render_placed(spec, where, target)
    scale = spec.serving.autoscale
    if scale is None or target.autoscaler != autoscale.HPA:
        return objects, None
    promql = autoscale.query(spec.name, ns, scale, target.exporter)
    return objects, autoscale.adapter_rule(spec.name, ns, scale, promql, spec.mig is not None)
