"""Managing the gpuctl jobs on a cluster: listing, reading, deleting, waiting for and
reading the logs of them (submitting them: gpuctl.jobs.submit)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from gpuctl.adapters.kube import Forbidden, Kube, NotFound
from gpuctl.common import selector as label_selector
from gpuctl.common.errors import BackendError, GpuctlError
from gpuctl.jobs.core import status as job_status
from gpuctl.k8s.labels import JOB_LABEL, MANAGED_SELECTOR, managed_by_gpuctl
from gpuctl.k8s.objects import annotations_of, labels_of, meta, name_of, namespace_of

if TYPE_CHECKING:  # deleting's modules wait until a job is deleted: a listing needs none
    from gpuctl.jobs.core import delete as deletion
    from gpuctl.runtime.workflow import Progress

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # annotation, and label (1.28+)
AUTOSCALERS = ("ScaledObject", "HorizontalPodAutoscaler")  # a service's, KEDA's or the HPA's


def managed(items: list[dict]) -> list[dict]:
    """The objects gpuctl manages. The server filters by label selector; check again so
    nothing else is ever touched."""
    return [o for o in items if managed_by_gpuctl(o)]


def job_rows(kube: Kube, namespace: str | None, selector: str | None = None) -> list[dict]:
    """The status row of every gpuctl job in NAMESPACE (None: all) whose labels match
    SELECTOR (kubectl's syntax; None: every one), by namespace and name."""
    rows = (job_status.row(o) for o in list_jobs(kube, namespace, selector))
    return sorted(rows, key=lambda r: (r["namespace"] or "", r["name"]))


JOB_KINDS = ("Job", "JobSet", "Deployment", "Pod")  # a service is its Deployment


def list_jobs(
    kube: Kube, namespace: str | None, selector: str | None = None, at_once: bool = False
) -> list[dict]:
    """gpuctl-managed Jobs, JobSets and bare Pods (and services: their Deployments) whose
    labels match SELECTOR, as plain objects with their kind set. AT_ONCE (shell completion)
    sends the four lists together, so a slow cluster costs the slowest answer, not the sum;
    a command lists them in turn, as Ctrl-C would otherwise wait for the threads."""
    wanted = label_selector.parse(selector) if selector else ()
    query = f"{MANAGED_SELECTOR},{selector}" if selector else MANAGED_SELECTOR

    def listed(kind: str) -> list[dict]:
        try:  # the server filters by the selector; matched again here, as managed() checks
            found = managed(kube.list_objects(kind, namespace, selector=query))
        except NotFound:  # the cluster has no JobSet
            return []
        return [{**o, "kind": kind} for o in found if label_selector.matches(wanted, labels_of(o))]

    if at_once:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(JOB_KINDS)) as pool:
            jobs, jobsets, services, pods = pool.map(listed, JOB_KINDS)
    else:
        jobs, jobsets, services, pods = map(listed, JOB_KINDS)
    # a Job's or a service's own pods carry the job label too; only bare Pods are jobs
    return jobs + jobsets + services + [p for p in pods if not _owned(p)]


def get_job(kube: Kube, name: str, namespace: str) -> dict:
    """The managed Job, JobSet, bare Pod or service (its Deployment) called NAME."""
    for kind in ("Job", "JobSet", "Pod", "Deployment"):
        try:
            obj = kube.read(kind, name, namespace)
        except NotFound:
            continue
        if managed([obj]):
            return {**obj, "kind": kind}
        raise GpuctlError(f"{kind} {namespace}/{name} is not managed by gpuctl; leaving it alone")
    raise NotFound(
        f"no gpuctl job {name!r} in namespace {namespace!r}",
        hint=f"gpuctl jobs list -n {namespace}",
    )


def job_objects(kube: Kube, name: str, namespace: str) -> list[dict]:
    """Every gpuctl-managed object of job NAME, in the order to delete them: its Job,
    JobSet or bare Pod, and its headless Service, also when one was left alone by an
    earlier failure; a service's autoscaler first (so that it scales nothing back up),
    then what the autoscaler logged in with, its Deployment and Service; a multi-node job's
    ComputeDomain last. The pods of a Job go with the Job; a JobSet's Jobs,
    pods and Service with the JobSet; a Deployment's ReplicaSets and pods with it."""
    selector = f"{MANAGED_SELECTOR},{JOB_LABEL}={name}"
    found = []
    kinds = (*AUTOSCALERS, "TriggerAuthentication", "Job", "JobSet", "Deployment", "Pod", "Service", "ComputeDomain")  # fmt: skip
    for kind in kinds:
        try:
            items = kube.list_objects(kind, namespace, selector=selector)
        except NotFound:  # no JobSet or KEDA on this cluster
            continue
        except Forbidden:  # a role that predates ComputeDomains: the job's own kinds stand
            if kind != "ComputeDomain":
                raise
            continue
        for obj in managed(items):
            if labels_of(obj).get(JOB_LABEL) != name:
                continue  # the server filters by label selector; check again
            if namespace_of(obj) not in ("", namespace):
                continue
            if kind == "Pod" and _owned(obj):
                continue
            found.append({**obj, "kind": kind})
    return found


