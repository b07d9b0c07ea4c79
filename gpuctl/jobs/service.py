"""Submitting and managing gpuctl jobs on a cluster: core decisions applied through the
Kubernetes adapter. All-or-nothing creation lives here."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from gpuctl.adapters.kube import Conflict, Forbidden, Kube, NotFound
from gpuctl.adapters.kube_atomic import create_all
from gpuctl.common.errors import BackendError, GpuctlError
from gpuctl.jobs.core import status as job_status
from gpuctl.jobs.core.spec import JobSpec
from gpuctl.k8s import fit
from gpuctl.k8s.labels import GPU_TOLERATION, JOB_LABEL, MANAGED_SELECTOR

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # annotation, and label (1.28+)


def fit_report(kube: Kube, spec: JobSpec, label_key: str) -> fit.FitReport:
    resource = spec.gpu_resource
    if resource is None:
        return fit.check_fit([], [], None, 0, spec.nodes, (), label_key, [])
    nodes = kube.list_objects("Node")
    pods = kube.unfinished_pods()
    tolerations = [GPU_TOLERATION, *spec.tolerations]
    return fit.check_fit(
        nodes, pods, resource[0], resource[1], spec.nodes, spec.gpu_type, label_key, tolerations
    )


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


def create(kube: Kube, manifests: list[dict], namespace: str, dry_run: str | None = None) -> None:
    """Create every object or none (see adapters.kube_atomic); a server dry run only asks
    the API server to check each object."""
    objects = [{**o, "metadata": {**o["metadata"], "namespace": namespace}} for o in manifests]
    if dry_run == "server":
        for obj in objects:
            kube.create(obj, dry_run=True)
        return
    name = manifests[-1]["metadata"]["name"]

    def explain(error: GpuctlError, obj: dict) -> GpuctlError:
        if not isinstance(error, Conflict):
            return error
        kind, taken = obj["kind"], obj["metadata"]["name"]
        try:
            theirs = _managed([kube.read(kind, taken, namespace)])
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
        kube, objects, cleanup=f"gpuctl jobs delete {name} -n {namespace} --yes", explain=explain
    )


def _managed(items: list[dict]) -> list[dict]:
    # The server filters by label selector; check again so nothing else is ever touched.
    key, value = MANAGED_SELECTOR.split("=")
    return [o for o in items if ((o.get("metadata") or {}).get("labels") or {}).get(key) == value]


def list_jobs(kube: Kube, namespace: str | None) -> list[dict]:
    """gpuctl-managed Jobs, JobSets and bare Pods, as plain objects with their kind set."""
    jobs = kube.list_objects("Job", namespace, selector=MANAGED_SELECTOR)
    pods = kube.list_objects("Pod", namespace, selector=MANAGED_SELECTOR)
    out = [{**j, "kind": "Job"} for j in _managed(jobs)]
    try:
        jobsets = kube.list_objects("JobSet", namespace, selector=MANAGED_SELECTOR)
    except NotFound:  # the cluster has no JobSet
        jobsets = []
    out += [{**j, "kind": "JobSet"} for j in _managed(jobsets)]
    # a Job's own pods carry the job label too; only bare Pods are listed as jobs
    out += [
        {**p, "kind": "Pod"}
        for p in _managed(pods)
        if not any(
            ref.get("kind") == "Job"
            for ref in (p.get("metadata") or {}).get("ownerReferences") or []
        )
        and "job-name" not in ((p.get("metadata") or {}).get("labels") or {})
        and "batch.kubernetes.io/job-name" not in ((p.get("metadata") or {}).get("labels") or {})
    ]
    return out


def get_job(kube: Kube, name: str, namespace: str) -> dict:
    """The managed Job, JobSet or bare Pod called NAME."""
    for kind in ("Job", "JobSet", "Pod"):
        try:
            obj = kube.read(kind, name, namespace)
        except NotFound:
            continue
        if _managed([obj]):
            return {**obj, "kind": kind}
        raise GpuctlError(f"{kind} {namespace}/{name} is not managed by gpuctl; leaving it alone")
    raise NotFound(
        f"no gpuctl job {name!r} in namespace {namespace!r}",
        hint=f"gpuctl jobs list -n {namespace}",
    )


def job_objects(kube: Kube, name: str, namespace: str) -> list[dict]:
    """Every gpuctl-managed object of job NAME, in the order to delete them: its Job,
    JobSet or bare Pod, and its headless Service, also when one was left alone by an
    earlier failure. The pods of a Job go with the Job; a JobSet's Jobs, pods and Service
    with the JobSet."""
    selector = f"{MANAGED_SELECTOR},{JOB_LABEL}={name}"
    found = []
    for kind in ("Job", "JobSet", "Pod", "Service"):
        try:
            items = kube.list_objects(kind, namespace, selector=selector)
        except NotFound:  # no JobSet on this cluster
            continue
        for obj in _managed(items):
            meta = obj.get("metadata") or {}
            if (meta.get("labels") or {}).get(JOB_LABEL) != name:
                continue  # the server filters by label selector; check again
            if meta.get("namespace") not in (None, namespace):
                continue
            if kind == "Pod" and _owned_by_job(obj):
                continue
            found.append({**obj, "kind": kind})
    return found


def _owned_by_job(pod: dict) -> bool:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        any(ref.get("kind") == "Job" for ref in meta.get("ownerReferences") or [])
        or "job-name" in labels
        or "batch.kubernetes.io/job-name" in labels
    )


def delete_job(kube: Kube, name: str, namespace: str, objects: list[dict]) -> list[str]:
    """Delete `objects` (from job_objects); return what was deleted. A failure names what
    was deleted before it and what is left."""
    deleted: list[str] = []
    for i, obj in enumerate(objects):
        what = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            kube.delete(obj["kind"], obj["metadata"]["name"], namespace)
        except NotFound:
            pass
        except GpuctlError as e:
            left = [f"{o['kind']}/{o['metadata']['name']}" for o in objects[i:]]
            e.message += (
                f"; deleted {', '.join(deleted)}" if deleted else ""
            ) + f"; left in namespace {namespace}: {', '.join(left)}"
            e.hint = f"run it again: gpuctl jobs delete {name} -n {namespace}"
            raise
        deleted.append(what)
    return deleted


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
    """Follow the job's status until it finishes or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    current = get_job(kube, name, namespace)
    on_update(job_status.row(current))
    while job_status.status_of(current) not in job_status.FINISHED:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BackendError(
                f"gave up waiting after {timeout:g} s; {kind} {name} is "
                f"{job_status.status_of(current)} and keeps running"
            )
        for event in kube.watch(
            kind, namespace, name=name, timeout_seconds=max(1, int(min(remaining, 30)))
        ):
            obj = event["object"]
            if (obj.get("metadata") or {}).get("name") != name:
                continue  # the emulator ignores field selectors
            if event["type"] == "DELETED":
                raise BackendError(f"{kind} {namespace}/{name} was deleted while waiting")
            current = {**obj, "kind": kind}
            on_update(job_status.row(current))
            if job_status.status_of(current) in job_status.FINISHED:
                break
    return current


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
            f"pod {pods[0]['metadata']['name']} has not started after {start_timeout:g} s",
            hint=f"gpuctl jobs get {name} -n {namespace}",
        )
    pod_names = [p["metadata"]["name"] for p in pods]
    prefix = len(pod_names) > 1
    for pod in pod_names[:1] if follow else pod_names:
        for line in kube.pod_log_lines(pod, namespace, follow):
            yield f"[{pod}] {line}" if prefix else line


def _pods(kube: Kube, kind: str, name: str, namespace: str) -> list[dict]:
    if kind == "Pod":
        return [kube.read("Pod", name, namespace)]
    pods = kube.list_objects("Pod", namespace, selector=f"{JOB_LABEL}={name}")
    return sorted(
        (p for p in pods if (p["metadata"].get("labels") or {}).get(JOB_LABEL) == name),
        key=_worker_order,
    )


def _worker_order(pod: dict) -> tuple[int, str]:
    """Worker 0, 1, 2, … 10 (not 0, 1, 10, 2 as names sort)."""
    meta = pod["metadata"]
    index = (
        (meta.get("annotations") or {}).get(COMPLETION_INDEX)
        or (meta.get("labels") or {}).get(COMPLETION_INDEX)
        or ""
    )
    return (int(index) if index.isdigit() else 0, meta["name"])


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"
