"""A pod's gang kept within one topology domain: the keys of its required pod affinity terms
that select the pod itself (its gang's pods), as gpuctl's `topology:` (gpuctl.jobs.core.topology)
and JobSet's exclusive placement write them. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuctl.k8s.objects import labels_of
from gpuctl.k8s.selectors import label_selector_matches


def gang_keys(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The topology keys POD's gang keeps within (sorted; none when it keeps within none)."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("podAffinity") or {}
    terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    own = labels_of(pod)
    keys = {
        t["topologyKey"]
        for t in terms
        if t.get("topologyKey") and label_selector_matches(t.get("labelSelector"), own)
    }
    return tuple(sorted(keys))
