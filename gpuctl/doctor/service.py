"""Gathering what `gpuctl doctor` checks: nodes, DaemonSets and the device plugin's config."""

from __future__ import annotations

from gpuctl.adapters.kube import Kube
from gpuctl.doctor import checks as doctor
from gpuctl.sharing import service as sharing


def run(kube: Kube, node: str | None = None) -> list[doctor.Check]:
    if node:
        nodes = [kube.read_node(node)]
    else:
        nodes = sharing.list_nodes(kube, None)
    daemonsets = sharing.list_daemonsets(kube)
    target = sharing.locate(kube, None, None, daemonsets=daemonsets)
    if target is not None and target.mounted:
        return doctor.run_checks(nodes, daemonsets, target.config_map, target.data)
    return doctor.run_checks(nodes, daemonsets, None, None)
