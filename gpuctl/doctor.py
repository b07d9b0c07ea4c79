"""Gathering what `gpuctl doctor` checks: nodes, DaemonSets and the device plugin's config."""

from __future__ import annotations

from gpuctl import sharing
from gpuctl.adapters.kube import Kube, NotFound
from gpuctl.core import doctor
from gpuctl.errors import GpuctlError


def run(kube: Kube, node: str | None = None) -> list[doctor.Check]:
    if node:
        try:
            nodes = [kube.call(kube.core.read_node, node, what=f"reading node {node}")]
        except NotFound:
            raise GpuctlError(f"no node {node!r} in the cluster",
                              hint="kubectl get nodes lists them") from None
    else:
        nodes = sharing.list_nodes(kube, None)
    daemonsets = sharing.list_daemonsets(kube)
    target = sharing.locate(kube, None, None, required=False, daemonsets=daemonsets)
    mounted = target is not None and target.mounted
    return doctor.run_checks(nodes, daemonsets, target.config_map if mounted else None,
                             target.data if mounted else None)
