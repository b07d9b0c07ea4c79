"""A cluster's nodes and pods, as the API returns them, turned into what the replay takes.
Pure.

- A node: its allocatable cpu, memory and nvidia.com/gpu, and as GPU model the value of
  the GPU label (gpu_label_key), or with `auto` the model its labels name whatever the
  scheme (gpuctl.gpus.identity); whether its taints keep out pods without tolerations.
- A pod not yet finished, and not run by a DaemonSet (which puts one on every node
  whatever the policy): what it requests as kube-scheduler counts it (the containers' sum
  or the largest init container, whichever is more; a limit stands for a missing request),
  whole GPUs of nvidia.com/gpu, and as GPU models those its nodeSelector or required node
  affinity allows on the GPU label (with `auto`: the models of the GPU nodes they select).
CPU is rounded up to a millicore and memory to a MiB for pods, down for nodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from gpuctl.common.quantity import from_api
from gpuctl.gpus.resources import DONE_PHASES
from gpuctl.gpus.scoring import GPU_RESOURCE
from gpuctl.k8s.fit import keeps_out_plain_pods
from gpuctl.k8s.nodes import gpus_of, is_gpu_node
from gpuctl.k8s.objects import labels_of, meta, name_of, namespace_of
from gpuctl.k8s.placement import AUTO
from gpuctl.k8s.selectors import pod_may_run_on
from gpuctl.whatif.core.trace import MAX_CPU_MILLI, MAX_GPUS, MAX_MEMORY_MIB, MILLI, Node, Pod

MIB = 2**20


def nodes_from_api(objects: list[dict[str, Any]], label_key: str) -> list[Node]:
    nodes = []
    for obj in objects:
        alloc = (obj.get("status") or {}).get("allocatable") or {}
        nodes.append(
            Node(
                name_of(obj) or "?",
                _bounded(math.floor(_amount(alloc.get("cpu")) * MILLI), MAX_CPU_MILLI),
                _bounded(math.floor(_amount(alloc.get("memory")) / MIB), MAX_MEMORY_MIB),
                _bounded(math.floor(_amount(alloc.get(GPU_RESOURCE))), MAX_GPUS),
                _model_of(obj, label_key),
            )
        )
    return nodes


def _model_of(node: dict[str, Any], label_key: str) -> str:
    if label_key == AUTO:
        return gpus_of(node).name or ""
    return str(labels_of(node).get(label_key) or "")


def closed_to_plain_pods(objects: list[dict[str, Any]]) -> frozenset[str]:
    """The nodes whose taints keep out pods without tolerations (pods without GPUs)."""
    return frozenset(name_of(obj) or "?" for obj in objects if keeps_out_plain_pods(obj))


def pods_from_api(
    objects: list[dict[str, Any]], label_key: str, nodes: Sequence[dict[str, Any]] = ()
) -> list[Pod]:
    pods = []
    for obj in objects:
        if (obj.get("status") or {}).get("phase") in DONE_PHASES or any(
            ref.get("kind") == "DaemonSet" for ref in meta(obj).get("ownerReferences") or []
        ):
            continue
        spec = obj.get("spec") or {}
        gpus = _bounded(math.ceil(_request(spec, GPU_RESOURCE)), MAX_GPUS)
        pods.append(
            Pod(
                f"{namespace_of(obj)}/{name_of(obj) or '?'}",
                _bounded(math.ceil(_request(spec, "cpu") * MILLI), MAX_CPU_MILLI),
                _bounded(math.ceil(_request(spec, "memory") / MIB), MAX_MEMORY_MIB),
                gpus,
                MILLI if gpus else 0,
                _allowed_on(spec, nodes) if label_key == AUTO else _allowed_models(spec, label_key),
            )
        )
    return pods


def _request(spec: dict[str, Any], resource: str) -> Fraction:
    def of(container: dict[str, Any]) -> Fraction:
        res = container.get("resources") or {}
        value = (res.get("requests") or {}).get(resource, (res.get("limits") or {}).get(resource))
        return _amount(value)

    running = sum((of(c) for c in spec.get("containers") or []), Fraction(0))
    init = max((of(c) for c in spec.get("initContainers") or []), default=Fraction(0))
    return max(running, init)


def _allowed_models(spec: dict[str, Any], label_key: str) -> tuple[str, ...]:
    """The GPU label values the pod may run on; () when it names none."""
    selected = (spec.get("nodeSelector") or {}).get(label_key)
    if selected is not None:
        return (str(selected),)
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    # the terms are alternatives: a term that leaves the label free lets the pod anywhere
    models: list[str] = []
    for term in required.get("nodeSelectorTerms") or []:
        allowed: list[str] | None = None
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == label_key and expr.get("operator") == "In":
                values = [str(v) for v in expr.get("values") or []]
                allowed = values if allowed is None else [v for v in allowed if v in values]
        if allowed is None:
            return ()
        models += [v for v in allowed if v not in models]
    return tuple(models)


def _allowed_on(spec: dict[str, Any], nodes: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The models of the GPU nodes the pod's nodeSelector and required affinity select; ()
    when they select every GPU node (a model no node has when they select none)."""
    gpu_nodes = [n for n in nodes if is_gpu_node(n)]
    ok, every = set(), set()
    for n in gpu_nodes:
        model = _model_of(n, AUTO)
        every.add(model)
        if pod_may_run_on(spec, n):
            ok.add(model)
    if ok == every:
        return ()
    return tuple(sorted(ok)) or ("(no node)",)


def _amount(value: object) -> Fraction:
    """A quantity, 0 when missing or unreadable (the API server stores no such value)."""
    amount = None if value is None else from_api(value)
    return amount if amount is not None and amount > 0 else Fraction(0)


def _bounded(value: int, most: int) -> int:
    return min(value, most)
