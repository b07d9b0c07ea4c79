"""Submitting a job: what the cluster says of it gathered into a plan (its multi-node form,
queue, fit, the volumes and secrets it needs, the quota), the plan's objects created all
together or not at all, and the job followed afterwards."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from gpuctl.adapters.kube import Conflict, Forbidden, Kube, NotFound
from gpuctl.adapters.kube_atomic import create_all
from gpuctl.common.errors import GpuctlError, Interrupted
from gpuctl.gpus.dra import DraView
from gpuctl.jobs import admission, service
from gpuctl.jobs.core import submit as core
from gpuctl.jobs.core import topology
from gpuctl.jobs.core.manifests import placement, render_placed
from gpuctl.jobs.core.spec import JobSpec
from gpuctl.jobs.core.status import status_of
from gpuctl.k8s import compute_domain, fit
from gpuctl.k8s.claim_fit import check_claim_fit
from gpuctl.k8s.objects import name_of
from gpuctl.k8s.placement import AUTO, Placement
from gpuctl.runtime.workflow import Progress


def plan(
    kube: Kube,
    spec: JobSpec,
    namespace: str | None,
    multinode: str | None,
    label_key: str,
    server_dry_run: bool = False,
    autoscaler: str | None = None,
    allocation: str = AUTO,
) -> core.SubmitPlan:
    """What submitting SPEC will create, in which namespace (NAMESPACE, else the spec's,
    else the connection's), and what was found on the way. Checking stops at the first
    reason not to send it (the plan's error). A service's autoscaler is AUTOSCALER, else
    the one the cluster has (admission.serving_target)."""
    ns = core.namespace_for(namespace, spec, kube.namespace)
    spec = admission.multinode(kube, spec, multinode)
    admission.compute_domain_served(kube, spec)
    spec, note = admission.queue(kube, spec, ns)
    nodes, skipped = _nodes(kube, spec)
    spec = admission.topology(kube, spec, nodes, ns)
    dra = kube.dra() if nodes is not None else None
    spec = admission.nvlink_domain(kube, spec, nodes, dra)
    where = placement(spec, label_key, nodes, dra, allocation)
    target = admission.serving_target(kube, spec, where, ns, autoscaler) if spec.serving else None
    objects = core.place(render_placed(spec, where, target), ns)
    draft = core.SubmitPlan(
        spec,
        ns,
        objects,
        where,
        server_dry_run,
        queue_note=note,
        fit_skipped=skipped,
        target=target,
    )
    read: dict[str, list[dict]] = {}  # the cluster's unfinished pods, once the fit read them
    for check in (
        partial(_fit, nodes=nodes, read=read, dra=dra),
        _references,
        partial(_quota, read=read),
    ):
        try:
            draft = check(kube, draft)
        except GpuctlError as e:
            draft = dataclasses.replace(draft, error=e)
        if draft.error:
            break
    return draft


def _nodes(kube: Kube, spec: JobSpec) -> tuple[list[dict] | None, str | None]:
    """The cluster's nodes, read once for the placement and the fit: (None, why) when RBAC
    hides them (the placement then follows the label scheme), (None, None) for a job
    without GPUs."""
    request = spec.gpu_request
    if not (request.gpus or request.mig or request.gpu_types):
        return None, None
    try:
        return kube.list_objects("Node"), None
    except Forbidden as e:  # RBAC for one namespace only: the scheduler still decides
        return None, e.message


def _fit(
    kube: Kube,
    draft: core.SubmitPlan,
    nodes: list[dict] | None,
    read: dict[str, list[dict]],
    dra: DraView | None,
) -> core.SubmitPlan:
    if draft.fit_skipped:
        return draft
    try:
        report = fit_report(kube, draft.spec, draft.placement, nodes, read, dra)
    except Forbidden as e:  # RBAC for one namespace only: the scheduler still decides
        return dataclasses.replace(draft, fit_skipped=e.message)
    return _pinned(core.with_fit(draft, report), report)


def _pinned(draft: core.SubmitPlan, report: fit.FitReport) -> core.SubmitPlan:
    """DRAFT with its pods pinned to one domain with room now, where only pod affinity
    would keep them together (gpuctl.jobs.core.topology.pin_to)."""
    c = draft.spec.topology
    value = topology.pin_to(c, report.domains, report.workers) if c and report.key else None
    if c is None or value is None:
        return draft
    spec = dataclasses.replace(draft.spec, topology=dataclasses.replace(c, pinned=value))
    objects = core.place(render_placed(spec, draft.placement, draft.target), draft.namespace)
    return dataclasses.replace(draft, spec=spec, objects=objects)


def _references(kube: Kube, draft: core.SubmitPlan) -> core.SubmitPlan:
    warnings = check_references(kube, draft.spec, draft.namespace)
    return dataclasses.replace(draft, warnings=tuple(warnings))


def _quota(kube: Kube, draft: core.SubmitPlan, read: dict[str, list[dict]]) -> core.SubmitPlan:
    admission.within_quota(kube, draft.spec, draft.placement, draft.namespace, read.get("pods"))
    return draft


def fit_report(
    kube: Kube,
    spec: JobSpec,
    where: Placement,
    nodes: list[dict] | None = None,
    read: dict[str, list[dict]] | None = None,
    dra: DraView | None = None,
) -> fit.FitReport:
    """The fit of SPEC's workers placed WHERE, on NODES (read here when not given), within
    one domain when its topology requires it; the cluster's unfinished pods it reads are
    left in READ["pods"]. Workers that claim their GPUs through DRA fit on DRA's devices."""
    own = where.toleration
    tolerations = [*([own] if own else []), *spec.tolerations]
    if spec.compute_domain:  # its workers stay within one NVLink clique
        nodes = kube.list_objects("Node") if nodes is None else nodes
        report = fit_report(
            kube, dataclasses.replace(spec, compute_domain=False), where, nodes, read, dra
        )
        return compute_domain.within_one_clique(report, nodes)
    if where.resource is None and (where.claim is None or dra is None):
        return fit.check_fit([], [], where, spec.nodes, [])
    nodes = kube.list_objects("Node") if nodes is None else nodes
    if where.claim is not None and dra is not None:
        report = check_claim_fit(nodes, dra, where, spec.nodes, tolerations, spec.node_selector)
    else:
        pods = kube.unfinished_pods()
        if read is not None:
            read["pods"] = pods
        report = fit.check_fit(
            nodes,
            pods,
            where,
            spec.nodes,
            tolerations,
            extra=spec.extra_resources,
            node_selector=spec.node_selector,
        )
    c = spec.topology
    if c is None or not c.required or c.key is None:
        return report
    return fit.by_domain(report, nodes, c.key, c.words())


def check_references(kube: Kube, spec: JobSpec, namespace: str) -> list[str]:
    """Every PersistentVolumeClaim, ConfigMap and Secret the job mounts or takes variables
    from exists in NAMESPACE and can serve it; otherwise raise, before anything is created
    (a pod would wait in ContainerCreating for it). Returns warnings: what RBAC does not let
    gpuctl read, and claims that may hold workers on other nodes."""
    wanted: list[tuple[str, str, str, tuple[str, ...]]] = []  # kind, name, where, keys
    for v in spec.volumes:
        if v.kind in ("pvc", "config_map"):
            kind = "PersistentVolumeClaim" if v.kind == "pvc" else "ConfigMap"
            wanted.append((kind, v.source or "", v.where, ()))
    for s in spec.secrets:
        wanted.append(("Secret", s.secret, s.where, tuple(key for _, key in s.env)))
    problems: list[str] = []
    warnings: list[str] = []
    read: dict[tuple[str, str], dict | None] = {}
    for kind, name, where, keys in wanted:
        subject = f"{kind} {namespace}/{name}"
        if (kind, name) not in read:
            try:
                read[(kind, name)] = kube.read(kind, name, namespace)
            except NotFound:
                read[(kind, name)] = None
            except Forbidden as e:
                warnings.append(f"cannot check {subject}: {e.message}")
                continue
        obj = read[(kind, name)]
        if obj is None:
            problems.append(f"{where}: {subject} does not exist")
            continue
        missing = [k for k in keys if k not in (obj.get("data") or {})]
        if missing:
            problems.append(f"{where}: {subject} has no key {', '.join(missing)}")
        if kind == "PersistentVolumeClaim":
            problem, warning = _claim_check(obj, spec.nodes)
            problems += [f"{where}: {subject} {problem}"] if problem else []
            warnings += [f"{where}: {subject} {warning}"] if warning else []
    if problems:
        more = problems[1:]
        raise GpuctlError(
            f"{problems[0]}; nothing was created",
            hint=("also: " + "; ".join(more)) if more else "create it first, or change the spec",
        )
    return warnings


def _claim_check(claim: dict, workers: int) -> tuple[str | None, str | None]:
    """(why the claim cannot serve the job, why it may hold some workers), None if neither."""
    modes = set((claim.get("spec") or {}).get("accessModes") or [])
    if (claim.get("status") or {}).get("phase") == "Lost":
        return "is Lost (its PersistentVolume is gone)", None
    if workers > 1 and modes == {"ReadWriteOncePod"}:
        return f"is ReadWriteOncePod: one pod only, and the job has {workers} workers", None
    if workers > 1 and modes == {"ReadWriteOnce"}:
        return None, (
            "is ReadWriteOnce: workers on other nodes than the first will wait in "
            "ContainerCreating (ReadOnlyMany or ReadWriteMany serve them all)"
        )
    return None, None


def create(kube: Kube, plan: core.SubmitPlan, progress: Progress | None = None) -> None:
    """Create the objects of the plan's steps, every one or none (see adapters.kube_atomic);
    a server dry run only asks the API server to check each object."""
    objects = [step.detail["object"] for step in plan.plan.steps]
    if plan.server_dry_run:
        for obj in objects:
            kube.create(obj, dry_run=True)
        return
    name, namespace = plan.spec.name, plan.namespace

    def explain(error: GpuctlError, obj: dict) -> GpuctlError:
        if not isinstance(error, Conflict):
            return error
        kind, taken = obj["kind"], name_of(obj)
        try:
            theirs = service.managed([kube.read(kind, taken, namespace)])
        except GpuctlError:
            theirs = []
        return GpuctlError(
            f"a {kind} named {taken!r} already exists in namespace {namespace!r}",
            hint=f"delete it first (gpuctl jobs delete {taken} -n {namespace}) or choose "
            "another name"
            if theirs
            else f"it is not gpuctl's: choose another name, or remove it "
            f"(kubectl delete {kind.lower()} {taken} -n {namespace})",
        )

    create_all(
        kube,
        objects,
        steps=plan.plan.steps,
        cleanup=f"gpuctl jobs delete {name} -n {namespace} --yes",
        explain=explain,
        progress=progress,
    )


@contextmanager
def watching(plan: core.SubmitPlan) -> Iterator[None]:
    """Around following a created job: Ctrl-C stops the watching, and the job keeps running."""
    try:
        yield
    except KeyboardInterrupt:
        name, ns = plan.spec.name, plan.namespace
        raise Interrupted(
            f"interrupted; {plan.kind} {ns}/{name} keeps running",
            hint=f"gpuctl jobs delete {name} -n {ns} stops it",
        ) from None


def follow(kube: Kube, plan: core.SubmitPlan, timeout: float) -> Iterator[str]:
    """The log lines of worker 0, once it has started (waiting up to TIMEOUT seconds)."""
    return service.logs(kube, plan.spec.name, plan.namespace, follow=True, start_timeout=timeout)


def wait(
    kube: Kube, plan: core.SubmitPlan, timeout: float, on_update: Callable[[dict], None]
) -> None:
    """Follow the job until it finishes (each status row to ON_UPDATE); raise unless it
    succeeded."""
    kind, name, ns = plan.kind, plan.spec.name, plan.namespace
    final = status_of(service.wait(kube, kind, name, ns, timeout, on_update))
    if final != "Succeeded":
        raise GpuctlError(
            f"{kind} {ns}/{name} {final.lower()}", hint=f"gpuctl jobs logs {name} -n {ns}"
        )
