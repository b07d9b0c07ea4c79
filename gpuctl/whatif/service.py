"""What `gpuctl whatif` reads: trace files, or a cluster's nodes and pods through the
Kubernetes adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuctl.common.specfile import read_text
from gpuctl.whatif.core.snapshot import nodes_from_api, pods_from_api
from gpuctl.whatif.core.trace import Node, Pod, parse_nodes, parse_pods

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube

MAX_BYTES = 256 << 20


def read_trace(nodes_path: str, pods_path: str) -> tuple[list[Node], list[Pod]]:
    return (
        parse_nodes(read_text(nodes_path, MAX_BYTES), nodes_path),
        parse_pods(read_text(pods_path, MAX_BYTES), pods_path),
    )


def snapshot(kube: Kube, label_key: str) -> tuple[list[Node], list[Pod]]:
    """The cluster's nodes and its pods not yet finished, in all namespaces."""
    nodes = nodes_from_api(kube.list_objects("Node"), label_key)
    pods = pods_from_api(kube.unfinished_pods(), label_key)
    return nodes, pods
