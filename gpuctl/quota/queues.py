"""Team quotas as Kueue queues on a cluster: plan and apply `quota set --engine kueue`
(all objects or none), and gather what `quota list` and `quota lint` show."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuctl.adapters.kube import Kube, NoAnswer, NotFound
from gpuctl.common.errors import GpuctlError
from gpuctl.k8s import apis
from gpuctl.k8s.labels import managed_by_gpuctl
from gpuctl.quota.core import kueue
from gpuctl.quota.core import rules as core
from gpuctl.quota.core.queue_usage import CapacityRow, Finding, QueueRow, lint, queue_rows

Change = tuple[str, str | None, str | None]


def kueue_version(kube: Kube) -> str | None:
    """The Kueue API version gpuctl will speak with this cluster; None without Kueue."""
    return apis.kueue_version(kube.api_versions(apis.KUEUE_GROUP))


@dataclass
class Step:
    """One object of the plan: what is wanted, and what is done about it."""

    obj: dict[str, Any]
    action: str  # create | update | unchanged | reused
    changes: list[Change] = field(default_factory=list)
    current: dict[str, Any] | None = None  # the object as it was, for an update

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        meta = self.obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


@dataclass
class KueuePlan:
    quota: kueue.TeamQuota
    version: str
    flavors: list[kueue.Flavor]
    steps: list[Step]

    @property
    def changes_anything(self) -> bool:
        return any(s.action in ("create", "update") for s in self.steps)

    def objects(self) -> list[dict[str, Any]]:
        """What gpuctl creates or updates (existing objects it reuses are left out)."""
        return [s.obj for s in self.steps if s.action in ("create", "update")]


def plan_set(
    kube: Kube | None,
    q: kueue.TeamQuota,
    label_key: str,
    gpu_types: tuple[str, ...] = (),
    version: str | None = None,
) -> KueuePlan:
    """What `quota set` would do. Without a cluster (kube None) every object is new and
    the GPU types are the ones asked for."""
    version = version or apis.KUEUE_VERSIONS[0]
    nodes = kube.list_objects("Node") if kube else []
    flavors = kueue.flavors_for(nodes, label_key, gpu_types)
    steps: list[Step] = []
    if kube is None or not _exists(kube, "Namespace", q.team):
        steps.append(Step(core.namespace_object(q.team), "create"))
    existing_flavors = (
        kube.list_objects("ResourceFlavor", api_version=apis.kueue_api_version(version))
        if kube
        else []
    )
    used = []
    for f in flavors:
        reused = kueue.reuse_flavor(existing_flavors, f)
        theirs = _found(existing_flavors, reused) if reused is not None else None
        # one that selects the same nodes is used as it is, unless gpuctl made it
        if theirs is not None and (reused != f.name or not managed_by_gpuctl(theirs)):
            steps.append(Step(theirs, "reused"))
            used.append(kueue.Flavor(str(reused), f.gpu_type, label_key, f.cpu, f.memory))
            continue
        desired = f.object()
        desired["apiVersion"] = apis.kueue_api_version(version)
        steps.append(_step(desired, _found(existing_flavors, f.name), kueue.flavor_changes))
        used.append(f)
    desired_cq = kueue.cluster_queue(q, used, version)
    current_cq = _read(kube, "ClusterQueue", q.team, None, version) if kube else None
    steps.append(
        _step(
            desired_cq,
            current_cq,
            lambda cur, want: kueue.cluster_queue_changes(cur.get("spec") or {}, want["spec"]),
        )
    )
    desired_lq = kueue.local_queue(q.team, version)
    current_lq = _read(kube, "LocalQueue", q.team, q.team, version) if kube else None

    def lq_changes(cur: dict[str, Any], want: dict[str, Any]) -> list[Change]:
        now = (cur.get("spec") or {}).get("clusterQueue")
        return core.diff(
            {} if now is None else {"clusterQueue": str(now)},
            {"clusterQueue": want["spec"]["clusterQueue"]},
        )

    steps.append(_step(desired_lq, current_lq, lq_changes))
    return KueuePlan(q, version, used, steps)


def _exists(kube: Kube, kind: str, name: str) -> bool:
    try:
        kube.read(kind, name)
        return True
    except NotFound:
        return False


def _read(
    kube: Kube, kind: str, name: str, namespace: str | None, version: str
) -> dict[str, Any] | None:
    try:
        return kube.read(kind, name, namespace, api_version=apis.kueue_api_version(version))
    except NotFound:
        return None


def _found(objects: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((o for o in objects if (o.get("metadata") or {}).get("name") == name), None)


def _step(desired: dict[str, Any], current: dict[str, Any] | None, changes_of) -> Step:
    if current is None:
        return Step(desired, "create", changes_of({}, desired))
    step = Step(desired, "update", changes_of(current, desired), current)
    if not managed_by_gpuctl(current):
        raise GpuctlError(
            f"{step.kind} {step.name} exists and is not managed by gpuctl; leaving it alone",
            hint="delete or rename it, or manage that team's queues with kubectl",
        )
    if not step.changes:
        step.action = "unchanged"
    return step


def apply_set(kube: Kube, plan: KueuePlan) -> None:
    """Create or update every object of the plan, in order; on a failure or Ctrl-C, undo
    what this call did (delete what it created, restore what it updated) and re-raise."""
    done: list[Step] = []
    try:
        for step in plan.steps:
            if step.action not in ("create", "update"):
                continue
            try:
                _apply(kube, step)
            except NoAnswer:
                done.append(step)  # it may have been made: undo it too
                raise
            done.append(step)
    except GpuctlError as e:
        undone = _undo(kube, done)
        if done:
            e.message += "; " + (
                "the changes made before the failure were undone"
                if undone
                else "undoing the changes made before the failure failed too"
            )
        raise
    except KeyboardInterrupt:
        _undo(kube, done)
        raise


def _apply(kube: Kube, step: Step) -> None:
    if step.action == "create":
        kube.create(step.obj)
    else:
        patch = kueue.spec_patch(step.kind, step.current or {}, step.obj["spec"])
        kube.patch(*_where(step), patch, api_version=step.obj["apiVersion"])


def _where(step: Step) -> tuple[str, str, str | None]:
    meta = step.obj["metadata"]
    return step.kind, meta["name"], meta.get("namespace")


def _undo(kube: Kube, done: list[Step]) -> bool:
    ok = True
    for step in reversed(done):
        kind, name, namespace = _where(step)
        try:
            if step.action == "create":
                kube.delete(kind, name, namespace, api_version=step.obj.get("apiVersion"))
            else:
                now = {"spec": step.obj["spec"]}
                was = (step.current or {}).get("spec") or {}
                patch = kueue.spec_patch(step.kind, now, was, undo=True)
                kube.patch(kind, name, namespace, patch, api_version=step.obj["apiVersion"])
        except NotFound:
            pass
        except GpuctlError:
            ok = False
    return ok


# --- list and lint --------------------------------------------------------------------


def list_queues(kube: Kube, version: str) -> list[QueueRow]:
    return queue_rows(
        kube.list_objects("ClusterQueue", api_version=apis.kueue_api_version(version))
    )


def lint_queues(kube: Kube, version: str) -> tuple[list[CapacityRow], list[Finding]]:
    av = apis.kueue_api_version(version)
    return lint(
        kube.list_objects("ClusterQueue", api_version=av),
        kube.list_objects("ResourceFlavor", api_version=av),
        kube.list_objects("Node"),
    )
