"""JSON patches (RFC 6902) that change an object only while it is as gpuctl expects: `test`
operations name what must still hold (the object's uid, a field's value, or, where a field
is expected to be unset, the object's resourceVersion), and the API server applies the whole
patch or none of it (a failed test is answered 422). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Path = tuple[str, ...]  # ("metadata", "labels", "nvidia.com/mig.config")
Op = dict[str, Any]


def pointer(path: Path) -> str:
    """The JSON pointer (RFC 6901) of PATH: `/metadata/labels/nvidia.com~1mig.config`."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)


def value_at(obj: Mapping[str, Any] | None, path: Path) -> Any:
    """The value at PATH in OBJ; None where any part of it is missing."""
    here: Any = obj
    for part in path:
        if not isinstance(here, Mapping):
            return None
        here = here.get(part)
    return here


def holds(obj: Mapping[str, Any] | None, path: Path, expected: Any) -> bool:
    """Whether the field at PATH holds EXPECTED; None expects it unset (absent, null or
    false: how the API leaves a boolean such as spec.unschedulable that is off)."""
    found = value_at(obj, path)
    return found in (None, False) if expected is None else found == expected


def what_differs(obj: Mapping[str, Any], expect: Mapping[Path, Any]) -> Path | None:
    """The first field of EXPECT that OBJ does not hold, or None."""
    return next((p for p, v in expect.items() if not holds(obj, p, v)), None)


def change(
    obj: Mapping[str, Any], expect: Mapping[Path, Any], fields: Mapping[Path, Any]
) -> list[Op]:
    """The patch that sets FIELDS (None: removes the field) on OBJ as read, applied only while
    it is the same object (uid) and every field of EXPECT still holds its value there."""
    meta = obj.get("metadata") or {}
    ops: list[Op] = []
    if meta.get("uid"):
        ops.append({"op": "test", "path": "/metadata/uid", "value": meta["uid"]})
    for path, value in expect.items():
        if value is not None:
            ops.append({"op": "test", "path": pointer(path), "value": value})
    if any(v is None for v in expect.values()) or not expect:  # unset cannot be tested
        ops.append(
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": meta.get("resourceVersion"),
            }
        )
    made: set[Path] = set()
    for path, value in fields.items():
        current = value_at(obj, path)
        if value is None:
            if current is not None:
                ops.append({"op": "remove", "path": pointer(path)})
            continue
        for depth in range(1, len(path)):  # parents the object lacks are made first
            parent = path[:depth]
            if value_at(obj, parent) is None and parent not in made:
                ops.append({"op": "add", "path": pointer(parent), "value": {}})
                made.add(parent)
        ops.append(
            {
                "op": "replace" if current is not None else "add",
                "path": pointer(path),
                "value": value,
            }
        )
    return ops
