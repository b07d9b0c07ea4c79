"""Gathering what `gpuctl doctor` checks: nodes, DaemonSets and the device plugin's config;
Kueue's and JobSet's APIs, controllers and Kueue's configuration."""

from __future__ import annotations

from typing import Any

from gpuctl.adapters.kube import Forbidden, Kube, NotFound
from gpuctl.doctor.core import checks as doctor
from gpuctl.doctor.core import queue_checks as queues
from gpuctl.jobs.core import jobset
from gpuctl.quota.core import kueue
from gpuctl.sharing import service as sharing


def run(kube: Kube, names: tuple[str, ...] = ()) -> list[doctor.Check]:
    if names:
        nodes = [kube.read_node(name) for name in names]
    else:
        nodes = sharing.list_nodes(kube, None)
    daemonsets = sharing.list_daemonsets(kube)
    target = sharing.locate(kube, None, None, daemonsets=daemonsets)
    if target is not None and target.mounted:
        checks = doctor.run_checks(nodes, daemonsets, target.config_map, target.data)
    else:
        checks = doctor.run_checks(nodes, daemonsets, None, None)
    return checks + queue_checks(kube, nodes)


def queue_checks(kube: Kube, nodes: list[dict[str, Any]]) -> list[doctor.Check]:
    served_kueue = _served(kube, kueue.GROUP)
    served_jobset = _served(kube, jobset.GROUP)
    try:
        deployments = kube.list_objects("Deployment")
    except Forbidden:
        deployments = []
    manager = queues.controller(deployments, queues.KUEUE_IMAGE)
    out = [
        queues.check_kueue(served_kueue, manager),
        queues.check_jobset(served_jobset, queues.controller(deployments, queues.JOBSET_IMAGE)),
    ]
    version = next((v for v in kueue.VERSIONS if v in served_kueue), None)
    if version is None:
        return out
    config, where = _kueue_config(kube, manager)
    out.append(
        queues.check_wait_for_pods_ready(
            config, where, queues.image_version(manager, queues.KUEUE_IMAGE), manager
        )
    )
    try:
        cqs = kube.list_objects("ClusterQueue", api_version=kueue.api_version(version))
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
    import yaml

    namespace, name = queues.DEFAULT_CONFIG_MAP
    if manager is not None:
        namespace = (manager.get("metadata") or {}).get("namespace") or namespace
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
    try:
        config = yaml.safe_load(data) if data else None
    except yaml.YAMLError:
        return None, where
    return (config if isinstance(config, dict) else None), where
