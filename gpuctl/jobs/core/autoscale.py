"""A service's autoscaler: the PromQL of its signal, and the object that scales on it, a
KEDA ScaledObject with a Prometheus trigger or an autoscaling/v2 HPA on an external metric
(with the prometheus-adapter rule that serves the metric). Pure.

Every query returns one value per service, the signal per replica: the mean GPU busy
percent of its pods (each pod's mean over its GPUs), or of the batcher's metrics (as
gpuctl.batching.prometheus exports them, scraped with `namespace` and `pod` labels, as a
PodMonitor, a ServiceMonitor or the `prometheus.io/scrape` annotation do) the requests
queued per replica, requests per second per replica, or the mean latency. The scaler
compares it with the target as a Value (KEDA's metricType Value, the HPA's target type
Value): desired replicas = ceil(replicas × value / target)."""

from __future__ import annotations

from typing import Any

from gpuctl.common import batcher_metrics as batcher
from gpuctl.dcgm import busy, holders
from gpuctl.dcgm.holders import Exporter
from gpuctl.dcgm.metrics import GR_ACTIVE, IDENTITY, UTIL
from gpuctl.jobs.core.service_spec import Autoscale, PrometheusAuth
from gpuctl.k8s.apis import KEDA_API_VERSION

KEDA, HPA = "keda", "hpa"
AUTOSCALERS = (KEDA, HPA)
# The Prometheus Operator's governing Service of every Prometheus it runs (kube-prometheus
# puts them in namespace monitoring).
DEFAULT_PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
# Characters of a pod-template-hash and of a generated name's suffix (apimachinery's
# util/rand alphanums: no vowels, no 0, 1 or 3, so that no word is ever spelled).
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_POD = "gpuctl_pod"  # the label a holder's pod is copied to, whatever the scrape named it


def pod_regex(name: str) -> str:
    """The names of the pods of Deployment NAME (`<name>-<hash>-<5 characters>`), and of
    no other Deployment's (`<name>-v2-<hash>-<…>` has one part too many)."""
    chars = f"[{_NAME_CHARS}]"
    return f"{name}-{chars}{{1,10}}-{chars}{{5}}"


def query(name: str, namespace: str, scale: Autoscale, exporter: Exporter = Exporter()) -> str:
    """The PromQL of the service's signal (see the module's docstring)."""
    window = scale.window
    pods = f'namespace="{namespace}", pod=~"{pod_regex(name)}"'
    if scale.signal == "gpu_busy":
        return gpu_busy(name, namespace, window, exporter)
    if scale.signal == "queue_depth":
        return f"avg(sum by (pod) (avg_over_time({batcher.QUEUE_DEPTH}{{{pods}}}[{window}])))"
    if scale.signal == "rps":
        return f"avg(sum by (pod) (rate({batcher.REQUESTS}{{{pods}}}[{window}])))"
    latency = batcher.LATENCY
    # no request in the window: no value (KEDA reads none as 0), not NaN
    return (
        f"1000 * sum(rate({latency}_sum{{{pods}}}[{window}]))"
        f" / (sum(rate({latency}_count{{{pods}}}[{window}])) > 0)"
    )


def gpu_busy(name: str, namespace: str, window: str, exporter: Exporter) -> str:
    """The mean over the service's pods of each pod's mean busy signal (gpuctl.dcgm.busy)
    over its GPUs; a pod is the holder of a device by holders.held_branches' rule."""
    pods = pod_regex(name)
    by = ", ".join((_POD, *IDENTITY))

    def side(metric: str, matcher: str) -> str:
        parts = []
        for matchers, (ns_label, pod_label, _container) in holders.held_branches(exporter):
            selector = ", ".join(
                m
                for m in (
                    f'__name__="{metric}"',
                    matchers,
                    f'{ns_label}="{namespace}"',
                    f'{pod_label}=~"{pods}"',
                    matcher,
                )
                if m
            )
            parts.append(
                f'label_replace(avg_over_time({{{selector}}}[{window}]), "{_POD}", "$1", '
                f'"{pod_label}", "(.*)")'
            )
        # per device and holder: one series, the same GPU scraped twice folded together
        return f"max by ({by}) ({' or '.join(parts)})"

    return f"avg(avg by ({_POD}) ({busy.promql(side)}))"


