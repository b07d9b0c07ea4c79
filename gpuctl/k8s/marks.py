"""The one rule for what gpuctl never acts on, read by reclaim, make-room and mig rebalance
--drain alike: an object marked `gpuctl.io/reclaim: never` or `gpuctl.io/evict: never` (a
label or an annotation, each read on its own), or one whose controllers up the chain (a
pod's ReplicaSet and its Deployment, a pod's Job and its CronJob or JobSet, …) carry such
a mark. An owner that could not be read covers nothing: its marks are not known. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuctl.k8s.objects import Ref, annotations_of, labels_of, namespace_of, owner_chain

NEVER = (("gpuctl.io/reclaim", "never"), ("gpuctl.io/evict", "never"))


def marked(obj: Mapping[str, Any] | None) -> str | None:
    """The mark OBJ itself carries (`gpuctl.io/evict: never (label)`), or None."""
    for key, value in NEVER:
        for where, found in (("label", labels_of(obj)), ("annotation", annotations_of(obj))):
            if found.get(key) == value:
                return f"{key}: {value} ({where})"
    return None


def never(obj: Mapping[str, Any], owners: Mapping[Ref, Mapping[str, Any]]) -> str | None:
    """Why gpuctl must leave OBJ alone by the marks on it and on its owners, in words, or
    None. OWNERS: the objects read that may own it, by (kind, namespace, name)."""
    mark = marked(obj)
    if mark:
        return f"marked {mark}"
    namespace = namespace_of(obj) or "default"
    for ref, owner in owner_chain(obj, owners):
        what = f"{ref.get('kind')} {namespace}/{ref.get('name')}"
        if owner is None:
            return f"its {what} could not be read: whether it is marked never is not known"
        mark = marked(owner)
        if mark:
            return f"its {what} is marked {mark}"
    return None
