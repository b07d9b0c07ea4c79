"""What `gpuctl sched extender` knows of the cluster and how it answers kube-scheduler.
Pure: API objects and decoded extender requests in, extender answers out; the wire format
is wire.py, the watches and the HTTP server gpuctl/sched/extender.py.

The protocol is k8s.io/kube-scheduler/extender/v1: kube-scheduler sends the pod and its
candidates (names, or Node objects) to the filter verb, which answers which of them pass and
why the others fail, and to the prioritize verb, which answers each candidate's score,
0..MaxExtenderPriority (10).

- filter: what kube-scheduler cannot see — a share of one GPU needs one GPU with that much
  free, whole GPUs need that many GPUs with nothing allocated, and a GPU model the pod's
  nodeSelector on the GPU label accepts (a node of another model fails unresolvably:
  no preemption changes it). CPU, memory, taints and the rest are kube-scheduler's own
  filters, run before. A pod that asks for no GPU is not the extender's: every candidate
  passes.
- prioritize: gpuctl.gpus.placement (FGD over the device plugin's GPU choice, ties by a
  fixed node rank), the one implementation `gpuctl whatif --policy extender` replays: the
  best ten candidates score 10 … 1, the others 0.

What a pod asks for: whole GPUs are its nvidia.com/gpu; a share of one GPU is a pod asking
for one nvidia.com/gpu and nvidia.com/gpucores below 100 (HAMi's resource: percent of the
GPU), the share being gpucores × 10 thousandths. The extender picks the node only; which
GPU of the node a share lands on is the device plugin's choice, taken (and tracked here) as
the fitting GPU with the least free, in the order the pods were created.

The workload's typical shapes (the FGD measure's target) are those of the pods in the
cluster, counted again at every full resync.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuctl.common.quantity import from_api
from gpuctl.gpus.fragmentation import Shape, typical_shapes
from gpuctl.gpus.placement import Placement, device_plugin_gpus, priorities
from gpuctl.gpus.resources import DONE_PHASES, requested
from gpuctl.gpus.scoring import GPU_RESOURCE, MILLI
from gpuctl.k8s.objects import labels_of, meta, name_of, namespace_of
from gpuctl.sched.core import wire

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Ints = NDArray[np.int64]

Failures = dict[str, str]  # node name → why the pod does not fit there

SHARE_RESOURCE = "nvidia.com/gpucores"  # HAMi's: percent of one GPU's compute
MANAGED_RESOURCES = (GPU_RESOURCE, SHARE_RESOURCE)
MAX_GPUS = 64


@dataclass(frozen=True)
class GpuPod:
    key: str  # namespace/name
    cpu_milli: int
    gpus: int
    gpu_milli: int  # the share of each GPU, MILLI for whole GPUs, 0 without
    gpu_models: tuple[str, ...] = ()
    node: str = ""  # where it is bound, "" while pending

    @property
    def gpu_request(self) -> int:
        return self.gpus * self.gpu_milli

    @property
    def asks_gpu(self) -> bool:
        return self.gpu_request > 0


def pod_of(obj: dict[str, Any], label_key: str) -> GpuPod:
    spec = obj.get("spec") or {}
    gpus = min(requested(obj, GPU_RESOURCE), MAX_GPUS)
    cores = requested(obj, SHARE_RESOURCE)
    share = MILLI if gpus else 0
    if gpus == 1 and 0 < cores < 100:
        share = cores * MILLI // 100
    selected = (spec.get("nodeSelector") or {}).get(label_key)
    return GpuPod(
        f"{namespace_of(obj)}/{name_of(obj)}",
        _cpu_milli(spec),
        gpus,
        share,
        (str(selected),) if selected is not None else (),
        str(spec.get("nodeName") or ""),
    )


# What the view reads of a pod and a node (pod_of, _alive, replace's order, _set_node), and
# what names and follows the object (its key, version, owner): the watches' stores keep
# only this (slim_pod, slim_node), a tenth or less of the object the API server sends.
OBJECT_META = ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences")
POD_META = (*OBJECT_META, "creationTimestamp")
POD_SPEC = ("nodeName", "nodeSelector")
CONTAINER_LISTS = ("containers", "initContainers")
POD_STATUS = ("phase",)
NODE_STATUS = ("allocatable",)


def slim_pod(obj: dict[str, Any]) -> dict[str, Any]:
    """What the view reads of pod OBJ (a new object; OBJ is left as it is)."""
    spec = obj.get("spec") or {}
    kept = _fields(spec, POD_SPEC)
    for field in CONTAINER_LISTS:
        if spec.get(field):
            kept[field] = [_container(c) for c in spec[field]]
    return {
        "metadata": _fields(meta(obj), POD_META),
        "spec": kept,
        "status": _fields(obj.get("status") or {}, POD_STATUS),
    }


def slim_node(obj: dict[str, Any]) -> dict[str, Any]:
    """What the view reads of node OBJ (a new object; OBJ is left as it is)."""
    return {
        "metadata": _fields(meta(obj), OBJECT_META),
        "status": _fields(obj.get("status") or {}, NODE_STATUS),
    }


def _container(c: dict[str, Any]) -> dict[str, Any]:
    resources = c.get("resources") or {}
    return {"name": c.get("name"), "resources": _fields(resources, ("requests", "limits"))}


def _fields(obj: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: obj[name] for name in names if name in obj}


def _cpu_milli(spec: dict[str, Any]) -> int:
    def cpu(c: dict[str, Any]) -> float:
        res = c.get("resources") or {}
        value = from_api(
            (res.get("requests") or {}).get("cpu", (res.get("limits") or {}).get("cpu"))
        )
        return float(value) if value is not None and value > 0 else 0.0

    running = sum(cpu(c) for c in spec.get("containers") or [])
    init = max((cpu(c) for c in spec.get("initContainers") or []), default=0.0)
    return math.ceil(max(running, init) * MILLI)


@dataclass
class _Node:
    cpu_milli: int
    gpus: int
    model: str


class ClusterView:
    """Nodes and bound pods, as the watches last told; `placement` is rebuilt lazily after
    the set of nodes changes, updated in place after a pod comes or goes."""

    def __init__(self, label_key: str):
        self.label_key = label_key
        self.nodes: dict[str, _Node] = {}
        self.pods: dict[str, GpuPod] = {}
        self.gpu_of: dict[str, list[int]] = {}  # pod key → the GPUs it holds on its node
        self.shapes: list[Shape] = []
        self._placement: Placement | None = None
        self._index: dict[str, int] = {}
        self._names: list[str] = []  # by index
        self._models: Any = None  # by index: numpy array of the GPU models
        self._last_names: tuple[tuple[int, tuple[str, ...]], Ints] | None = None
        self._generation = 0  # of the placement (and its node indexes)

    # --- what the watches tell -----------------------------------------------------------

    def replace(self, nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> None:
        """A full resync: everything known is dropped for these lists."""
        self.nodes, self.pods, self.gpu_of = {}, {}, {}
        for n in nodes:
            self._set_node(n)
        ordered = sorted(pods, key=lambda p: str(meta(p).get("creationTimestamp") or ""))
        pod_list = [pod_of(p, self.label_key) for p in ordered if _alive(p)]
        self.shapes = typical_shapes(pod_list) if pod_list else []
        self._placement = None
        for p in pod_list:
            if p.node:
                self.pods[p.key] = p

    def node_event(self, kind: str, obj: dict[str, Any]) -> None:
        name = name_of(obj)
        if kind == "DELETED":
            self.nodes.pop(name, None)
        else:
            before = self.nodes.get(name)
            self._set_node(obj)
            if before == self.nodes.get(name):
                return
        self._placement = None

    def pod_event(self, kind: str, obj: dict[str, Any]) -> None:
        pod = pod_of(obj, self.label_key)
        known = self.pods.get(pod.key)
        if kind == "DELETED" or not _alive(obj) or not pod.node:
            if known is not None:
                self._unbind(known)
            return
        if known is None:
            self._bind(pod)

    def _set_node(self, obj: dict[str, Any]) -> None:
        alloc = (obj.get("status") or {}).get("allocatable") or {}
        cpu = from_api(alloc.get("cpu"))
        gpus = from_api(alloc.get(GPU_RESOURCE))
        self.nodes[name_of(obj)] = _Node(
            math.floor(cpu * MILLI) if cpu and cpu > 0 else 0,
            min(math.floor(gpus), MAX_GPUS) if gpus and gpus > 0 else 0,
            str(labels_of(obj).get(self.label_key) or ""),
        )

    # --- the FGD state ----------------------------------------------------------------------

    @property
    def placement(self) -> Placement:
        if self._placement is None:
            self._rebuild()
        assert self._placement is not None
        return self._placement

    def _rebuild(self) -> None:
        import numpy as np

        names = sorted(self.nodes)
        self._generation += 1
        self._names = names
        self._index = {n: i for i, n in enumerate(names)}
        self._models = np.array([self.nodes[n].model for n in names], dtype=object)
        width = max([self.nodes[n].gpus for n in names] + [1])
        gpu_free = np.zeros((len(names), width), dtype=np.int64)
        cpu_free = np.array([self.nodes[n].cpu_milli for n in names], dtype=np.int64)
        for i, n in enumerate(names):
            gpu_free[i, : self.nodes[n].gpus] = MILLI
        self.gpu_of = {}
        for pod in self.pods.values():  # taken from the arrays, measured once after
            if (i := self._index.get(pod.node, -1)) >= 0:
                self.gpu_of[pod.key] = _take(pod, gpu_free[i])
                cpu_free[i] -= pod.cpu_milli
        models = [self.nodes[n].model for n in names]
        self._placement = Placement(self.shapes, names, models, gpu_free, cpu_free)

    def _bind(self, pod: GpuPod) -> None:
        self.pods[pod.key] = pod
        if self._placement is None or pod.node not in self._index:
            return  # counted when the placement is rebuilt (or the node arrives)
        i, p = self._index[pod.node], self._placement
        row = p.gpu_free[i].copy()
        self.gpu_of[pod.key] = _take(pod, row)
        p.update(i, row, int(p.cpu_free[i]) - pod.cpu_milli)

    def _unbind(self, pod: GpuPod) -> None:
        del self.pods[pod.key]
        taken = self.gpu_of.pop(pod.key, None)
        if self._placement is None or taken is None or pod.node not in self._index:
            return
        i, p = self._index[pod.node], self._placement
        row = p.gpu_free[i].copy()
        row[taken] += pod.gpu_milli
        p.update(i, row, int(p.cpu_free[i]) + pod.cpu_milli)

    # --- the verbs --------------------------------------------------------------------------

    def fitting(self, pod: GpuPod, names: list[str]) -> tuple[Ints, Failures, Failures]:
        """Indexes of the named nodes the pod's GPUs fit on; why the others fail, and why
        those fail that no preemption would change (a GPU model the pod does not accept)."""
        import numpy as np

        p = self.placement
        index = self._indexes(names)
        known = index[index >= 0]
        rows = p.gpu_free[known]
        ok = np.ones(len(known), dtype=bool)
        why = ""
        if 0 < pod.gpu_milli < MILLI:
            ok = rows.max(axis=1) >= pod.gpu_milli
            why = f"no GPU with {pod.gpu_milli / 10:g} % free"
        elif pod.gpus:
            ok = (rows == MILLI).sum(axis=1) >= pod.gpus
            why = f"fewer than {pod.gpus} unallocated GPUs"
        unresolvable: Failures = {}
        if pod.gpu_models:
            model_ok = np.isin(self._models[known], pod.gpu_models)
            wrong = f"gpuctl extender: GPU model is not {' or '.join(pod.gpu_models)}"
            unresolvable = {self._names[i]: wrong for i in known[~model_ok].tolist()}
            ok &= model_ok
        failed = {
            self._names[i]: f"gpuctl extender: {why}"
            for i in known[~ok].tolist()
            if self._names[i] not in unresolvable
        }
        if len(known) < len(names):
            for name in (n for n, i in zip(names, index.tolist()) if i < 0):
                failed[name] = "gpuctl extender: node not (yet) seen by its watch"
        fit: Ints = known[ok]
        return fit, failed, unresolvable

    def _indexes(self, names: list[str]) -> Ints:
        """The nodes' indexes (-1: unknown). kube-scheduler sends the same names pod after
        pod: the last answer is kept."""
        import numpy as np

        key = (self._generation, tuple(names))
        if self._last_names is None or self._last_names[0] != key:
            index = np.array([self._index.get(n, -1) for n in names], dtype=np.int64)
            self._last_names = (key, index)
        return self._last_names[1]

    def filter(self, request: wire.Request) -> dict[str, Any]:
        pod = pod_of(request.pod, self.label_key)
        if not pod.asks_gpu:
            return wire.filter_result(request, request.names, {}, {})
        fit, failed, unresolvable = self.fitting(pod, request.names)
        passed = [self._names[i] for i in fit.tolist()]
        return wire.filter_result(request, passed, failed, unresolvable)

    def prioritize(self, request: wire.Request) -> list[dict[str, Any]]:
        """Every candidate with its priority: the best ten 10 … 1, the others 0."""
        import numpy as np

        pod = pod_of(request.pod, self.label_key)
        scores: dict[int, int] = {}
        if pod.asks_gpu and len(fit := self.fitting(pod, request.names)[0]):
            ranked = priorities(self.placement.keys(pod, fit))
            best = np.flatnonzero(ranked)
            scores = dict(zip(fit[best].tolist(), ranked[best].tolist()))
        index = self._indexes(request.names).tolist()
        return wire.host_priorities(request.names, (scores.get(i, 0) for i in index))


def _take(pod: GpuPod, row: Ints) -> list[int]:
    """The GPUs of a node's ROW (free share of each) that POD takes, taken from ROW: a
    share where the device plugin puts it, whole GPUs the first ones free."""
    taken: list[int] = []
    if 0 < pod.gpu_milli < MILLI:
        gpu = int(device_plugin_gpus(row[None, :], pod.gpu_milli)[0])
        if row[gpu] >= pod.gpu_milli:
            taken = [gpu]
            row[gpu] -= pod.gpu_milli
    elif pod.gpus:
        taken = [int(g) for g in (row == MILLI).nonzero()[0][: pod.gpus]]
        row[taken] = 0
    return taken


def _alive(obj: dict[str, Any]) -> bool:
    return (obj.get("status") or {}).get("phase") not in DONE_PHASES
