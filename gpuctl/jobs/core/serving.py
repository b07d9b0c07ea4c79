"""Render a `kind: Service` spec: a Deployment of its replicas, a Service in front of them,
and, with autoscale, the ScaledObject (with prometheus_auth, after the TriggerAuthentication
it logs in by) or HPA that sizes the Deployment. Pure.

A rolling update takes room for its surge pods: `Rollout` says how much, so that a
service never holds more GPUs than its namespace's quota allows (sized by
gpuctl.jobs.submit from the quota; offline, one surge pod)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuctl.dcgm.holders import Exporter
from gpuctl.jobs.core import autoscale
from gpuctl.jobs.core.pods import labels_for, metadata, pod_spec
from gpuctl.jobs.core.service_spec import Probe, Serving
from gpuctl.jobs.core.spec import JobSpec
from gpuctl.k8s.labels import JOB_LABEL, MANAGED_BY
from gpuctl.k8s.placement import Placement


@dataclass(frozen=True)
class Rollout:
    """A Deployment's RollingUpdate: pods added above the replicas, pods taken down first."""

    max_surge: int
    max_unavailable: int
    why: str


NO_QUOTA = Rollout(1, 0, "one pod at a time, a new one Ready before an old one goes")


@dataclass(frozen=True)
class Target:
    """What the cluster (or, offline, the command line) decides for a service."""

    namespace: str
    autoscaler: str = autoscale.KEDA
    rollout: Rollout = NO_QUOTA
    exporter: Exporter = field(default_factory=Exporter)


def rollout_within(per_pod: int, peak: int, free: int | None) -> Rollout:
    """The rollout of a service of up to PEAK pods of PER_POD GPUs each, where FREE GPUs of
    the quota are left before it (None: no quota)."""
    if free is None or per_pod == 0:
        return NO_QUOTA
    spare = (free - peak * per_pod) // per_pod
    if spare <= 0:
        return Rollout(
            0, 1, f"the quota leaves no GPU beyond {peak} pods: an old pod goes before a new one"
        )
    surge = min(spare, peak)
    return Rollout(
        surge, 0, f"the quota leaves room for {surge} more pod(s) of {per_pod} GPU(s) at {peak}"
    )


def render(spec: JobSpec, where: Placement, target: Target) -> list[dict[str, Any]]:
    """The Deployment, the Service and the autoscaler (if any), in the order to create."""
    serving = spec.serving
    assert serving is not None, "render a kind Service spec"
    objects = [deployment(spec, serving, where, target.rollout), _service(spec, serving)]
    scale = serving.autoscale
    if scale is not None:
        promql = autoscale.query(spec.name, target.namespace, scale, target.exporter)
        meta = metadata(spec)
        if target.autoscaler == autoscale.KEDA:
            url = scale.prometheus or autoscale.DEFAULT_PROMETHEUS
            if scale.auth is not None:  # before the trigger that reads it
                auth = autoscale.trigger_authentication(
                    spec.name, target.namespace, meta, scale.auth
                )
                objects.append(auth)
            obj = autoscale.scaled_object(spec.name, target.namespace, meta, scale, promql, url)
        else:
            obj = autoscale.hpa(spec.name, target.namespace, meta, scale)
        objects.append(obj)
    # its query names the namespace: every object goes there
    return [{**o, "metadata": {**o["metadata"], "namespace": target.namespace}} for o in objects]


def selector(spec: JobSpec) -> dict[str, str]:
    return {MANAGED_BY[0]: MANAGED_BY[1], JOB_LABEL: spec.name}


def deployment(
    spec: JobSpec, serving: Serving, where: Placement, rollout: Rollout
) -> dict[str, Any]:
    pod = pod_spec(spec, where)
    container = pod["containers"][0]
    ports = [{"name": n, "containerPort": p} for n, p in serving.ports]
    if serving.metrics_port is not None and serving.metrics_port not in (
        p for _, p in serving.ports
    ):
        ports.append({"name": "metrics", "containerPort": serving.metrics_port})
    if ports:
        container["ports"] = ports
    for key, probe in (("readinessProbe", serving.readiness), ("livenessProbe", serving.liveness)):
        if probe is not None:
            container[key] = _probe(probe)
    template: dict[str, Any] = {"labels": labels_for(spec)}
    if serving.metrics_port is not None:
        # the scrape annotations of Prometheus' kubernetes-pods job (its Helm chart's)
        template["annotations"] = {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(serving.metrics_port),
            "prometheus.io/path": "/metrics",
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(spec),
        "spec": {
            "replicas": serving.initial_replicas,
            "selector": {"matchLabels": selector(spec)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {
                    "maxSurge": rollout.max_surge,
                    "maxUnavailable": rollout.max_unavailable,
                },
            },
            "template": {"metadata": template, "spec": pod},
        },
    }


def _probe(probe: Probe) -> dict[str, Any]:
    out: dict[str, Any] = (
        {"httpGet": {"path": probe.path, "port": probe.port}}
        if probe.path
        else {"tcpSocket": {"port": probe.port}}
    )
    for key, value in (
        ("initialDelaySeconds", probe.initial_delay),
        ("periodSeconds", probe.period),
        ("timeoutSeconds", probe.timeout),
        ("failureThreshold", probe.failure_threshold),
    ):
        if value is not None:
            out[key] = value
    return out


def _service(spec: JobSpec, serving: Serving) -> dict[str, Any]:
    ports = [{"name": n, "port": p, "targetPort": p} for n, p in serving.ports]
    if serving.metrics_port is not None and serving.metrics_port not in (
        p for _, p in serving.ports
    ):
        port = serving.metrics_port
        ports.append({"name": "metrics", "port": port, "targetPort": port})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(spec),
        "spec": {"selector": selector(spec), "ports": ports},
    }
