"""Team quotas as Kueue queues on a cluster: read what `quota set --engine kueue` plans
from, carry the plan out (all objects or none) and read it back, and gather what
`quota list` and `quota lint` show."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuctl.adapters import kube_atomic
from gpuctl.adapters.kube import Kube, NotFound
from gpuctl.common.errors import GpuctlError
from gpuctl.k8s import apis
from gpuctl.k8s.objects import name_of, namespace_of
from gpuctl.quota.core import kueue
from gpuctl.quota.core.plans import KueuePlan, KueueWorld, ObjectStep, object_changes, plan_kueue
from gpuctl.quota.core.plans import change_text as describe
from gpuctl.quota.core.queue_usage import CapacityRow, Finding, QueueRow, lint, queue_rows
from gpuctl.runtime.workflow import Action, Progress, execute


def plan_set(
    kube: Kube | None,
    q: kueue.TeamQuota,
    label_key: str,
    gpu_types: tuple[str, ...] = (),
    version: str | None = None,
) -> KueuePlan:
    """What `quota set` would do. Without a cluster (kube None) every object is new and
    the GPU types are the ones asked for; on one with DRA devices, the ClusterQueue also
    covers those Kueue charges through deviceClassMappings (kueue.dra_quota)."""
    world = KueueWorld()
    notes: tuple[str, ...] = ()
    if kube is not None:
        av = apis.kueue_api_version(version)
        nodes = kube.list_objects("Node")
        covered, left_out = kueue.dra_quota(kube.dra(), q.gpus, q.mig)
        q = replace(q, dra=covered)
        notes = kueue.dra_notes(covered, left_out)
        world = KueueWorld(
            nodes,
            _read(kube, "Namespace", q.team, None, None) is not None,
            kube.list_objects("ResourceFlavor", api_version=av),
            _read(kube, "ClusterQueue", q.team, None, av),
            _read(kube, "LocalQueue", q.team, q.team, av),
            *_topologies(kube, version),
        )
    plan = plan_kueue(q, label_key, gpu_types, version, world)
    return replace(plan, notes=plan.notes + notes)


def _topologies(kube: Kube, version: str | None) -> tuple[list[dict] | None, str | None]:
    """The cluster's Kueue Topologies (None: its Kueue serves none) and their apiVersion;
    without Kueue (a dry run), none yet at gpuctl's preferred version."""
    if version is None:
        return [], None
    av = apis.kueue_topology_api_version(kube.api_versions(apis.KUEUE_GROUP), version)
    try:
        return kube.list_objects("Topology", api_version=av), av
    except NotFound:
        return None, av


def _read(
    kube: Kube, kind: str, name: str, namespace: str | None, api_version: str | None
) -> dict[str, Any] | None:
    try:
        return kube.read(kind, name, namespace, api_version=api_version)
    except NotFound:
        return None


def apply_set(kube: Kube, plan: KueuePlan, progress: Progress | None = None) -> None:
    """Create or update every object of the plan, in order; on a failure or Ctrl-C, undo
    what this call did (delete what it created, restore what it updated) and raise; then
    read every object back."""
    token = kube_atomic.new_token()
    execute(
        [_action(kube, s, token) for s in plan.steps if s.changing],
        progress=progress,
        verify=lambda: _verify(kube, plan),
        undone_as="the changes made before the failure were undone",
        left_as="change(s) left in the cluster",
    )


def _action(kube: Kube, step: ObjectStep, token: str) -> Action:
    """A create is kube_atomic's (its rollback removes only what this attempt made); an
    update's undo puts the spec back as it was."""
    kind, name, namespace = _where(step)
    av = step.obj.get("apiVersion")
    if step.action == "create":
        return kube_atomic.create_action(kube, step.obj, token, step.step())

    def run() -> None:
        patch = kueue.spec_patch(step.kind, step.current or {}, step.obj["spec"])
        patch += _annotated(step, step.current or {}, step.obj)
        kube.patch(kind, name, namespace, patch, api_version=av)

    def undo() -> str | None:
        now = {"spec": step.obj["spec"]}
        was = (step.current or {}).get("spec") or {}
        after = kueue.annotated_as(step.current or {}, step.obj)
        back = _annotated(step, after, step.current or {})
        try:
            kube.patch(
                kind,
                name,
                namespace,
                kueue.spec_patch(step.kind, now, was, undo=True) + back,
                api_version=av,
            )
        except NotFound:
            return None
        except GpuctlError as e:
            return f"undoing it failed: {e.message}"
        return ""

    return Action(step.step(), run, undo, name=f"{kind}/{name}")


def _annotated(step: ObjectStep, current: dict, desired: dict) -> list[dict]:
    """For a ResourceFlavor, the patch of the annotation naming the nodes it leaves out."""
    if step.kind != "ResourceFlavor":
        return []
    return kueue.annotation_patch(current, desired)


def _where(step: ObjectStep) -> tuple[str, str, str | None]:
    return step.kind, name_of(step.obj), namespace_of(step.obj) or None


def _verify(kube: Kube, plan: KueuePlan) -> None:
    """Each object created or updated reads back with the fields gpuctl manages as planned."""
    wrong = []
    for step in plan.steps:
        if not step.changing:
            continue
        kind, name, namespace = _where(step)
        now = _read(kube, kind, name, namespace, step.obj.get("apiVersion"))
        if now is None:
            wrong.append(f"{kind} {step.name}: not found")
        else:
            wrong += [f"{kind} {step.name}: {describe(c)}" for c in object_changes(now, step.obj)]
    if wrong:
        raise GpuctlError(
            "the Kueue objects do not read back as planned (changed meanwhile?)", details=wrong
        )


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
        _topologies(kube, version)[0],
    )
