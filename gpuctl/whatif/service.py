"""`gpuctl whatif`: what it reads (trace files, or a cluster's nodes and pods through the
Kubernetes adapter) and the comparison it makes of them (`compare`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gpuctl.common.specfile import read_text
from gpuctl.whatif.core.snapshot import closed_to_plain_pods, nodes_from_api, pods_from_api
from gpuctl.whatif.core.trace import Node, Pod, parse_nodes, parse_pods

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube

MAX_BYTES = 256 << 20


def read_trace(nodes_path: str, pods_path: str) -> tuple[list[Node], list[Pod]]:
    return (
        parse_nodes(read_text(nodes_path, MAX_BYTES), nodes_path),
        parse_pods(read_text(pods_path, MAX_BYTES), pods_path),
    )


def snapshot(kube: Kube, label_key: str) -> tuple[list[Node], list[Pod], frozenset[str]]:
    """The cluster's nodes, its pods not yet finished, in all namespaces, and the nodes
    whose taints keep out pods without GPUs."""
    objects = kube.list_objects("Node")
    nodes = nodes_from_api(objects, label_key)
    pods = pods_from_api(kube.unfinished_pods(), label_key, objects)
    return nodes, pods, closed_to_plain_pods(objects)


def compare(
    nodes: list[Node],
    pods: list[Pod],
    policies: Sequence[str],
    seeds: Sequence[int],
    permille: int,
    gpu_weight: int,
    progress: Callable[[str, int], None] = lambda policy, seed: None,
    taints: Sequence[bool] = (False,),
    closed: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Every policy replayed once per seed and GPU-node taint (False: untainted, True:
    GPU nodes keep out pods without GPUs), up to `permille` of the GPU capacity, and the
    figures per policy (medians over the seeds); `progress(policy, seed)` before each.
    `closed`: nodes whose own taints keep pods without GPUs out, in every replay."""
    from gpuctl.gpus.fragmentation import typical_shapes
    from gpuctl.whatif.core.replay import replay
    from gpuctl.whatif.core.summary import summarise

    shapes = typical_shapes(pods)
    runs = []
    for policy in policies:
        for tainted in taints:
            for seed in seeds:
                progress(policy, seed)
                runs.append(
                    replay(nodes, pods, policy, seed, permille, gpu_weight, shapes, tainted, closed)
                )
    return summarise(runs)
