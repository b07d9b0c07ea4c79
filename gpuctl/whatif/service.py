"""`gpuctl whatif`: what it reads (trace files, or a cluster's nodes and pods through the
Kubernetes adapter) and the comparison it makes of them (`compare`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

from gpuctl.common.errors import SpecError
from gpuctl.gpus.identity import GpuCount
from gpuctl.k8s.nodes import gpus_of, is_gpu_node
from gpuctl.whatif.core.gangs import Gang, parse_gangs
from gpuctl.whatif.core.snapshot import closed_to_plain_pods, nodes_from_api, pods_from_api
from gpuctl.whatif.core.trace import Node, Pod, parse_nodes, parse_pods

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube

MAX_BYTES = 256 << 20
MAX_LINE = 64 << 10  # a trace's row is a few dozen bytes


def read_trace(nodes_path: str, pods_path: str) -> tuple[list[Node], list[Pod]]:
    """The trace's nodes and pods, each file parsed while it is read (memory holds the
    parsed rows, never the text), at most MAX_BYTES each."""
    with _lines(nodes_path) as lines:
        nodes = parse_nodes(lines, nodes_path)
    with _lines(pods_path) as lines:
        pods = parse_pods(lines, pods_path)
    return nodes, pods


def read_gangs(nodes_path: str, gangs_path: str) -> tuple[list[Node], list[Gang]]:
    """The nodes and the gangs to replay on them, each file parsed while it is read."""
    with _lines(nodes_path) as lines:
        nodes = parse_nodes(lines, nodes_path)
    with _lines(gangs_path) as lines:
        gangs = parse_gangs(lines, gangs_path)
    return nodes, gangs


@contextlib.contextmanager
def _lines(path: str) -> Iterator[Iterator[str]]:
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below, after the lines were read
    except OSError as e:
        raise SpecError(f"cannot read file: {e.strerror}", file=path) from None
    except ValueError:  # open() refuses a name with a NUL in it
        raise SpecError("cannot read file: its name holds a NUL character", file=path) from None
    with f:
        yield _decoded(f, path)


def _decoded(f: BinaryIO, path: str) -> Iterator[str]:
    """The lines of F as text: UTF-8, each at most MAX_LINE bytes, MAX_BYTES in all."""
    size = 0
    for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE + 1), b""), 1):
        size += len(raw)
        if size > MAX_BYTES:
            raise SpecError(f"file is larger than {MAX_BYTES // 1024:,} KiB", file=path)
        if len(raw) > MAX_LINE:
            raise SpecError(f"a line longer than {MAX_LINE:,} bytes", file=path, line=number)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            where = f"byte {e.start} of the line"
            raise SpecError(f"not UTF-8 text ({where})", file=path, line=number) from None
        yield text


def snapshot(kube: Kube, label_key: str) -> tuple[list[Node], list[Pod], frozenset[str], GpuCount]:
    """The cluster's nodes, its pods not yet finished, in all namespaces, the nodes whose
    taints keep out pods without GPUs, and its physical GPUs (a MIG slice or a time-shared
    replica the replay places a pod on is not one)."""
    objects = kube.list_objects("Node")
    nodes = nodes_from_api(objects, label_key)
    pods = pods_from_api(kube.unfinished_pods(), label_key, objects)
    physical = sum((gpus_of(n).physical for n in objects if is_gpu_node(n)), GpuCount())
    return nodes, pods, closed_to_plain_pods(objects), physical


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
