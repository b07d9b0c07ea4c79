"""What `gpuctl reclaim` finds and plans: per GPU workload, whether every GPU it holds has
been idle for its rule's period (by the busy rule, over data that is fresh and whole), and
the action its rule names. Unknown is never idle: a GPU without a series, with a stale one,
with a gap in its window, without a finite busy signal at every step of it, or an answer
Prometheus warned was partial leaves its workload untouched, and the plan says so. What
gpuctl.k8s.marks says must be left alone (a mark on a pod or an owner up its chain, or an
owner it could not read) is not acted on either. Pure: the world and the time passed in, a
plan out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpuctl.common.plan import Plan, Step
from gpuctl.k8s.objects import annotations_of, labels_of, name_of, uid_of
from gpuctl.k8s.times import seconds, timestamp
from gpuctl.reclaim.core import policy as pol
from gpuctl.reclaim.core.signal import SIGNAL, Readings
from gpuctl.reclaim.core.workloads import Workload

RECORD = "gpuctl.io/reclaim"  # annotation: the JSON record of the last action and its figures
REPLICAS = "gpuctl.io/reclaim-replicas"  # annotation: the replica count scale-to-zero replaced
WARN = "warn"  # a grace period's first step: announced, not acted on yet

IDLE, BUSY, STALE, MISSING, GAP = "idle", "busy", "stale", "missing", "gap"
UNKNOWN = "unknown"  # no finite busy signal, or a partial answer
EXEMPT, NOT_COVERED, GRACE, DONE, OVER_CAP = "exempt", "not covered", "grace", "done", "over cap"
NOT_KNOWN = (STALE, MISSING, GAP, UNKNOWN)  # the data does not say: never acted on


@dataclass
class Row:
    workload: Workload
    status: str
    why: str
    rule: str | None = None
    idle_since: float | None = None  # None: not idle
    idle_since_known: bool = True  # False: idle for the whole lookback
    action: str | None = None  # what this run does (None: nothing)

    def to_dict(self, now: float) -> dict[str, Any]:
        w = self.workload
        return {
            "kind": w.kind,
            "namespace": w.namespace,
            "name": w.name,
            "team": w.team,
            "gpus": w.gpus,
            "pods": [name_of(p) for p in w.pods],
            "status": self.status,
            "why": self.why,
            "rule": self.rule,
            "idle_since": timestamp(self.idle_since) if self.idle_since is not None else None,
            "idle_since_known": self.idle_since_known,
            "idle_s": round(now - self.idle_since) if self.idle_since is not None else None,
            "action": self.action,
        }


@dataclass
class Finding:
    policy: pol.Policy
    rows: list[Row]
    plan: Plan
    now: float
    signal: str = SIGNAL

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.name,
            "signal": self.signal,
            "busy_percent": self.policy.busy_percent,
            "at": timestamp(self.now),
            "workloads": [r.to_dict(self.now) for r in self.rows],
            "plan": self.plan.to_dict(),
        }


def record_of(annotations: dict[str, str]) -> dict[str, Any]:
    """The record gpuctl left on an object ({} for none, or one it cannot read)."""
    try:
        value = json.loads(annotations.get(RECORD) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def duration_text(seconds: float) -> str:
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            whole, rest = divmod(s, size)
            small = {"d": ("h", 3600), "h": ("m", 60), "m": ("s", 1)}[unit]
            return f"{whole}{unit}" + (f"{rest // small[1]}{small[0]}" if rest >= small[1] else "")
    return f"{s}s"


def find(policy: pol.Policy, workloads: list[Workload], readings: Readings, now: float) -> Finding:
    rows = [_judge(policy, w, readings, now) for w in workloads]
    acting = sorted(
        (r for r in rows if r.action is not None),
        key=lambda r: (r.idle_since or 0, -r.workload.gpus, r.workload.ref),
    )
    for r in acting[policy.max_actions :]:
        r.status, r.action = OVER_CAP, None
        r.why += f"; over the cap of {policy.max_actions} actions a run"
    steps = tuple(_step(policy, r, readings, now) for r in acting[: policy.max_actions])
    notes = [
        f"not acted on, its data unknown: {r.workload.target}: {r.status}: {r.why}"
        for r in rows
        if r.status in NOT_KNOWN
    ]
    if len(acting) > policy.max_actions:
        notes.append(
            f"{len(acting) - policy.max_actions} idle workload(s) left for a later run (maxActions)"
        )
    plan = Plan(f"reclaim idle GPUs by policy {policy.name}", steps, tuple(notes))
    return Finding(policy, rows, plan, now)


def _labels(w: Workload) -> dict[str, str]:
    if w.obj is not None:
        return w.labels
    return dict(labels_of(w.pods[0]))


def _pod_annotations(w: Workload) -> dict[str, str]:
    """Where a kind gpuctl does not write keeps gpuctl's record: on its first pod."""
    return dict(annotations_of(w.pods[0]))


def _exempt(policy: pol.Policy, w: Workload) -> str | None:
    if w.namespace in policy.exempt_namespaces:
        return f"namespace {w.namespace} is exempt"
    return w.never


