"""Gathering what `gpuctl jobs why` explains: the job, its Kueue Workload and LocalQueue,
its place in line from Kueue's visibility API, its pods, and the per-node fit."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuctl.adapters.kube import Forbidden, Kube, NotFound
from gpuctl.common.errors import GpuctlError
from gpuctl.jobs.core import topology, why
from gpuctl.jobs.core.status import pod_template, status_of
from gpuctl.jobs.service import get_job
from gpuctl.k8s import apis, claims, compute_domain, fit
from gpuctl.k8s.apis import kueue_api_version
from gpuctl.k8s.claim_fit import check_claim_fit
from gpuctl.k8s.labels import JOB_LABEL, QUEUE_LABEL
from gpuctl.k8s.objects import labels_of, name_of
from gpuctl.k8s.placement import Placement

VISIBILITY = "visibility.kueue.x-k8s.io"


@dataclass
class Diagnosis:
    job: str  # the job and its state, in words
    status: str
    queue: str | None = None
    cluster_queue: str | None = None
    workload: str | None = None
    kueue: list[str] = field(default_factory=list)  # what Kueue says, one line each
    position: str | None = None
    pods: list[str] = field(default_factory=list)
    fit: fit.FitReport | None = None
    make_room: str | None = None  # moves could make room: the command that plans them
    compute_domain: list[str] = field(default_factory=list)  # its ComputeDomains, in words

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "fit"}
        if self.make_room is None:
            del out["make_room"]
        if self.fit is not None:
            out["fit"] = {
                "resource": self.fit.resource,
                "per_worker": self.fit.per_worker,
                "workers": self.fit.workers,
                "fits_now": self.fit.fits_now,
                "can_ever_fit": self.fit.can_ever_fit,
                "nodes": [n.__dict__ for n in self.fit.nodes],
            }
            if self.fit.key is not None:
                out["fit"]["topology"] = {
                    "key": self.fit.key,
                    "domains": [dataclasses.asdict(d) for d in self.fit.domains],
                }
        return out


def diagnose(kube: Kube, name: str, namespace: str) -> Diagnosis:
    job = get_job(kube, name, namespace)
    state = status_of(job)
    d = Diagnosis(why.job_in_words(job), state)
    d.queue = labels_of(job).get(QUEUE_LABEL)
    version = _kueue(kube)
    if version is not None:
        _explain_kueue(kube, d, job, namespace, version)
    elif d.queue:
        d.kueue.append(
            f"it names LocalQueue {d.queue}, but the cluster has no Kueue: nothing will admit it"
        )
    if state in ("Running", "Succeeded", "Failed"):
        return d
    pods = _pods(kube, job, name, namespace)
    d.pods = why.pods_in_words(pods)
    domains = _domains(kube, job, namespace)
    channels = set(compute_domain.channel_templates(domains))
    d.compute_domain = [line for cd in domains for line in _domain_in_words(kube, cd, namespace)]
    d.fit = _fit(kube, job, namespace, channels)
    if d.fit is not None and _scattered(d.fit):
        d.make_room = (
            f"enough {d.fit.resource} are free, but scattered: gpuctl make-room {name} "
            f"-n {namespace} shows the fewest evictions that make room"
        )
    return d


def _domains(kube: Kube, job: dict, namespace: str) -> list[dict]:
    """The ComputeDomains whose channels (their ResourceClaimTemplates) the job's pods claim."""
    names = set(claims.template_names(pod_template(job)))
    if not names or not kube.serves(compute_domain.API_VERSION):
        return []
    try:
        domains = kube.list_objects("ComputeDomain", namespace)
    except (Forbidden, NotFound):
        return []
    return [cd for cd in domains if names & set(compute_domain.channel_templates([cd]))]


def _domain_in_words(kube: Kube, domain: dict, namespace: str) -> list[str]:
    (template,) = compute_domain.channel_templates([domain])
    api = f"{apis.DRA_GROUP}/{kube.dra_version() or apis.DRA_VERSIONS[0]}"
    try:
        kube.read("ResourceClaimTemplate", template, namespace, api_version=api)
        exists = True
    except NotFound:
        exists = False
    except Forbidden:
        exists = True  # RBAC hides it: say nothing of it
    return compute_domain.in_words(domain, exists)


