"""Gathering what `gpuctl doctor` checks: nodes, DaemonSets and the device plugin's config;
Kueue's and JobSet's APIs, controllers and Kueue's configuration; KEDA or an external
metrics API where a gpuctl service autoscales."""

from __future__ import annotations

from typing import Any

from gpuctl.adapters.kube import Forbidden, Kube, NotFound
from gpuctl.doctor.core import (
    autoscale_checks,
    compute_domain_checks,
    dra_checks,
    spec_checks,
    topology_checks,
)
from gpuctl.doctor.core import checks as doctor
from gpuctl.doctor.core import queue_checks as queues
from gpuctl.gpus.dra import DraView
from gpuctl.k8s import apis, device_plugin
from gpuctl.k8s.labels import MANAGED_SELECTOR, managed_by_gpuctl
from gpuctl.k8s.objects import namespace_of
from gpuctl.k8s.placement import AUTO, GpuRequest


def run(
    kube: Kube,
    names: tuple[str, ...] = (),
    specs: list[tuple[str, GpuRequest]] | None = None,
    label_key: str = AUTO,
) -> list[doctor.Check]:
    """Every check on the cluster's nodes (NAMES only, when given), and whether each of
    SPECS (file, GPU request) selects one of them under LABEL_KEY."""
    if names:
        nodes = [kube.read_node(name) for name in names]
    else:
        nodes = kube.list_objects("Node")
    daemonsets = kube.list_objects("DaemonSet")
    config_map, data = _plugin_configs(kube, daemonsets)
    try:  # read once: the queue controllers and the autoscaled services' targets are in it
        deployments: list[dict[str, Any]] | None = kube.list_objects("Deployment")
    except Forbidden:
        deployments = None
    view, version = _dra(kube)
    found = doctor.run_checks(nodes, daemonsets, config_map, data, view)
    found += dra_checks.check_dra(version, view, nodes, daemonsets) if view else []
    found.append(topology_checks.check_topology(nodes))
    found += spec_checks.check_specs(specs or [], nodes, label_key)
    if any(r.compute_domain for _, r in specs or []):
        served = kube.serves(apis.COMPUTE_DOMAIN_API_VERSION)
        found += compute_domain_checks.check_compute_domains(specs or [], served, view, nodes)
    pending = None if names else pending_check(kube, nodes)
    found += [pending] if pending else []
    found += queue_checks(kube, nodes, deployments or [], view)
    autoscaling = autoscaling_check(kube, deployments)
    return found + ([autoscaling] if autoscaling else [])


def pending_check(kube: Kube, nodes: list[dict[str, Any]]) -> doctor.Check | None:
    """Whether gpuctl's pending pods may run on a node (None: none pends, or RBAC hides
    pods). One read: the server filters by label and phase."""
    try:
        pods = kube.list_objects(
            "Pod", selector=MANAGED_SELECTOR, field_selector="status.phase=Pending"
        )
    except Forbidden:
        return None
    return spec_checks.check_pending(managed(pods), nodes)


def managed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in items if managed_by_gpuctl(o)]


def autoscaling_check(kube: Kube, deployments: list[dict[str, Any]] | None) -> doctor.Check | None:
    """What gpuctl's autoscaled services need (None: there is none, or RBAC hides them or
    the DEPLOYMENTS, None then)."""
    if deployments is None:
        return None
    keda = apis.KEDA_VERSION in _served(kube, apis.KEDA_GROUP)
    try:
        hpas = managed(kube.list_objects("HorizontalPodAutoscaler", selector=MANAGED_SELECTOR))
        scaled = (
            managed(kube.list_objects("ScaledObject", selector=MANAGED_SELECTOR)) if keda else []
        )
    except Forbidden:
        return None
    return autoscale_checks.check_autoscaling(
        scaled, hpas, keda, bool(_served(kube, apis.EXTERNAL_METRICS_GROUP)), deployments
    )