def scaled_object(
    name: str,
    namespace: str,
    metadata: dict[str, Any],
    scale: Autoscale,
    promql: str,
    prometheus_url: str,
) -> dict[str, Any]:
    """A KEDA ScaledObject scaling Deployment NAME on PROMQL (keda.sh/v1alpha1); with
    scale.auth, its trigger logs in by trigger_authentication's object."""
    trigger: dict[str, Any] = {
        "type": "prometheus",
        "metricType": "Value",
        "metadata": {
            "serverAddress": prometheus_url,
            "query": promql,
            "threshold": str(scale.target),
        },
    }
    if scale.auth is not None:
        trigger["metadata"]["authModes"] = scale.auth.mode
        trigger["authenticationRef"] = {"name": auth_name(name)}
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": "ScaledObject",
        "metadata": {**metadata, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicaCount": scale.min,
            "maxReplicaCount": scale.max,
            "triggers": [trigger],
        },
    }


# the Secret keys each authMode reads, named as KEDA's prometheus scaler names its parameters
AUTH_PARAMETERS = {"basic": ("username", "password"), "bearer": ("bearerToken",)}


def auth_name(name: str) -> str:
    return f"{name}-prometheus"


def trigger_authentication(
    name: str, namespace: str, metadata: dict[str, Any], auth: PrometheusAuth
) -> dict[str, Any]:
    """The KEDA TriggerAuthentication of service NAME's trigger: references to the keys of
    the Secret auth.secret (never the credentials themselves)."""
    refs = [
        {"parameter": key, "name": auth.secret, "key": key} for key in AUTH_PARAMETERS[auth.mode]
    ]
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": "TriggerAuthentication",
        "metadata": {**metadata, "name": auth_name(name), "namespace": namespace},
        "spec": {"secretTargetRef": refs},
    }


def metric_name(name: str, namespace: str, scale: Autoscale) -> str:
    """The external metric an HPA reads and the adapter serves: one per service."""
    return f"gpuctl-{namespace}-{name}-{scale.signal.replace('_', '-')}"


def hpa(name: str, namespace: str, metadata: dict[str, Any], scale: Autoscale) -> dict[str, Any]:
    """An autoscaling/v2 HorizontalPodAutoscaler of Deployment NAME on its external metric."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {**metadata, "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": scale.min,
            "maxReplicas": scale.max,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": metric_name(name, namespace, scale)},
                        "target": {"type": "Value", "value": str(scale.target)},
                    },
                }
            ],
        },
    }


def adapter_rule(
    name: str, namespace: str, scale: Autoscale, promql: str, mig: bool
) -> dict[str, Any]:
    """The prometheus-adapter `externalRules` entry that serves the HPA's metric: the
    adapter lists it while SERIES has a series, and answers it with PROMQL as it is (the
    query names its own namespace and pods). MIG: the busy signal's series is
    GR_ENGINE_ACTIVE (a MIG device may report no GPU_UTIL)."""
    series = {
        "gpu_busy": GR_ACTIVE if mig else UTIL,
        "queue_depth": batcher.QUEUE_DEPTH,
        "rps": batcher.REQUESTS,
        "latency_ms": batcher.LATENCY + "_count",
    }[scale.signal]
    return {
        "seriesQuery": f'{{__name__="{series}"}}',
        "resources": {"namespaced": False},
        "name": {"matches": f"^{series}$", "as": metric_name(name, namespace, scale)},
        "metricsQuery": promql,
    }
