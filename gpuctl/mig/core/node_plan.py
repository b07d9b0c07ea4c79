"""What `gpuctl mig configure` does on a node: the GPUs' plans (core.diff) as one plan,
printed per GPU as text or -o json|yaml; each GPU's steps, with their why, are the steps
the executor carries out, GPU by GPU. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuctl.common.plan import Step as PlanStep
from gpuctl.mig.core.diff import Desired, GpuPlan, Step
from gpuctl.mig.core.migparted import summary


@dataclass(frozen=True)
class NodePlan:
    """The plan of each GPU of the node (GPUS) for what each should hold (DESIRED);
    FROM_FILE: asked by a config file (whose entries may match no GPU)."""

    gpus: tuple[GpuPlan, ...]
    desired: Mapping[int, Desired | None]
    from_file: bool = False

    @property
    def untouched(self) -> bool:
        """No GPU is matched by what was asked: nothing to do."""
        return all(d is None for d in self.desired.values())

    @property
    def empty(self) -> bool:
        """Nothing to change: every GPU is as asked."""
        return all(p.applied for p in self.gpus)

    @property
    def blocked(self) -> list[str]:
        return [b for p in self.gpus for b in p.blocked]

    @property
    def resets(self) -> list[int]:
        """The GPUs this plan may reset: a pending MIG mode to apply, or a mode change, which
        takes effect only after a GPU reset on many drivers (nvidia-mig-parted resets them
        too); cancelling a pending change needs none."""
        return [
            p.state.index
            for p in self.gpus
            if p.state.mig is not None and any(_may_reset(s, p.state.mig[0]) for s in p.steps)
        ]

    def lines(self) -> list[str]:
        """The plan as text: per GPU what it should hold, what stays, each step, each block."""
        lines = []
        for p in self.gpus:
            if p.desired is None:
                if self.from_file:
                    lines.append(f"{p.state.label}: matched by no entry: left as is")
                continue
            head = f"{p.state.label}: {p.desired.skipped or summary(p.desired)}"
            if p.desired.source:
                head += f"  [{p.desired.source}]"
            lines.append(head)
            lines += [f"  note: {n}" for n in p.desired.notes]
            if p.desired.skipped:
                continue
            if not p.steps:
                lines.append("  already applied")
            lines += [f"  keep    {k}" for k in p.kept]
            if p.state.index in self.resets:
                lines.append(
                    f"  note: GPU {p.state.index} is reset where the driver holds its new MIG "
                    "mode pending (needs --reset; nothing may run on it)"
                )
            lines += [f"  {s.text}" for s in p.steps]
            lines += [f"  BLOCKED {b}" for b in p.blocked]
        return lines

    def to_dict(self, dry_run: bool) -> dict[str, Any]:
        """The plan of each GPU the config touches, for -o json|yaml."""
        return {
            "gpus": [
                {
                    "gpu": p.state.label,
                    "index": p.state.index,
                    "wanted": p.desired.skipped or summary(p.desired),
                    "source": p.desired.source or None,
                    "notes": list(p.desired.notes),
                    "keep": list(p.kept),
                    "steps": [s.text for s in p.steps],
                    "blocked": list(p.blocked),
                    "may_reset": p.state.index in self.resets,
                    "applied": p.applied,
                }
                for p in self.gpus
                if p.desired is not None
            ],
            "dryRun": dry_run,
        }


def _may_reset(step: Step, mig_current: bool) -> bool:
    return step.kind == "reset" or (step.kind == "set-mig-mode" and step.enable != mig_current)


def plan_step(step: Step, index: int, total: int) -> PlanStep:
    """Step INDEX (from 0) of the TOTAL of one GPU as the executor's: the GPU's own numbering
    (step 2 of 3) in the detail, for saying which step of the GPU failed."""
    action, _, target = step.text.partition(" ")
    if f"GPU {step.gpu}" not in target:
        target += f" on GPU {step.gpu}"
    detail = {"gpu": step.gpu, "kind": step.kind, "step": index + 1, "of": total}
    return PlanStep(action, target, step.why, detail)
