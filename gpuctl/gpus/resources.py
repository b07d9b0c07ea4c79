"""The GPU and other accelerator resources of pods: which ones a pod asks for, and how many
of each it holds. Pure: works on pods as the API returns them."""

from __future__ import annotations

from typing import Any

from gpuctl.common.quantity import count
from gpuctl.gpus.vendors import is_accelerator_resource

DONE_PHASES = ("Succeeded", "Failed")


def gpu_resources(pod: dict[str, Any]) -> set[str]:
    """The nvidia.com/* resources any of the pod's containers (init ones too) asks for."""
    return {name for name in _asked(pod) if name.startswith("nvidia.com/")}


def accelerator_resources(pod: dict[str, Any]) -> set[str]:
    """The NVIDIA GPU resources (gpu_resources) and every other vendor's accelerator
    resources (gpuctl.gpus.vendors) the pod's containers ask for."""
    return gpu_resources(pod) | {n for n in _asked(pod) if is_accelerator_resource(n)}


def _asked(pod: dict[str, Any]) -> set[str]:
    """Every resource any of the pod's containers (init ones too) asks for."""
    spec = pod.get("spec") or {}
    return {
        name
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
        for part in ("limits", "requests")
        for name in ((c.get("resources") or {}).get(part) or {})
    }


def requested(pod: dict[str, Any], resource: str) -> int:
    spec = pod.get("spec") or {}
    total = 0
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("requests") or {}).get(resource, (res.get("limits") or {}).get(resource))
        total += count(value) if value is not None else 0
    # an init container holds its resources while it runs: the pod needs the max of both
    init = max(
        (
            count(((c.get("resources") or {}).get("limits") or {}).get(resource, 0))
            for c in spec.get("initContainers") or []
        ),
        default=0,
    )
    return max(total, init)


def holds(pod: dict[str, Any], node: str) -> bool:
    """Whether POD is bound to NODE and not finished: what the scheduler counts as using the
    node's resources (a pending pod already bound does)."""
    return (pod.get("spec") or {}).get("nodeName") == node and (pod.get("status") or {}).get(
        "phase"
    ) not in DONE_PHASES


def accelerators_requested(pod: dict[str, Any]) -> dict[str, int]:
    """Each accelerator resource of any vendor the pod asks for, and how many (as
    `requested` counts them)."""
    names = sorted(name for name in _asked(pod) if is_accelerator_resource(name))
    return {name: requested(pod, name) for name in names}