def _signal(
    rule: pol.PolicyRule, policy: pol.Policy, w: Workload, readings: Readings, now: float
) -> tuple[str, str, float | None]:
    """(status, why, idle since) from the pods' devices."""
    window, step = rule.idle_for_s, readings.queries.step_s
    if readings.warnings:
        return UNKNOWN, f"Prometheus's answer is partial: {readings.warnings[0]}", None
    last: list[float] = []
    for pod in w.pods:
        name = name_of(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        named = readings.devices((w.namespace, name))
        devices = [d for d in named if not d.on_node_only or d.node == node]
        want = w.gpus_of(pod)
        not_numbers = [why for d in devices for why in d.unknown]
        if not_numbers:
            return UNKNOWN, f"pod {name}: {not_numbers[0]}", None
        if len(devices) < want or any(d.newest is None for d in devices):
            found = sum(d.newest is not None for d in devices)
            why = f"pod {name}: {found} of its {want} GPU(s) have a current series"
            if elsewhere := sorted({d.node for d in named if d not in devices}):
                why += f" (series naming it in a plain pod label on {elsewhere[0]}, not its node)"
            return MISSING, why, None
        for d in devices:
            age = now - (d.newest or 0)
            if age > policy.stale_after_s:
                return STALE, f"pod {name}: newest sample {duration_text(age)} old", None
            expected = window // step
            # one step short of the window is Prometheus's alignment, not a gap; but a window
            # of one step needs that step: a pod started since has no sample in it yet
            needed = max(expected - 1, 1)
            if d.covered.get(window, 0) < needed:
                have = int(d.covered.get(window, 0))
                return (
                    GAP,
                    f"pod {name}: series present at {have} of {expected} steps of the window",
                    None,
                )
            measured, finite = d.measured.get(window, 0), d.finite.get(window, 0)
            if measured < needed:
                return (
                    UNKNOWN,
                    f"pod {name}: a busy signal ({SIGNAL}) at {int(measured)} of {expected} "
                    "steps of the window",
                    None,
                )
            if finite < measured:
                return (
                    UNKNOWN,
                    f"pod {name}: its busy signal is NaN or ±Inf at {int(measured - finite)} "
                    "step(s) of the window",
                    None,
                )
            if d.last_busy is not None:
                if d.last_busy >= now - window:
                    ago = max(now - d.last_busy, 0)
                    when = "now" if ago <= 2 * step else f"{duration_text(ago)} ago"
                    return BUSY, f"busy ≥ {policy.busy_percent} % {when}", None
                last.append(d.last_busy)
    since = max(last) if last else None
    return (
        IDLE,
        f"every GPU below {policy.busy_percent} % for {duration_text(window)} or more",
        since,
    )


def _judge(policy: pol.Policy, w: Workload, readings: Readings, now: float) -> Row:
    exempt = _exempt(policy, w)
    if exempt:
        return Row(w, EXEMPT, exempt)
    rule = policy.rule_for(w.namespace, _labels(w))
    if rule is None:
        return Row(w, NOT_COVERED, "no rule of the policy covers it")
    status, why, since = _signal(rule, policy, w, readings, now)
    if status != IDLE:
        return Row(w, status, why, rule.name)
    known = since is not None
    since = since if since is not None else now - rule.idle_for_s  # at least that long
    row = Row(w, IDLE, why, rule.name, since, known)
    action = rule.action_for(w.kind)
    record = record_of(w.annotations if w.obj is not None else _pod_annotations(w))
    at = seconds(record.get("at"))
    this_stretch = at is not None and at >= since
    if this_stretch and record.get("action") == action:
        row.status, row.why = DONE, f"{action} already done at {record['at']} for this idle stretch"
        return row
    if rule.grace_s and action != pol.REPORT:
        warned = this_stretch and record.get("action") == WARN
        if not warned:
            row.action, row.why = (
                WARN,
                why + f"; warned: {action} after {duration_text(rule.grace_s)}",
            )
            return row
        if at is not None and now < at + rule.grace_s:
            row.status, row.why = (
                GRACE,
                f"warned at {record['at']}: {action} after {timestamp(at + rule.grace_s)}",
            )
            return row
    row.action = action
    return row


def record(policy: pol.Policy, row: Row, readings: Readings, now: float) -> dict[str, Any]:
    """What gpuctl writes on the object it acts on: the action and the figures behind it."""
    assert row.action is not None and row.idle_since is not None
    rule = next(r for r in policy.rules if r.name == row.rule)
    return {
        "action": row.action,
        "at": timestamp(now),
        "policy": policy.name,
        "rule": row.rule,
        "gpus": row.workload.gpus,
        "idleSince": timestamp(row.idle_since) if row.idle_since_known else None,
        "idleFor": duration_text(rule.idle_for_s),
        "busyPercent": policy.busy_percent,
        "signal": SIGNAL,
        "lookback": duration_text(readings.queries.lookback_s),
    }


def _step(policy: pol.Policy, row: Row, readings: Readings, now: float) -> Step:
    w = row.workload
    assert row.action is not None and row.idle_since is not None
    idle = duration_text(now - row.idle_since) + ("" if row.idle_since_known else "+")
    why = f"{w.gpus} GPU(s) idle {idle} (rule {row.rule})"
    detail: dict[str, Any] = {
        "kind": w.kind,
        "namespace": w.namespace,
        "name": w.name,
        "apiVersion": w.api_version,
        "record": record(policy, row, readings, now),
    }
    if row.action == pol.SUSPEND and w.kueue_workload:
        detail["kueueWorkload"] = detail["record"]["kueueWorkload"] = w.kueue_workload
        why += f"; through Kueue Workload {w.kueue_workload}"
    if row.action == pol.SCALE and w.obj is not None:
        detail["replicas"] = int((w.obj.get("spec") or {}).get("replicas", 1))
    detail["uid"] = uid_of(w.obj)  # the object the plan is about: not one made since
    detail["pods"] = [name_of(p) for p in w.pods]
    detail["podUids"] = [uid_of(p) for p in w.pods]
    return Step(row.action, w.target, why, detail)
