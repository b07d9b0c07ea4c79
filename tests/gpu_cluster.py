"""Objects to seed the Kubernetes emulator with a GPU cluster (sharing / quota / doctor tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

GFD = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "81559",
}


def node(
    name: str,
    gpus: int = 8,
    labels: dict | None = None,
    alloc: dict | None = None,
    gfd: bool = True,
) -> dict:
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    allocatable.update(alloc or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**(GFD if gfd else {}), **(labels or {})}},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def daemonset(
    name: str,
    namespace: str,
    ready: int = 2,
    desired: int = 2,
    config_map: str | None = None,
    operator_style: bool = True,
    default_config: str = "",
    fallbacks: str | None = None,
) -> dict:
    """A DaemonSet; with config_map, mounted at /available-configs the way the GPU Operator
    (volume named after the ConfigMap) or the Helm chart (volume 'available-configs') do,
    beside the config-manager with the environment each gives it: DEFAULT_CONFIG (the
    ClusterPolicy's devicePlugin.config.default, the chart's config.default) and
    FALLBACK_STRATEGIES ("empty" from the operator, "named,single" from the chart)."""
    if fallbacks is None:
        fallbacks = "empty" if operator_style else "named,single"
    pod: dict[str, Any] = {
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]
    }
    if config_map:
        vol = config_map if operator_style else "available-configs"
        pod["volumes"] = [
            {"name": "config", "emptyDir": {}},
            {"name": vol, "configMap": {"name": config_map}},
        ]
        pod["containers"].append(
            {
                "name": "config-manager",
                "image": "x",
                "env": [
                    {"name": "NODE_LABEL", "value": "nvidia.com/device-plugin.config"},
                    {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
                    {"name": "DEFAULT_CONFIG", "value": default_config},
                    {"name": "FALLBACK_STRATEGIES", "value": fallbacks},
                ],
                "volumeMounts": [
                    {"name": "config", "mountPath": "/config"},
                    {"name": vol, "mountPath": "/available-configs"},
                ],
            }
        )
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        },
        "status": {
            "desiredNumberScheduled": desired,
            "numberReady": ready,
            "currentNumberScheduled": desired,
            "numberMisscheduled": 0,
        },
    }


def pod(
    name: str,
    namespace: str,
    gpus: int = 0,
    phase: str = "Running",
    resource: str = "nvidia.com/gpu",
    node_name: str | None = "gpu-1",
) -> dict:
    res = {"limits": {resource: str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "busybox", "resources": res}],
        },
        "status": {"phase": phase},
    }


def seed(api, *objects: dict) -> None:
    """Create objects in the emulator through the official client."""
    from kubernetes import client

    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    namespaced: dict[str, Callable[..., object]] = {
        "Pod": core.create_namespaced_pod,
        "ConfigMap": core.create_namespaced_config_map,
        "ResourceQuota": core.create_namespaced_resource_quota,
        "DaemonSet": apps.create_namespaced_daemon_set,
        "Deployment": apps.create_namespaced_deployment,
    }
    cluster_wide: dict[str, Callable[..., object]] = {
        "Node": core.create_node,
        "Namespace": core.create_namespace,
    }
    for o in objects:
        if "." in o["apiVersion"].split("/")[0]:  # a custom resource (its CRD installed)
            seed_custom(api, o)
        elif o["kind"] in cluster_wide:
            cluster_wide[o["kind"]](o)
        else:
            namespaced[o["kind"]](o["metadata"]["namespace"], o)


def _custom_path(obj: dict) -> tuple[str, str, str | None, str]:
    from gpuctl.sim.kube import DRA_KINDS
    from tests import crd_schema

    group, _, version = obj["apiVersion"].rpartition("/")
    if group == "resource.k8s.io":  # DRA: built in, no CRD
        plural = next(p for p, (kind, *_) in DRA_KINDS.items() if kind == obj["kind"])
    else:
        plural = crd_schema.crd(obj["kind"])["spec"]["names"]["plural"]
    return group, version, obj["metadata"].get("namespace"), plural


def seed_custom(api, obj: dict) -> None:
    """Create a custom resource (a Kueue or JobSet object) through the official client."""
    from kubernetes import client

    group, version, namespace, plural = _custom_path(obj)
    custom = client.CustomObjectsApi(api)
    if namespace:
        custom.create_namespaced_custom_object(
            group, version, namespace, plural, obj, _preload_content=False
        ).release_conn()
    else:
        custom.create_cluster_custom_object(
            group, version, plural, obj, _preload_content=False
        ).release_conn()


def set_status(api, obj: dict, status: dict) -> None:
    """Write a custom resource's status (a merge patch of its status subresource), as its
    controller (Kueue, JobSet) would."""
    from kubernetes import client

    group, version, namespace, plural = _custom_path(obj)
    custom, name = client.CustomObjectsApi(api), obj["metadata"]["name"]
    body = {"status": status}
    if namespace:
        custom.patch_namespaced_custom_object_status(
            group, version, namespace, plural, name, body, _preload_content=False
        ).release_conn()
    else:
        custom.patch_cluster_custom_object_status(
            group, version, plural, name, body, _preload_content=False
        ).release_conn()


def mark(kube) -> int:
    """How many requests the emulator has served so far (pass to `writes`)."""
    return len(kube.requests())


def writes(kube, since: int) -> list[tuple[str, str]]:
    """The requests after `since` that could change something: (method, path)."""
    out = []
    for method, path, _ in kube.requests()[since:]:
        method = str(method).rsplit(".", 1)[-1].upper()
        if method not in ("GET", "HEAD", "OPTIONS"):
            out.append((method, path))
    return out
