"""Any object as the API returns it: its labels, and who owns it (its ownerReferences). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def controller_of(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ownerReference marked controller (the one that recreates OBJ), or None."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)
