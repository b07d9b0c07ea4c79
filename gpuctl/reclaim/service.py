"""`gpuctl reclaim` and `gpuctl make-room` as workflows: read the cluster and Prometheus,
ask the pure part for the plan, and carry it out through the one executor. A partial
failure or Ctrl-C stops the run and says what was done; nothing is rolled back (a
suspended or scaled workload is put back with `gpuctl reclaim restore`), and re-running is
idempotent.

Every write re-reads what it changes first and holds it by a precondition
(gpuctl.adapters.kube_guarded): a workload or pod marked never (on itself or up its owner
chain), replaced under the same name, or changed from what the plan counted on just before
the write is left alone, and the run stops saying why."""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from gpuctl.adapters.kube import Conflict, Kube
from gpuctl.adapters.kube_guarded import (
    Changed,
    Evictions,
    Target,
    patch_checked,
    read_chain,
    read_unreplaced,
)
from gpuctl.common.errors import GpuctlError
from gpuctl.common.plan import Plan, Step
from gpuctl.dcgm.holders import Exporter
from gpuctl.k8s import apis, marks
from gpuctl.k8s.objects import Ref, controller_of, name_of, namespace_of, uid_of
from gpuctl.reclaim.core import actions, decide, room, signal, workloads
from gpuctl.reclaim.core import policy as pol
from gpuctl.runtime.workflow import Action, Progress, execute

HINT = "re-run gpuctl reclaim: it skips what is done and plans the rest"
RECORDED_ON = ("Job", "JobSet", "Deployment", "StatefulSet", "CronJob", "Pod")  # own record


def _owners(kube: Kube) -> dict[Ref, dict]:
    kinds = ["Job", "CronJob", "Deployment", "ReplicaSet", "StatefulSet"]
    if kube.serves(apis.JOBSET_API_VERSION):
        kinds.append("JobSet")
    out = {}
    for kind in kinds:
        for obj in kube.list_objects(kind):
            out[(kind, namespace_of(obj) or "default", name_of(obj))] = obj
    return out


def find(kube: Kube, prometheus: Any, policy: pol.Policy, exporter: Exporter) -> decide.Finding:
    """The GPU workloads, each judged by the policy, and the plan."""
    q = signal.queries([r.idle_for_s for r in policy.rules], policy.busy_percent)
    view = kube.dra()  # the holders of DRA devices, from their claims
    by_uuid = view.holders() if view is not None else {}
    by_mig = view.mig_holders() if view is not None else {}
    warnings: list[str] = []
    answers = prometheus.query_all(q.all(), warnings=warnings)
    readings = signal.read(q, answers, exporter, warnings, by_uuid, by_mig)
    now = time.time()
    claimed = Counter(by_uuid.values())
    found = workloads.group(kube.unfinished_pods(), _owners(kube), kube.kueue_workloads(), claimed)
    return decide.find(policy, found, readings, now)


def never_now(kube: Kube, pod: dict) -> str | None:
    """What gpuctl.k8s.marks says of POD and its owners, read now."""
    return marks.never(pod, read_chain(kube, pod))


def _pods_unmarked(kube: Kube, step: Step) -> None:
    """Read the step's pods and their owners again: one marked never since the plan stops it."""
    d = step.detail
    for name, uid in zip(d["pods"], d["podUids"]):
        try:
            pod = read_unreplaced(kube, Target("Pod", name, d["namespace"]), uid)
        except Changed:
            continue  # gone or replaced: its workload's own object is what is checked
        why = never_now(kube, pod)
        if why:
            raise Changed(f"pod {d['namespace']}/{name}: {why}; {step.target} not acted on")


def _as_planned(step: Step) -> Callable[[dict], str | None]:
    """The check of the workload's object, read just before the write."""
    d = step.detail

    def check(obj: dict) -> str | None:
        mark = marks.marked(obj)
        if mark:
            return f"marked {mark} since the plan was made; not acted on"
        replicas = (obj.get("spec") or {}).get("replicas", 1)
        if step.action == pol.SCALE and replicas != d["replicas"]:
            return (
                f"scaled to {replicas} replicas since gpuctl read it: not scaled to zero from "
                f"{d['replicas']}, nothing recorded on it"
            )
        return None

    return check


def _run_step(kube: Kube, step: Step, now: float, evictions: Evictions) -> None:
    d = step.detail
    kind, name, namespace = d["kind"], d["name"], d["namespace"]
    target = Target(kind, name, namespace, d["apiVersion"] or None)
    _pods_unmarked(kube, step)
    answer: dict | None = None
    if kind in RECORDED_ON:
        kueue = step.action == pol.SUSPEND and d.get("kueueWorkload")
        if kueue:  # the Workload first, then the Job's record holds it: see _deactivate
            answer = _deactivate(kube, step, target)
        else:
            answer = patch_checked(
                kube, target, actions.object_patch(step), d["uid"], _as_planned(step)
            )
    else:  # a kind gpuctl does not write: the record goes on its pods
        for pod, uid in zip(d["pods"], d["podUids"]):
            pod_target = Target("Pod", pod, namespace)
            patch_checked(kube, pod_target, actions.object_patch(step), uid, marks.marked)
    if step.action == pol.DELETE:
        for pod, uid in zip(d["pods"], d["podUids"]):
            evictions.evict(kube, namespace, pod, uid, functools.partial(never_now, kube))
    message = f"gpuctl reclaim: {step.action}: {step.why}"
    reason = actions.REASONS[step.action]
    event = actions.event(
        kind, d["apiVersion"] or "v1", namespace, name, uid_of(answer), reason, message, now
    )
    try:
        kube.create(event)
    except Conflict:
        pass  # the same event, recorded by an earlier try whose answer was lost


