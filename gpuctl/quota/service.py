"""Per-team GPU quotas on a cluster: the `quota set` workflow (read what the plan depends
on, plan it in gpuctl.quota.core.plans, carry it out and read it back). What `quota list`
reads is in gpuctl.quota.usage."""

from __future__ import annotations

from gpuctl.adapters.kube import Kube, NotFound
from gpuctl.adapters.kube_atomic import create_all
from gpuctl.common.errors import GpuctlError
from gpuctl.quota import queues
from gpuctl.quota.core import plans
from gpuctl.quota.core import rules as core
from gpuctl.quota.core.kueue import TeamQuota
from gpuctl.quota.core.plans import KueuePlan, QuotaPlan, SetPlan
from gpuctl.quota.usage import served_version
from gpuctl.runtime.workflow import Action, Progress, execute


def plan_set(
    kube: Kube | None,
    request: TeamQuota,
    engine: str | None,
    kueue_options: list[str],
    label_key: str,
    gpu_types: tuple[str, ...],
    dry_run: bool,
) -> SetPlan:
    """What `quota set` would do: the engine chosen (ENGINE, else what the cluster has;
    KUEUE_OPTIONS are the Kueue-only options given), then that engine's plan. Without a
    cluster (kube None) every object is new."""
    version = served_version(kube) if kube is not None else None
    chosen = plans.choose_engine(engine, kube is not None, version, kueue_options, dry_run)
    if chosen.name == plans.KUEUE:
        p: SetPlan = queues.plan_set(kube, request, label_key, gpu_types, chosen.version)
    else:
        p = _plan_resource_quota(kube, request.team, request.gpus, request.mig)
    return plans.with_notes(p, chosen.notes)


def _plan_resource_quota(kube: Kube | None, team: str, gpus: int, mig: dict[str, int]) -> QuotaPlan:
    if kube is None:
        return plans.plan_resource_quota(team, gpus, mig, False, None)
    classes = _dra_classes(kube)
    others = core.other_devices(kube.list_objects("Node"))
    try:
        kube.read("Namespace", team)
    except NotFound:
        return plans.plan_resource_quota(team, gpus, mig, False, None, classes, others)
    try:
        obj = kube.read("ResourceQuota", core.QUOTA_NAME, team)
    except NotFound:
        return plans.plan_resource_quota(team, gpus, mig, True, None, classes, others)
    hard = (obj.get("spec") or {}).get("hard") or {}
    return plans.plan_resource_quota(team, gpus, mig, True, hard, classes, others)


def _dra_classes(kube: Kube) -> tuple[str, ...]:
    """The DeviceClasses that select some of the cluster's DRA devices."""
    view = kube.dra()
    if view is None:
        return ()
    return tuple(sorted({c for d in view.devices if (c := view.class_of(d))}))


def apply_set(kube: Kube, plan: SetPlan, progress: Progress | None = None) -> None:
    """Carry a `quota set` plan out, all or nothing, and read the result back."""
    if isinstance(plan, KueuePlan):
        queues.apply_set(kube, plan, progress)
    elif plan.quota_action == "update":
        execute(
            [_replace_hard(kube, plan)],
            progress=progress,
            verify=lambda: _verify(kube, plan),
            undone_as="the hard limits were restored",
        )
    else:  # a new namespace and its quota are created together or not at all
        cleanup = (
            f"kubectl delete namespace {plan.team}"
            if plan.create_namespace
            else f"kubectl delete resourcequota {core.QUOTA_NAME} -n {plan.team}"
        )
        create_all(kube, plan.objects(), cleanup=cleanup, progress=progress)
        _verify(kube, plan)


def _replace_hard(kube: Kube, p: QuotaPlan) -> Action:
    """gpuctl owns this quota object: its hard limits are replaced as a whole, so a MIG
    profile left out of --mig is removed; undone, they are what they were."""

    def put(hard: dict[str, str]) -> None:
        patch = [{"op": "replace", "path": "/spec/hard", "value": hard}]
        kube.patch("ResourceQuota", core.QUOTA_NAME, p.team, patch)

    def undo() -> str | None:
        try:
            put(dict(p.current or {}))
        except GpuctlError as e:
            return f"restoring its hard limits failed: {e.message}"
        return ""

    return Action(p.plan.steps[-1], lambda: put(p.desired), undo)


def _verify(kube: Kube, p: QuotaPlan) -> None:
    hard = (kube.read("ResourceQuota", core.QUOTA_NAME, p.team).get("spec") or {}).get("hard")
    wrong = core.diff(hard or {}, p.desired)
    if wrong:
        raise GpuctlError(
            f"ResourceQuota {p.quota_name} does not read back as planned (changed meanwhile?)",
            details=[plans.change_text(c) for c in wrong],
        )
