"""The GPU resources of pods: which ones a pod asks for, and how many of each it holds.
Pure: works on pods as the API returns them."""

from __future__ import annotations

from typing import Any

from gpuctl.common.quantity import count

DONE_PHASES = ("Succeeded", "Failed")


def gpu_resources(pod: dict[str, Any]) -> set[str]:
    """The nvidia.com/* resources any of the pod's containers (init ones too) asks for."""
    spec = pod.get("spec") or {}
    return {
        name
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
        for part in ("limits", "requests")
        for name in ((c.get("resources") or {}).get(part) or {})
        if name.startswith("nvidia.com/")
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