def _owned(pod: dict) -> bool:
    """A pod of a Job's or of a service's (a ReplicaSet's): it goes with its owner."""
    labels = labels_of(pod)
    owners = meta(pod).get("ownerReferences") or []
    return (
        any(ref.get("kind") in ("Job", "ReplicaSet") for ref in owners)
        or "job-name" in labels
        or "batch.kubernetes.io/job-name" in labels
        or "pod-template-hash" in labels
    )


def plan_delete(kube: Kube, name: str, namespace: str) -> deletion.Deletion:
    """What deleting job NAME removes (see job_objects)."""
    from gpuctl.jobs.core import delete as deletion

    return deletion.plan_delete(name, namespace, find_job_objects(kube, name, namespace))


def delete(kube: Kube, plan: deletion.Deletion, progress: Progress | None = None) -> list[str]:
    """Delete the plan's objects in order (one already gone counts as deleted); return them.
    A failure names what was deleted before it and what is left."""
    from gpuctl.runtime.workflow import Action, execute

    def remove(kind: str, name: str) -> None:
        try:
            kube.delete(kind, name, plan.namespace)
        except NotFound:
            pass

    actions = [
        Action(step, functools.partial(remove, step.detail["kind"], step.detail["name"]))
        for step in plan.plan.steps
    ]
    execute(
        actions,
        progress=progress,
        forward_only=lambda done, left: plan.unfinished(
            [a.step.target for a in done], [a.step.target for a in left]
        ),
    )
    return plan.targets


def find_job_objects(kube: Kube, name: str, namespace: str) -> list[dict]:
    """job_objects, or the reason there are none: no such job, or an object of that name
    that gpuctl does not manage."""
    return job_objects(kube, name, namespace) or [get_job(kube, name, namespace)]


def wait(
    kube: Kube,
    kind: str,
    name: str,
    namespace: str,
    timeout: float,
    on_update: Callable[[dict], None],
) -> dict:
    """Follow the job's status until it finishes or `timeout` seconds pass, as an informer
    of it (Kube.informer): list it, then watch it from the list's resourceVersion, each
    watch resuming where the last one ended; listed again only when the server answers 410
    Gone."""
    deadline = time.monotonic() + timeout
    gone = BackendError(f"{kind} {namespace}/{name} was deleted while waiting")
    shown: list[dict] = []  # the job as last seen

    def show(change: str, obj: dict) -> None:
        if change == "DELETED":
            raise gone
        shown[:] = [{**obj, "kind": kind}]
        on_update(job_status.row(shown[-1]))

    def listed(found: list[dict]) -> None:
        if found:
            show("ADDED", found[0])
        elif shown:
            raise gone  # listed again after a 410
        else:
            raise NotFound(
                f"no gpuctl job {name!r} in namespace {namespace!r}",
                hint=f"gpuctl jobs list -n {namespace}",
            )

    def quiet() -> int:
        return max(1, int(min(deadline - time.monotonic(), 30)))

    job = kube.informer(kind, namespace, name, quiet, on_change=show, on_replace=listed)
    job.relist()
    while job_status.status_of(shown[-1]) not in job_status.FINISHED:
        if deadline - time.monotonic() <= 0:
            raise BackendError(
                f"gave up waiting after {timeout:g} s; {kind} {name} is "
                f"{job_status.status_of(shown[-1])} and keeps running"
            )
        job.follow(stop=lambda: job_status.status_of(shown[-1]) in job_status.FINISHED)
    return shown[-1]


def logs(
    kube: Kube, name: str, namespace: str, follow: bool, start_timeout: float = 0
) -> Iterator[str]:
    """Log lines of the job's pods (worker 0 first for a multi-node job). A job just created
    has no pod, or a Pending one, with no logs yet: wait up to `start_timeout` seconds for
    worker 0 to start."""
    kind = get_job(kube, name, namespace)["kind"]
    deadline = time.monotonic() + start_timeout
    pods = _pods(kube, kind, name, namespace)
    while (not pods or _phase(pods[0]) == "Pending") and time.monotonic() < deadline:
        time.sleep(min(2.0, max(deadline - time.monotonic(), 0)))
        pods = _pods(kube, kind, name, namespace)
    if not pods:
        raise GpuctlError(f"job {name} has no pods yet", hint="try again when it has started")
    if start_timeout and _phase(pods[0]) == "Pending":
        raise GpuctlError(
            f"pod {name_of(pods[0])} has not started after {start_timeout:g} s",
            hint=f"gpuctl jobs get {name} -n {namespace}",
        )
    pod_names = [name_of(p) for p in pods]
    prefix = len(pod_names) > 1
    for pod in pod_names[:1] if follow else pod_names:
        for line in kube.pod_log_lines(pod, namespace, follow):
            yield f"[{pod}] {line}" if prefix else line


def _pods(kube: Kube, kind: str, name: str, namespace: str) -> list[dict]:
    if kind == "Pod":
        return [kube.read("Pod", name, namespace)]
    pods = kube.list_objects("Pod", namespace, selector=f"{JOB_LABEL}={name}")
    return sorted(
        (p for p in pods if labels_of(p).get(JOB_LABEL) == name),
        key=_worker_order,
    )


def _worker_order(pod: dict) -> tuple[int, str]:
    """Worker 0, 1, 2, … 10 (not 0, 1, 10, 2 as names sort)."""
    index = annotations_of(pod).get(COMPLETION_INDEX) or labels_of(pod).get(COMPLETION_INDEX) or ""
    return (int(index) if index.isdigit() else 0, name_of(pod))


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"
