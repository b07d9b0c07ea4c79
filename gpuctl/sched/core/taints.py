"""Whether a second scheduler that packs GPU pods can backfire: it does when GPU nodes let
in pods without GPUs, which stay on the default scheduler, whose LeastAllocated puts them on
the emptiest nodes — the GPU nodes packing keeps free. Pure.

The measured consequence (`gpuctl whatif`, openb default trace at 130 % demand, seeds
42-51, bench/bench_whatif_policies.py): gpuctl-binpack as a second scheduler allocates
86.0 % of the GPUs with GPU nodes untainted, 94.1 % with them tainted NoSchedule; the
default scheduler alone 94.2 %.
"""

from __future__ import annotations

from typing import Any

from gpuctl.k8s.fit import keeps_out_plain_pods
from gpuctl.k8s.nodes import is_gpu_node
from gpuctl.k8s.objects import name_of

CONSEQUENCE = (
    "pods without GPUs stay on the default scheduler, which puts them on the emptiest "
    "nodes, the GPU nodes packing keeps free (replayed on the openb trace at 130 % demand: "
    "86.0 % of GPUs allocated untainted against 94.1 % tainted, 94.2 % with the default "
    "scheduler alone; `gpuctl whatif --from-cluster` replays this cluster)"
)
ASSUMED = (
    "no cluster to check: this assumes every GPU node carries a NoSchedule taint that pods "
    "without GPUs do not tolerate (as `gpuctl provision` sets: nvidia.com/gpu=present:"
    "NoSchedule); without it " + CONSEQUENCE
)


def untainted_gpu_nodes(nodes: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """(GPU nodes, the names of those that let pods without tolerations in)."""
    gpu = [n for n in nodes if is_gpu_node(n)]
    names = [name_of(n) for n in gpu if not keeps_out_plain_pods(n)]
    return len(gpu), sorted(names)


def warning(nodes: list[dict[str, Any]]) -> str | None:
    """What to tell about the cluster's GPU nodes, None when all keep plain pods out."""
    total, open_ = untainted_gpu_nodes(nodes)
    if not open_:
        return None
    shown = ", ".join(open_[:5]) + (f" and {len(open_) - 5} more" if len(open_) > 5 else "")
    return (
        f"{len(open_)} of {total} GPU nodes carry no NoSchedule taint ({shown}): "
        + CONSEQUENCE
        + ". Taint them, e.g. kubectl taint nodes NODE nvidia.com/gpu=present:NoSchedule "
        "(pods asking for nvidia.com/gpu get a matching toleration from the API server's "
        "ExtendedResourceToleration admission plugin where it is enabled; give GPU pods one "
        "otherwise)."
    )