def _plugin_configs(
    kube: Kube, daemonsets: list[dict[str, Any]]
) -> tuple[str | None, dict[str, Any] | None]:
    """The ConfigMap the device plugin mounts its configs from, and its data (None where it
    does not exist); (None, None) without a plugin, or for one that mounts none."""
    plugin = device_plugin.find_device_plugin(daemonsets)
    name = device_plugin.plugin_config_map(plugin) if plugin else None
    if plugin is None or name is None:
        return None, None
    namespace = namespace_of(plugin) or kube.namespace
    try:
        return name, kube.read("ConfigMap", name, namespace).get("data") or {}
    except NotFound:
        return name, None


def _dra(kube: Kube) -> tuple[DraView | None, str | None]:
    """The cluster's DRA and the resource.k8s.io version read; (None, None) without DRA or
    where RBAC hides it."""
    view = kube.dra()
    return (view, kube.dra_version()) if view is not None else (None, None)


def queue_checks(
    kube: Kube,
    nodes: list[dict[str, Any]],
    deployments: list[dict[str, Any]],
    view: DraView | None = None,
) -> list[doctor.Check]:
    served_kueue = _served(kube, apis.KUEUE_GROUP)
    served_jobset = _served(kube, apis.JOBSET_GROUP)
    manager = queues.controller(deployments, queues.KUEUE_IMAGE)
    out = [
        queues.check_kueue(served_kueue, manager),
        queues.check_jobset(served_jobset, queues.controller(deployments, queues.JOBSET_IMAGE)),
    ]
    version = apis.kueue_version(served_kueue)
    if version is None:
        return out
    config, where = _kueue_config(kube, manager)
    out.append(
        queues.check_wait_for_pods_ready(
            config, where, queues.image_version(manager, queues.KUEUE_IMAGE), manager
        )
    )
    if view is not None and view.devices:
        running = queues.version_tuple(queues.image_version(manager, queues.KUEUE_IMAGE))
        gates = queues.feature_gates(config or {}, manager)
        out.append(dra_checks.check_kueue_dra(view, running, gates, config))
    try:
        cqs = kube.list_objects("ClusterQueue", api_version=apis.kueue_api_version(version))
    except Forbidden:
        return out
    out.append(queues.check_gpu_queues(nodes, cqs))
    return out


def _served(kube: Kube, group: str) -> list[str]:
    try:
        return kube.api_versions(group)
    except Forbidden:
        return []


def _kueue_config(kube: Kube, manager: dict[str, Any] | None) -> tuple[dict | None, str]:
    """Kueue's Configuration, from the ConfigMap its manager mounts (kueue-system/
    kueue-manager-config when no manager is found), and where it was looked for."""
    from gpuctl.common.errors import SpecError
    from gpuctl.common.specfile import load_yaml

    namespace, name = queues.DEFAULT_CONFIG_MAP
    if manager is not None:
        namespace = namespace_of(manager) or namespace
        pod = ((manager.get("spec") or {}).get("template") or {}).get("spec") or {}
        mounted = [
            v["configMap"]["name"]
            for v in pod.get("volumes") or []
            if (v.get("configMap") or {}).get("name")
        ]
        name = mounted[0] if mounted else name
    where = f"{namespace}/{name}"
    try:
        data = (kube.read("ConfigMap", name, namespace).get("data") or {}).get(queues.CONFIG_KEY)
    except (NotFound, Forbidden):
        return None, where
    try:  # read as gpuctl reads every YAML: no aliases (alias bombs), bounded
        config = load_yaml(data, f"ConfigMap {where}").data if isinstance(data, str) else None
    except SpecError:
        return None, where
    return (config if isinstance(config, dict) else None), where


def busy_signal(client) -> doctor.Check:
    """Which busy signal the cluster's Prometheus (an adapters.prometheus.Prometheus) has."""
    from gpuctl.common.errors import BackendError

    try:
        samples = client.query(doctor.busy_signal_query(), list)
    except BackendError as e:
        return doctor.check_busy_signal(None, e.message)
    return doctor.check_busy_signal({labels.get("field", ""): int(v) for labels, v in samples})
