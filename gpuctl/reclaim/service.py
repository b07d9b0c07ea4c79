"""`gpuctl reclaim` and `gpuctl make-room` as workflows: read the cluster and Prometheus,
ask the pure part for the plan, and carry it out through the one executor. A partial
failure or Ctrl-C stops the run and says what was done; nothing is rolled back (a
suspended or scaled workload is put back with `gpuctl reclaim restore`), and re-running is
idempotent."""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from gpuctl.adapters.kube import Conflict, Kube, NotFound
from gpuctl.common.errors import GpuctlError
from gpuctl.common.plan import Plan, Step
from gpuctl.dcgm.holders import Exporter
from gpuctl.k8s import apis
from gpuctl.k8s.objects import Ref, name_of, namespace_of, uid_of
from gpuctl.reclaim.core import actions, decide, room, signal, workloads
from gpuctl.reclaim.core import policy as pol
from gpuctl.runtime.workflow import Action, Progress, execute

HINT = "re-run gpuctl reclaim: it skips what is done and plans the rest"


def _owners(kube: Kube) -> dict[Ref, dict]:
    found: list[tuple[str, dict]] = []
    for kind in ("Job", "Deployment"):
        found += [(kind, o) for o in kube.list_objects(kind)]
    for kind in ("ReplicaSet", "StatefulSet"):
        found += [(kind, o) for o in kube.list_objects(kind)]
    if kube.serves(apis.JOBSET_API_VERSION):
        found += [("JobSet", o) for o in kube.list_objects("JobSet")]
    out = {}
    for kind, obj in found:
        out[(kind, namespace_of(obj) or "default", name_of(obj))] = obj
    return out


def find(kube: Kube, prometheus: Any, policy: pol.Policy, exporter: Exporter) -> decide.Finding:
    """The GPU workloads, each judged by the policy, and the plan."""
    q = signal.queries([r.idle_for_s for r in policy.rules], policy.busy_percent)
    view = kube.dra()  # the holders of DRA devices, from their claims
    by_uuid = view.holders() if view is not None else {}
    readings = signal.read(q, prometheus.query_all(q.all()), exporter, by_uuid)
    now = time.time()
    claimed = Counter(by_uuid.values())
    found = workloads.group(kube.unfinished_pods(), _owners(kube), kube.kueue_workloads(), claimed)
    return decide.find(policy, found, readings, now)


def _run_step(kube: Kube, step: Step, now: float) -> None:
    d = step.detail
    kind, name, namespace = d["kind"], d["name"], d["namespace"]
    reason = actions.REASONS[step.action]
    readable = kind in ("Job", "JobSet", "Deployment", "StatefulSet", "Pod")
    answer: dict | None = None
    if step.action == pol.SUSPEND and d.get("kueueWorkload"):
        api = apis.kueue_api_version(kube.kueue_version())
        kube.patch("Workload", d["kueueWorkload"], namespace, actions.kueue_patch(step), api)
    if readable:
        try:
            answer = kube.patch(kind, name, namespace, actions.object_patch(step))
        except Conflict:
            if "resourceVersion" not in d:
                raise
            raise _changed(step, f"scaled to zero from {d['replicas']} replicas") from None
    else:  # a kind gpuctl does not write (a Notebook): the record goes on its pods
        for pod in d["pods"]:
            kube.patch("Pod", pod, namespace, actions.object_patch(step))
    if step.action == pol.DELETE:
        for pod in d["pods"]:
            try:
                kube.evict(pod, namespace)
            except NotFound:
                pass  # gone already: what the step wanted
    message = f"gpuctl reclaim: {step.action}: {step.why}"
    event = actions.event(
        kind, d["apiVersion"] or "v1", namespace, name, uid_of(answer), reason, message, now
    )
    try:
        kube.create(event)
    except Conflict:
        pass  # the same event, recorded by an earlier try whose answer was lost


def _changed(step: Step, done: str) -> GpuctlError:
    """A scale refused by its resourceVersion precondition: the object changed since read."""
    d = step.detail
    return GpuctlError(
        f"{d['kind']} {d['namespace']}/{d['name']} changed after gpuctl read it: not {done}, "
        "nothing recorded on it",
        hint="run it again: the plan is made anew from what is there now",
    )


def _forward_only(done: Sequence[Action], left: Sequence[Action]) -> tuple[str, str | None]:
    said = "; done: " + (", ".join(a.label for a in done) or "nothing")
    said += "; not done: " + ", ".join(a.label for a in left)
    return said, HINT


def apply(kube: Kube, finding: decide.Finding, progress: Progress | None) -> None:
    now = time.time()
    steps = [
        Action(s, functools.partial(_run_step, kube, s, now), name=f"{s.action} {s.target}")
        for s in finding.plan.steps
    ]
    execute(steps, progress=progress, forward_only=_forward_only)


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
        if d["kind"] == "Workload":
            api = apis.kueue_api_version(version)
            kube.patch("Workload", d["name"], d["namespace"], d["patch"], api)
        else:
            try:
                kube.patch(d["kind"], d["name"], d["namespace"], d["patch"])
            except Conflict:
                if "resourceVersion" not in d["patch"].get("metadata", {}):
                    raise
                raise _changed(step, "scaled back") from None
        message = f"gpuctl reclaim restore: {step.action}: {step.why}"
        kube.create(
            actions.event(
                d["kind"],
                "",
                d["namespace"],
                d["name"],
                None,
                actions.RESTORED,
                message,
                time.time(),
            )
        )

    steps = [
        Action(s, functools.partial(run, s), name=f"{s.action} {s.target}") for s in plan.steps
    ]
    execute(steps, progress=progress, forward_only=_forward_only)


# --- make-room ---------------------------------------------------------------------------


def plan_room(kube: Kube, want: room.Want, namespace: str | None = None) -> room.RoomPlan:
    nodes = kube.list_objects("Node")
    pods = kube.unfinished_pods()
    pdbs = kube.list_objects("PodDisruptionBudget")
    return room.plan(nodes, pods, pdbs, _owners(kube), want)


def make_room(kube: Kube, result: room.RoomPlan, progress: Progress | None) -> None:
    def evict(step: Step) -> None:
        kube.evict(step.detail["name"], step.detail["namespace"])

    def stopped(done: Sequence[Action], left: Sequence[Action]) -> tuple[str, str | None]:
        said = "; evicted: " + (", ".join(a.label for a in done) or "nothing")
        return said + "; not evicted: " + ", ".join(a.label for a in left), (
            "run gpuctl make-room again: it plans from what is left"
        )

    steps = [Action(s, functools.partial(evict, s), name=s.target) for s in result.plan.steps]
    execute(steps, progress=progress, forward_only=stopped)


def want_of(
    kube: Kube, job: str | None, shape: str | None, resource: str, namespace: str | None
) -> room.Want:
    from gpuctl.common.errors import GpuctlError, UsageError

    if (job is None) == (shape is None):
        raise UsageError("name a waiting JOB or give --for NxG (one of them)")
    if shape is not None:
        return room.parse_shape(shape, resource)
    assert job is not None
    want = room.want_of_pods(job, kube.unfinished_pods(namespace or kube.namespace))
    if want is None:
        raise GpuctlError(
            f"no pending GPU pods of {job!r} in namespace {namespace or kube.namespace}",
            hint="a Kueue-suspended job has no pods yet: give its shape with --for NxG",
        )
    return want
