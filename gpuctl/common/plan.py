"""A workflow's plan: what a command that changes something will create, change or remove,
and why. Planning is pure (the world read in, a Plan out); gpuctl.runtime.workflow carries a
plan's steps out, and the CLI prints one as text or as data (-o json|yaml). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Step:
    """One change: ACTION (a verb: create, patch, delete, label, configure, …) on TARGET
    (what it acts on, as a user names it: `Job ml/llama`, `node gpu-1`, `GPU 0`), and WHY.
    DETAIL is data for -o json|yaml (the object, the fields that change)."""

    action: str
    target: str
    why: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        return f"{self.action} {self.target}" + (f": {self.why}" if self.why else "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "target": self.target}
        if self.why:
            out["why"] = self.why
        if self.detail:
            out["detail"] = dict(self.detail)
        return out


@dataclass(frozen=True)
class Plan:
    """What a workflow will do (STEPS, in order) for WHAT it was asked; NOTES are warnings
    and facts found while planning. No steps: nothing to change."""

    what: str
    steps: tuple[Step, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.steps

    def lines(self) -> list[str]:
        """The plan as text, one line a step (numbered) after a heading."""
        if self.empty:
            return [f"{self.what}: nothing to change"]
        width = len(str(len(self.steps)))
        return [
            f"{self.what}:",
            *(f"  {i:>{width}}. {s.text()}" for i, s in enumerate(self.steps, 1)),
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "steps": [s.to_dict() for s in self.steps],
            "notes": list(self.notes),
        }
