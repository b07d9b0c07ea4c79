"""core/v1 Events gpuctl writes on the objects it acts on. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuctl.k8s.times import timestamp


def event(
    involved: Mapping[str, Any], reason: str, message: str, now: float, warning: bool
) -> dict[str, Any]:
    """An Event about INVOLVED (kind, name, namespace; apiVersion and uid where known),
    named as the API server names its own (OBJECT.<hex nanoseconds>)."""
    about = {k: v for k, v in involved.items() if v}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{about['name']}.{int(now * 1e9):x}",
            "namespace": about["namespace"],
        },
        "involvedObject": about,
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": "gpuctl"},
        "reportingComponent": "gpuctl",
        "reportingInstance": "gpuctl",
        "firstTimestamp": timestamp(now),
        "lastTimestamp": timestamp(now),
        "count": 1,
    }