def _fit(kube: Kube, job: dict, namespace: str, channels: set[str]) -> fit.FitReport | None:
    """The job's fit on the nodes: within one NVLink clique when its pods claim CHANNELS of
    a ComputeDomain, per domain when its topology is required (None: RBAC for one namespace
    only)."""
    where, workers, tolerations = why.fit_inputs(job)
    nodes = functools.cache(lambda: kube.list_objects("Node"))  # read once, when needed
    if where.resource is None:
        report = _claim_fit(kube, job, namespace, workers, tolerations, channels, nodes)
    else:
        try:
            report = fit.check_fit(nodes(), kube.unfinished_pods(), where, workers, tolerations)
        except Forbidden:
            return None
    if report is not None and channels:
        report = compute_domain.within_one_clique(report, nodes())
    c = topology.of_job(job)
    if report is None or c is None or not c.required or c.key is None:
        return report
    try:
        return fit.by_domain(report, nodes(), c.key, c.words())
    except Forbidden:
        return report


def _claim_fit(
    kube: Kube,
    job: dict,
    namespace: str,
    workers: int,
    tolerations: list[dict],
    channels: set[str],
    nodes: Callable[[], list[dict]],
) -> fit.FitReport | None:
    """The fit of a job whose pods claim their GPUs through DRA (None: they claim none, or
    RBAC hides what it needs); CHANNELS are claims of ComputeDomain channels, not GPUs."""
    names = [n for n in claims.template_names(pod_template(job)) if n not in channels]
    view = kube.dra() if names else None
    if view is None:
        return None
    try:
        api = f"{apis.DRA_GROUP}/{kube.dra_version()}"
        template = kube.read("ResourceClaimTemplate", names[0], namespace, api_version=api)
        claim = claims.from_template(template)
        if claim is None:
            return None
        where = Placement(None, claim.count, (), claim=claim)
        return check_claim_fit(nodes(), view, where, workers, tolerations)
    except (Forbidden, NotFound):
        return None


def _scattered(report: fit.FitReport) -> bool:
    """It waits for room, not for GPUs: the nodes it may use have enough free in total."""
    if report.fits_now or not report.can_ever_fit:
        return False
    need = report.workers * report.per_worker
    if report.key is not None:
        return any(d.slots_ever >= report.workers and d.free >= need for d in report.domains)
    free = sum(n.free for n in report.nodes if n.slots_ever > 0)
    return free >= need


def _kueue(kube: Kube) -> str | None:
    try:
        return kube.kueue_version()
    except Forbidden:
        return None


def _explain_kueue(kube: Kube, d: Diagnosis, job: dict, namespace: str, version: str) -> None:
    av = kueue_api_version(version)
    if d.queue:
        try:
            lq = kube.read("LocalQueue", d.queue, namespace, api_version=av)
            d.cluster_queue = (lq.get("spec") or {}).get("clusterQueue")
        except NotFound:
            d.kueue.append(
                f"LocalQueue {d.queue} does not exist in namespace {namespace}: Kueue leaves "
                "the job suspended until it does"
            )
        except Forbidden:
            pass
    try:
        workload = why.workload_of(job, kube.list_objects("Workload", namespace, api_version=av))
    except Forbidden as e:
        d.kueue.append(f"cannot read Kueue's Workloads: {e.message}")
        return
    if workload is None:
        if d.queue:
            d.kueue.append(
                "Kueue has made no Workload for it yet (is Kueue's integration for "
                f"{job.get('kind')} enabled in its configuration?)"
            )
        return
    d.workload = name_of(workload)
    d.kueue += why.workload_in_words(workload, d.cluster_queue)
    reserved = next(
        (
            c
            for c in (workload.get("status") or {}).get("conditions") or []
            if c.get("type") == "QuotaReserved"
        ),
        None,
    )
    if d.queue and d.workload and (reserved is None or reserved.get("status") != "True"):
        d.position = _position(kube, namespace, d.queue, d.workload, version)


def _position(kube: Kube, namespace: str, queue: str, workload: str, version: str) -> str:
    path = (
        f"/apis/{VISIBILITY}/{version}/namespaces/{namespace}/localqueues/{queue}/pendingworkloads"
    )
    try:
        summary = kube.get_path(path)
    except GpuctlError as e:
        return f"position: unknown (Kueue's visibility API did not answer: {e.message})"
    return why.position_in_words(summary or {}, workload) or (
        "position: not in the pending list of the visibility API (being admitted?)"
    )


def _pods(kube: Kube, job: dict, name: str, namespace: str) -> list[dict]:
    if job.get("kind") == "Pod":
        return [job]
    pods = kube.list_objects("Pod", namespace, selector=f"{JOB_LABEL}={name}")
    return [p for p in pods if labels_of(p).get(JOB_LABEL) == name]
