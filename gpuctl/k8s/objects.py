"""Any object as the API returns it: its name, namespace, uid, labels and annotations, and who
owns it (its ownerReferences). A part the object lacks reads as empty. Pure."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

Obj = Mapping[str, Any]
Ref = tuple[str, str, str]  # (kind, namespace, name): an object among others read
AnyObj = TypeVar("AnyObj", bound=Obj)


def meta(obj: Obj | None) -> Mapping[str, Any]:
    """OBJ's metadata; {} where it has none."""
    found = (obj or {}).get("metadata")
    return found if isinstance(found, Mapping) else {}


def name_of(obj: Obj | None) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Obj | None) -> str:
    """The object's namespace; "" for a cluster-scoped object, or one a list left it off."""
    return str(meta(obj).get("namespace") or "")


def uid_of(obj: Obj | None) -> str | None:
    uid = meta(obj).get("uid")
    return str(uid) if uid else None


def labels_of(obj: Obj | None) -> dict[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Obj | None) -> dict[str, str]:
    return meta(obj).get("annotations") or {}


def controller_of(obj: Obj | None) -> dict[str, Any] | None:
    """The ownerReference marked controller (the one that recreates OBJ), or None."""
    refs = meta(obj).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


def owner_chain(
    obj: AnyObj, owners: Mapping[Ref, AnyObj]
) -> Iterator[tuple[dict[str, Any], AnyObj | None]]:
    """OBJ's controllers up the chain, nearest first (a pod's ReplicaSet, then its
    Deployment): each controller reference with the object it names among OWNERS (by
    (kind, namespace, name), in OBJ's namespace, "default" where it has none), or None where
    OWNERS lacks it, which ends the chain. A reference back to an object already passed
    (a loop) ends it too."""
    namespace = namespace_of(obj) or "default"
    passed: set[Ref] = set()
    while (ref := controller_of(obj)) is not None:
        key = (str(ref.get("kind") or ""), namespace, str(ref.get("name") or ""))
        if key in passed:
            return
        passed.add(key)
        up = owners.get(key)
        yield ref, up
        if up is None:
            return
        obj = up