def _deactivate(kube: Kube, step: Step, job: Target) -> dict:
    """Suspend a Kueue-managed Job or JobSet through its Workload: deactivate the Workload of
    this very object (its owner's uid), then record the action on the object, held by the
    resourceVersion checked unmarked. Marked or replaced in between: the Workload is
    reactivated and the step stops, so a Workload stays touched only while its owner is
    covered."""
    d = step.detail
    api = apis.kueue_api_version(kube.kueue_version())
    workload = Target("Workload", d["kueueWorkload"], d["namespace"], api)
    check = _as_planned(step)
    why = check(read_unreplaced(kube, job, d["uid"]))
    if why:
        raise Changed(f"{job.text}: {why}")

    def owned(wl: dict) -> str | None:
        ref = controller_of(wl) or {}
        return None if ref.get("uid") == d["uid"] else f"it is not {job.text}'s"

    patch_checked(kube, workload, actions.kueue_patch(step), None, owned)
    try:
        return patch_checked(kube, job, actions.object_patch(step), d["uid"], check)
    except GpuctlError as e:
        back = {"spec": {"active": True}, "metadata": {"annotations": {decide.RECORD: None}}}
        try:
            patch_checked(kube, workload, back, None, owned)
            e.message += f"; its Workload {d['kueueWorkload']} was reactivated"
        except GpuctlError as again:
            e.message += f"; reactivating its Workload {d['kueueWorkload']} failed: {again.message}"
        raise


def _stopped(
    evictions: Evictions,
) -> Callable[[Sequence[Action], Sequence[Action]], tuple[str, str | None]]:
    def said(done: Sequence[Action], left: Sequence[Action]) -> tuple[str, str | None]:
        text = "; done: " + (", ".join(a.label for a in done) or "nothing")
        text += "; not done: " + ", ".join(a.label for a in left)
        if evictions.begun:
            text += "; " + evictions.account()
        return text, HINT

    return said


def apply(
    kube: Kube, finding: decide.Finding, progress: Progress | None, evictions: Evictions
) -> None:
    now = time.time()
    steps = [
        Action(
            s,
            functools.partial(_run_step, kube, s, now, evictions),
            name=f"{s.action} {s.target}",
        )
        for s in finding.plan.steps
    ]
    execute(steps, progress=progress, forward_only=_stopped(evictions))


def _restorable(kube: Kube) -> list[tuple[str, dict]]:
    found = [("Deployment", o) for o in kube.list_objects("Deployment")]
    found += [("StatefulSet", o) for o in kube.list_objects("StatefulSet")]
    found += [("Job", o) for o in kube.list_objects("Job")]
    if kube.serves(apis.JOBSET_API_VERSION):
        found += [("JobSet", o) for o in kube.list_objects("JobSet")]
    found += [("Workload", o) for o in kube.kueue_workloads()]
    return found


def plan_restore(kube: Kube, namespace: str | None) -> Plan:
    return actions.restore_plan(_restorable(kube), namespace)


def restore(kube: Kube, plan: Plan, progress: Progress | None) -> None:
    version = kube.kueue_version()

    def run(step: Step) -> None:
        d = step.detail
        api = apis.kueue_api_version(version) if d["kind"] == "Workload" else None
        target = Target(d["kind"], d["name"], d["namespace"], api)
        patch_checked(
            kube, target, d["patch"], d["uid"], functools.partial(actions.restore_changed, step)
        )
        message = f"gpuctl reclaim restore: {step.action}: {step.why}"
        event = actions.event(
            d["kind"], "", d["namespace"], d["name"], d["uid"], actions.RESTORED, message,
            time.time(),
        )  # fmt: skip
        kube.create(event)

    steps = [
        Action(s, functools.partial(run, s), name=f"{s.action} {s.target}") for s in plan.steps
    ]
    execute(steps, progress=progress, forward_only=_stopped(Evictions()))


# --- make-room ---------------------------------------------------------------------------


def plan_room(kube: Kube, want: room.Want) -> room.RoomPlan:
    nodes = kube.list_objects("Node")
    pods = kube.unfinished_pods()
    pdbs = kube.list_objects("PodDisruptionBudget")
    return room.plan(nodes, pods, pdbs, _owners(kube), want)


def make_room(
    kube: Kube, result: room.RoomPlan, progress: Progress | None, evictions: Evictions
) -> None:
    """Evict the plan's pods in order: each read again and checked against the never rule
    (its marks and its owners', now) and held by the uid the plan saw."""

    def evict(step: Step) -> None:
        d = step.detail
        evictions.evict(
            kube, d["namespace"], d["name"], d["uid"], functools.partial(never_now, kube)
        )

    def stopped(done: Sequence[Action], left: Sequence[Action]) -> tuple[str, str | None]:
        said = "; " + evictions.account()
        return said + "; not evicted: " + ", ".join(a.label for a in left), (
            "run gpuctl make-room again: it plans from what is left"
        )

    steps = [Action(s, functools.partial(evict, s), name=s.target) for s in result.plan.steps]
    execute(steps, progress=progress, forward_only=stopped)


def want_of(kube: Kube, job: str, namespace: str | None) -> room.Want:
    """The shape of the waiting JOB, from its pending pods."""
    want = room.want_of_pods(job, kube.unfinished_pods(namespace or kube.namespace))
    if want is None:
        raise GpuctlError(
            f"no pending GPU pods of {job!r} in namespace {namespace or kube.namespace}",
            hint="a Kueue-suspended job has no pods yet: give its shape with --for NxG",
        )
    return want
