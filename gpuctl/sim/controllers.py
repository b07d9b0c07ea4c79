"""The simulated control plane and kubelets of `gpuctl sandbox`, one step a tick, talking
to the API emulator over HTTP as controllers do. Each controller sets ownerReferences as
the real one does (kubernetes/kubernetes pkg/controller: metav1.NewControllerRef; JobSet's
ctrl.SetControllerReference): apiVersion, kind, name, uid, `controller: true`,
`blockOwnerDeletion: true`.

- Deployment controller: a ReplicaSet per pod template, named `DEPLOYMENT-HASH` and labelled
  `pod-template-hash` (a hash of the template, in apimachinery's safe alphabet); the older
  ones scaled to 0; replica counts in its status.
- ReplicaSet controller: pods `RS-xxxxx` up to spec.replicas, extra ones deleted.
- Job controller: a Job's pods (`JOB-xxxxx`, `JOB-INDEX-xxxxx` for an Indexed Job, with the
  labels batch.kubernetes.io/job-name, controller-uid and job-completion-index); a
  suspended Job's running pods are deleted; a pod deleted while it ran counts as failed (as
  with job tracking); status and conditions Complete, Failed (BackoffLimitExceeded,
  DeadlineExceeded), Suspended; finished Jobs deleted after ttlSecondsAfterFinished.
- JobSet controller: each replicated Job's Jobs `JOBSET-RJOB-INDEX`, suspended with the
  JobSet and resumed with the pod template's nodeSelector and tolerations it has then (what
  Kueue writes on admission); status per replicated Job; Completed / Failed / Suspended;
  exclusive placement (`alpha.jobset.sigs.k8s.io/exclusive-topology`) as required pod
  affinity of each Job's pods to each other on the key (no anti-affinity to other Jobs).
- garbage collector: what has a controller owner that is gone is deleted (background).
- scheduler: gpuctl.sim.cluster.place; a pod it cannot place gets PodScheduled=False. A
  pod with a claim from a ResourceClaimTemplate goes where gpuctl.sim.dra_driver can
  allocate it (else `cannot allocate all claims`); its claim is created allocated there and
  reserved for it, and deleted when the pod ends (the resource claim controller).
- kubelet: a placed pod gets devices of its node (GPUs or MIG slices, gpuctl.sim.mig_manager
  keeps the layouts), runs, and writes its containers' logs (served by the emulator's log
  endpoint); a pod of a Job (restartPolicy Never or OnFailure) ends after
  `gpuctl.io/sandbox-runtime` seconds (default 300), Succeeded, or Failed with
  `gpuctl.io/sandbox-outcome: fail`; a Deployment's pod runs until it is deleted.
Each `gpuctl.io/sandbox-*` setting is read from the pod's annotations (copied from its
Job's), else from its first container's environment as SANDBOX_RUNTIME, SANDBOX_OUTCOME and
SANDBOX_GPU_UTIL (a job spec's `env:`).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuctl.common import quantity
from gpuctl.gpus import dra
from gpuctl.gpus.dra import DraView
from gpuctl.k8s import claims
from gpuctl.k8s.claims import ClaimRequest
from gpuctl.k8s.informer import Expired, Informer
from gpuctl.k8s.times import seconds, timestamp
from gpuctl.sim import cluster, dra_driver
from gpuctl.sim.accelerators import Chips
from gpuctl.sim.mig_manager import MigManager, NodeGpus

RUNTIME = "gpuctl.io/sandbox-runtime"
OUTCOME = "gpuctl.io/sandbox-outcome"
GPU_UTIL = "gpuctl.io/sandbox-gpu-util"
DEFAULT_RUNTIME_S = 300
LOG_EVERY_S = 10.0
JOB_NAME = "batch.kubernetes.io/job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOB_KEY = "jobset.sigs.k8s.io/job-key"  # a child Job's key: the SHA-1 of namespace/name
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
HASH = "pod-template-hash"
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery util/rand: no vowels, no 0 1 3
JOBS, JOBSETS, PODS, APPS = "batch/v1", "jobset.x-k8s.io/v1alpha2", "v1", "apps/v1"
OWNERS = ("Deployment", "ReplicaSet", "JobSet", "Job")  # controllers the simulation runs
COLLECTED = {"Pod": (PODS, "pods"), "Job": (JOBS, "jobs"), "ReplicaSet": (APPS, "replicasets")}
# what a tick reads, in World's order, each kept by an informer (gpuctl.k8s.informer)
WATCHED = (
    "/api/v1/nodes",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/replicasets",
    "/apis/jobset.x-k8s.io/v1alpha2/jobsets",
    "/apis/batch/v1/jobs",
    "/api/v1/pods",
)
CLAIMS = f"/apis/{dra_driver.API_VERSION}/resourceclaims"  # followed too, in World.others
# A tick first catches up: a watch per kind from where it is, read up to its first BOOKMARK
# (sent after the events the server already held) or the watch's end. The sandbox's API
# server sends one every BOOKMARK_S; a real one every minute, and 2 s before a watch ends.
BOOKMARK_S = 0.02
CATCH_UP_S = 2


def now_text() -> str:
    return timestamp(time.time())


class Api:
    """JSON over HTTP to the emulator (as any client would)."""

    def __init__(self, url: str):
        self.url = url

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": ctype}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return dict(json.loads(r.read() or b"{}"))
        except urllib.error.HTTPError as e:
            if e.code in (404, 409):
                return {}
            raise

    def get(self, path: str) -> dict:
        return self._call("GET", path)

    def items(self, path: str) -> list[dict]:
        """The list's objects, each with its kind (a built-in list's items carry none)."""
        return self.listed(path)[0]

    def listed(self, path: str) -> tuple[list[dict], str]:
        """items(), and the list's resourceVersion: a watch from it sends what the list
        does not hold."""
        answer = self._call("GET", path)
        kind = str(answer.get("kind") or "").removesuffix("List")
        items = [{**item, "kind": kind} for item in answer.get("items") or []]
        return items, str((answer.get("metadata") or {}).get("resourceVersion") or "")

    def watch(self, path: str, version: str, timeout_s: int) -> Generator[dict, None, None]:
        """The events ({type, object}, BOOKMARKs too) after VERSION, until the server ends
        the watch after TIMEOUT_S; Expired when the server no longer keeps them (410)."""
        query = urllib.parse.urlencode(
            {
                "watch": "true",
                "resourceVersion": version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(timeout_s),
            }
        )
        try:
            r = urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=timeout_s + 10)
        except urllib.error.HTTPError as e:
            if e.code == 404:  # a kind not served (yet): nothing to follow
                return
            raise
        with r:
            for line in r:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    said = f"watching {path}: {status.get('message') or status}"
                    if status.get("code") == 410:
                        raise Expired(said)
                    raise OSError(said)
                yield event

    def create(self, path: str, obj: dict) -> dict:
        return self._call("POST", path, obj)

    def patch(self, path: str, patch: dict) -> None:
        self._call("PATCH", path, patch)

    def delete(self, path: str) -> None:
        self._call("DELETE", path)


class Logs(Protocol):
    """Where containers write (the emulator: gpuctl.sim.kube.KubeEmulator)."""

    def start_log(self, namespace: str, pod: str, container: str) -> None: ...
    def write_log(self, namespace: str, pod: str, container: str, text: str) -> None: ...
    def end_log(self, namespace: str, pod: str, container: str) -> None: ...


def meta(obj: dict) -> dict:
    return obj.setdefault("metadata", {})


def path_of(api_version: str, ns: str | None, plural: str, name: str = "") -> str:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    where = f"/namespaces/{ns}" if ns else ""
    return f"{base}{where}/{plural}" + (f"/{name}" if name else "")


def owner_ref(obj: dict, api_version: str) -> dict:
    m = meta(obj)
    return {
        "apiVersion": api_version,
        "kind": obj["kind"],
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(obj: dict) -> dict | None:
    refs = meta(obj).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


def suffix(n: int = 5) -> str:
    return "".join(random.choices(ALPHANUMS, k=n))


def template_hash(template: dict) -> str:
    """A pod template's hash as the Deployment controller spells it (FNV-1a 32 of the
    template, its decimal digits mapped to apimachinery's safe alphabet)."""
    h = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True).encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(ALPHANUMS[ord(c) % len(ALPHANUMS)] for c in str(h))


def condition(kind: str, reason: str, message: str, status: str = "True") -> dict:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_text(),
    }


def with_condition(conditions: list[dict], new: dict) -> list[dict]:
    """CONDITIONS with NEW in place of one of its type (kept as is when only the times
    would change)."""
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    if old is not None and all(old.get(k) == new[k] for k in ("status", "reason", "message")):
        return conditions
    return [c for c in conditions if c.get("type") != new["type"]] + [new]


def finished(obj: dict) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Completed", "Failed"):
            return "Failed" if c["type"] == "Failed" else "Complete"
    return None


def phase(pod: dict) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


@dataclass
class World:
    """What one tick read."""

    nodes: list[dict]
    deployments: list[dict]
    replicasets: list[dict]
    jobsets: list[dict]
    jobs: list[dict]
    pods: list[dict]
    others: dict[str, list[dict]] = field(default_factory=dict)  # path -> objects
    owned: dict[str, list[dict]] = field(default_factory=dict)  # controller uid -> objects

    def __post_init__(self) -> None:
        for obj in self.replicasets + self.jobs + self.pods:
            ref = controller_of(obj)
            if ref is not None:
                self.owned.setdefault(str(ref.get("uid")), []).append(obj)

    def of(self, owner: dict, kind: str) -> list[dict]:
        return [o for o in self.owned.get(meta(owner).get("uid") or "", []) if o["kind"] == kind]


@dataclass
class Running:
    """A pod the kubelet runs: since when, on which node, its devices."""

    started: float
    node: str
    devices: list[tuple[int, str | None, int]]  # (GPU, MIG profile, ordinal)
    logged: float = 0.0


class Simulation:
    """The simulated control plane and kubelets, one step a tick."""

    def __init__(
        self,
        api: Api,
        gpus: dict[str, NodeGpus],
        logs: Logs,
        kueue: Any = None,
        chips: dict[str, Chips] | None = None,
    ):
        """GPUS: the NVIDIA GPUs of each node that has them; CHIPS: other vendors'."""
        self.api, self.gpus, self.logs, self.kueue = api, gpus, logs, kueue
        self.chips = chips or {}
        self.mig = MigManager(api, gpus)
        self.running: dict[str, Running] = {}  # pod uid -> how it runs
        self.seen: dict[str, set[str]] = {}  # Job uid -> its pods seen unfinished
        self.lost: dict[str, int] = {}  # Job uid -> its pods deleted while they ran
        self.removed: set[str] = set()  # pods the controllers deleted themselves
        self._dra: DraView | None = None  # the cluster's DRA, read when a claim needs it
        others = (CLAIMS, *getattr(kueue, "watched", ()))
        self.informers = {path: self._informer(path) for path in WATCHED + others}

    def _informer(self, path: str) -> Informer:
        def caught_up(version: str) -> Iterator[dict]:
            events = self.api.watch(path, version, CATCH_UP_S)
            try:
                for event in events:
                    yield event
                    if event.get("type") == "BOOKMARK":
                        return
            finally:
                events.close()

        return Informer(lambda: self.api.listed(path), caught_up)

    def read(self) -> World:
        """The cluster as it is now: each kind listed once, then followed from the
        resourceVersion reached (listed again only after a 410 Gone)."""
        with ThreadPoolExecutor(len(self.informers)) as pool:
            list(pool.map(lambda informer: informer.follow(), self.informers.values()))
        objects = {path: informer.objects() for path, informer in self.informers.items()}
        nodes, deployments, replicasets, jobsets, jobs, pods = (objects.pop(p) for p in WATCHED)
        return World(nodes, deployments, replicasets, jobsets, jobs, pods, objects)

    def step(self) -> World:
        world = self.read()
        self._dra = None  # read again when a pod's claims are allocated this tick
        self._collect(world)
        if self.kueue is not None:
            self.kueue.step(world)
        for deployment in world.deployments:
            self._deployment(deployment, world)
        for rs in world.replicasets:
            self._replicaset(rs, world)
        for js in world.jobsets:
            self._jobset(js, world)
        for job in world.jobs:
            self._job(job, world)
        self.mig.step(world.nodes, self._held)
        self._pods(world)
        self._orphaned_claims(world)
        self._forget(world)
        return world

    def _write(self, obj: dict, api_version: str, plural: str, status: dict) -> None:
        """Patch the object's status where it changed."""
        old = obj.get("status") or {}
        if any(old.get(k) != v for k, v in status.items()):
            m = meta(obj)
            path = path_of(api_version, m.get("namespace"), plural, m["name"]) + "/status"
            self.api.patch(path, {"status": status})

    def _delete_pod(self, pod: dict) -> None:
        m = meta(pod)
        self.removed.add(m["uid"])
        self.api.delete(path_of(PODS, m["namespace"], "pods", m["name"]))

    # -- garbage collector -----------------------------------------------------------------

    def _collect(self, world: World) -> None:
        """The garbage collector: what lost its controller (of a kind simulated) goes."""
        alive = {
            meta(o).get("uid")
            for o in world.deployments + world.replicasets + world.jobsets + world.jobs
        }
        for owner, objects in list(world.owned.items()):
            if owner in alive:
                continue
            for obj in objects:
                if (controller_of(obj) or {}).get("kind") in OWNERS:
                    m = meta(obj)
                    version, plural = COLLECTED[obj["kind"]]
                    self.api.delete(path_of(version, m["namespace"], plural, m["name"]))
                    self.removed.add(m.get("uid") or "")
            del world.owned[owner]
        for kind in ("replicasets", "jobs", "pods"):
            kept = [o for o in getattr(world, kind) if meta(o).get("uid") not in self.removed]
            setattr(world, kind, kept)

    def _forget(self, world: World) -> None:
        """What no later tick needs: Jobs gone, pods deleted that no Job still counts."""
        jobs = {meta(j)["uid"] for j in world.jobs}
        for uid in [u for u in self.seen if u not in jobs]:
            self.seen.pop(uid)
            self.lost.pop(uid, None)
        self.removed &= set().union(*self.seen.values())

    # -- Deployment and ReplicaSet controllers -----------------------------------------------

    def _deployment(self, d: dict, world: World) -> None:
        m, spec = meta(d), d.get("spec") or {}
        template = spec.get("template") or {}
        wanted = int(spec.get("replicas", 1))
        hashed = template_hash(template)
        sets = world.of(d, "ReplicaSet")
        current = next(
            (rs for rs in sets if (meta(rs).get("labels") or {}).get(HASH) == hashed), None
        )
        if current is None:
            current = self._make_replicaset(d, template, hashed, wanted, len(sets) + 1)
        elif int((current.get("spec") or {}).get("replicas", 1)) != wanted:
            self.api.patch(
                path_of(APPS, m["namespace"], "replicasets", meta(current)["name"]),
                {"spec": {"replicas": wanted}},
            )
        for old in sets:
            if old is not current and int((old.get("spec") or {}).get("replicas", 1)):
                path = path_of(APPS, m["namespace"], "replicasets", meta(old)["name"])
                self.api.patch(path, {"spec": {"replicas": 0}})
        pods = [p for rs in sets for p in world.of(rs, "Pod") if phase(p) not in cluster.DONE]
        updated = [p for p in pods if (meta(p).get("labels") or {}).get(HASH) == hashed]
        ready = sum(1 for p in pods if phase(p) == "Running")
        available = "True" if ready >= wanted else "False"
        status = {
            "observedGeneration": m.get("generation", 1),
            "replicas": len(pods),
            "updatedReplicas": len(updated),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": max(wanted - ready, 0),
            "conditions": with_condition(
                (d.get("status") or {}).get("conditions") or [],
                condition(
                    "Available",
                    "MinimumReplicasAvailable"
                    if available == "True"
                    else "MinimumReplicasUnavailable",
                    "Deployment has minimum availability."
                    if available == "True"
                    else "Deployment does not have minimum availability.",
                    available,
                ),
            ),
        }
        self._write(d, APPS, "deployments", status)

    def _make_replicaset(
        self, d: dict, template: dict, hashed: str, replicas: int, rev: int
    ) -> dict:
        m, spec = meta(d), d.get("spec") or {}
        template = json.loads(json.dumps(template))
        labels = {**((template.get("metadata") or {}).get("labels") or {}), HASH: hashed}
        template.setdefault("metadata", {})["labels"] = labels
        selector = json.loads(json.dumps(spec.get("selector") or {}))
        selector.setdefault("matchLabels", {})[HASH] = hashed
        rs = {
            "apiVersion": APPS,
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{m['name']}-{hashed}",
                "namespace": m["namespace"],
                "labels": labels,
                "annotations": {
                    "deployment.kubernetes.io/revision": str(rev),
                    "deployment.kubernetes.io/desired-replicas": str(replicas),
                },
                "ownerReferences": [owner_ref(d, APPS)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": template},
        }
        made = self.api.create(path_of(APPS, m["namespace"], "replicasets"), rs)
        return made or rs

    def _replicaset(self, rs: dict, world: World) -> None:
        m, spec = meta(rs), rs.get("spec") or {}
        wanted = int(spec.get("replicas", 1))
        pods = [p for p in world.of(rs, "Pod") if phase(p) not in cluster.DONE]
        for _ in range(wanted - len(pods)):
            self._make_pod(rs, APPS, f"{m['name']}-{suffix()}", {}, {})
        extra = sorted(
            pods, key=lambda p: (phase(p) == "Running", meta(p).get("creationTimestamp") or "")
        )
        for pod in extra[: max(len(pods) - wanted, 0)]:
            self._delete_pod(pod)
        ready = sum(1 for p in pods if phase(p) == "Running")
        status = {
            "observedGeneration": m.get("generation", 1),
            "replicas": min(len(pods), max(wanted, len(pods))),
            "fullyLabeledReplicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
        }
        self._write(rs, APPS, "replicasets", status)

    # -- JobSet and Job controllers ------------------------------------------------------------

    def _jobset(self, js: dict, world: World) -> None:
        m, spec = meta(js), js.get("spec") or {}
        suspended = bool(spec.get("suspend"))
        mine = {meta(j)["name"]: j for j in world.of(js, "Job")}
        statuses, done, failed = [], True, False
        for rj in spec.get("replicatedJobs") or []:
            counts = dict.fromkeys(("ready", "succeeded", "failed", "active", "suspended"), 0)
            for i in range(int(rj.get("replicas") or 1)):
                job = mine.get(f"{m['name']}-{rj['name']}-{i}")
                if job is None:
                    if not finished(js):
                        self._make_job(js, rj, i, suspended)
                    done = False
                    continue
                self._follow_suspension(js, rj, job, suspended)
                state = finished(job)
                job_status, job_spec = job.get("status") or {}, job.get("spec") or {}
                if (job_spec.get("suspend") or suspended) and not state:
                    counts["suspended"] += 1
                else:
                    counts[
                        "succeeded" if state == "Complete" else "failed" if state else "active"
                    ] += 1
                done_or_ready = int(job_status.get("ready") or 0) + int(
                    job_status.get("succeeded") or 0
                )
                if not state and done_or_ready >= int(job_spec.get("parallelism") or 1):
                    counts["ready"] += 1
                done, failed = done and state == "Complete", failed or state == "Failed"
            statuses.append({"name": rj["name"], **counts})
        conditions = (js.get("status") or {}).get("conditions") or []
        status: dict = {"replicatedJobsStatus": statuses, "restarts": 0}
        if (done or failed) and not finished(js):
            kind = "Completed" if done else "Failed"
            reason = "AllJobsCompleted" if done else "FailedJobs"
            conditions = with_condition(
                conditions, condition(kind, reason, f"jobset {kind.lower()}")
            )
            status["terminalState"] = kind
        elif not finished(js):
            said = "JobSetSuspended" if suspended else "ResumeJobs"
            message = "jobset is suspended" if suspended else "jobset is resumed"
            conditions = with_condition(
                conditions, condition("Suspended", said, message, "True" if suspended else "False")
            )
        status["conditions"] = conditions
        self._write(js, JOBSETS, "jobsets", status)

    def _make_job(self, js: dict, rj: dict, index: int, suspended: bool) -> None:
        m = meta(js)
        template = json.loads(json.dumps(rj.get("template") or {}))
        labels = {
            **((template.get("metadata") or {}).get("labels") or {}),
            JOBSET_NAME: m["name"],
            "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
            "jobset.sigs.k8s.io/job-index": str(index),
        }
        spec = template.setdefault("spec", {})
        pod_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        pod_meta.setdefault("labels", {}).update(labels)
        exclusive = (m.get("annotations") or {}).get(EXCLUSIVE)
        if exclusive:
            _keep_together(spec["template"], f"{m['namespace']}/{m['name']}-{rj['name']}-{index}", exclusive)  # fmt: skip
        spec["suspend"] = suspended
        job = {
            "apiVersion": JOBS,
            "kind": "Job",
            "metadata": {
                "name": f"{m['name']}-{rj['name']}-{index}",
                "namespace": m["namespace"],
                "labels": labels,
                "annotations": (template.get("metadata") or {}).get("annotations") or {},
                "ownerReferences": [owner_ref(js, JOBSETS)],
            },
            "spec": spec,
        }
        self.api.create(path_of(JOBS, m["namespace"], "jobs"), job)

    def _follow_suspension(self, js: dict, rj: dict, job: dict, suspended: bool) -> None:
        """A child Job suspended and resumed with its JobSet; resumed, its pods get the
        nodeSelector and tolerations the JobSet's template has now (Kueue's admission)."""
        if finished(job) or bool((job.get("spec") or {}).get("suspend")) == suspended:
            return
        patch: dict = {"spec": {"suspend": suspended}}
        if not suspended:
            pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get(
                "spec"
            ) or {}
            patch["spec"]["template"] = {
                "spec": {k: pod[k] for k in ("nodeSelector", "tolerations") if k in pod}
            }
        m = meta(job)
        self.api.patch(path_of(JOBS, m["namespace"], "jobs", m["name"]), patch)

    def _job(self, job: dict, world: World) -> None:
        m, spec = meta(job), job.get("spec") or {}
        uid, old = m["uid"], job.get("status") or {}
        if finished(job):
            self._expire(job)
            return
        mine = world.of(job, "Pod")
        active = [p for p in mine if phase(p) not in cluster.DONE]
        conditions = old.get("conditions") or []
        if spec.get("suspend"):
            for pod in active:
                self._delete_pod(pod)
            self.seen[uid] = set()
            suspended = condition("Suspended", "JobSuspended", "Job suspended")
            now = {"active": 0, "ready": 0, "conditions": with_condition(conditions, suspended)}
            self._write(job, JOBS, "jobs", now)
            return
        if any(c.get("type") == "Suspended" and c.get("status") == "True" for c in conditions):
            resumed = condition("Suspended", "JobResumed", "Job resumed", "False")
            conditions = with_condition(conditions, resumed)
            old = {k: v for k, v in old.items() if k != "startTime"}
        uids = {meta(p)["uid"] for p in active}
        gone = self.seen.get(uid, set()) - uids - {meta(p)["uid"] for p in mine} - self.removed
        self.lost[uid] = self.lost.get(uid, 0) + len(gone)
        self.seen[uid] = uids
        phases = [phase(p) for p in mine]
        succeeded, failed = phases.count("Succeeded"), phases.count("Failed") + self.lost[uid]
        completions = int(spec.get("completions") or 1)
        backoff = int(spec.get("backoffLimit", 6))
        if len(active) + succeeded < completions and failed <= backoff:
            self._more_pods(job, mine, len(active), succeeded, completions)
        status: dict = {
            "active": len(active),
            "ready": phases.count("Running"),
            "succeeded": succeeded,
            "failed": failed,
            "startTime": old.get("startTime") or now_text(),
        }
        deadline = spec.get("activeDeadlineSeconds")
        started = seconds(status["startTime"])
        if succeeded >= completions:
            reached = "Reached expected completions"
            conditions = with_condition(
                conditions, condition("SuccessCriteriaMet", "CompletionsReached", reached)
            )
            conditions = with_condition(
                conditions, condition("Complete", "CompletionsReached", reached)
            )
            status["completionTime"] = now_text()
        elif failed > backoff:
            why = "Job has reached the specified backoff limit"
            conditions = with_condition(
                conditions, condition("Failed", "BackoffLimitExceeded", why)
            )
        elif deadline and started and time.time() - started > int(deadline):
            why = "Job was active longer than specified deadline"
            conditions = with_condition(conditions, condition("Failed", "DeadlineExceeded", why))
            for pod in active:
                self._end(pod, "Failed", "DeadlineExceeded")
        status["conditions"] = conditions
        self._write(job, JOBS, "jobs", status)

    def _more_pods(
        self, job: dict, mine: list[dict], active: int, succeeded: int, completions: int
    ) -> None:
        m, spec = meta(job), job.get("spec") or {}
        wanted = min(int(spec.get("parallelism") or 1), completions - succeeded) - active
        indexed = spec.get("completionMode") == "Indexed"
        taken = {
            (meta(p).get("annotations") or {}).get(INDEX) for p in mine if phase(p) != "Failed"
        }
        free = [i for i in range(completions) if str(i) not in taken]
        for k in range(max(wanted, 0)):
            if indexed and k >= len(free):
                break
            index = free[k] if indexed else None
            name = (
                f"{m['name']}-{index}-{suffix()}"
                if index is not None
                else f"{m['name']}-{suffix()}"
            )
            labels = {
                CONTROLLER_UID: m["uid"],
                "controller-uid": m["uid"],
                JOB_NAME: m["name"],
                "job-name": m["name"],
            }
            annotations = {
                key: value
                for key, value in (m.get("annotations") or {}).items()
                if key in (RUNTIME, OUTCOME, GPU_UTIL)
            }
            if index is not None:
                labels[INDEX] = annotations[INDEX] = str(index)
            self._make_pod(job, JOBS, name, labels, annotations, index)

    def _expire(self, job: dict) -> None:
        """The TTL-after-finished controller."""
        m, spec = meta(job), job.get("spec") or {}
        ttl, ended = (
            spec.get("ttlSecondsAfterFinished"),
            (job.get("status") or {}).get("completionTime"),
        )
        ended_at = seconds(ended) if ended else None
        if isinstance(ttl, int) and ended_at and time.time() - ended_at >= ttl:
            self.api.delete(path_of(JOBS, m["namespace"], "jobs", m["name"]))

    def _make_pod(
        self,
        owner: dict,
        api_version: str,
        name: str,
        labels: dict,
        annotations: dict,
        index: int | None = None,
    ) -> None:
        m = meta(owner)
        template = (owner.get("spec") or {}).get("template") or {}
        template = json.loads(json.dumps(template))
        pod_meta = template.setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
        pod_meta["annotations"] = {**annotations, **(pod_meta.get("annotations") or {})}
        pod_meta.update(
            name=name, namespace=m["namespace"], ownerReferences=[owner_ref(owner, api_version)]
        )
        if index is not None:
            template.setdefault("spec", {}).setdefault("hostname", f"{m['name']}-{index}")
        pod = {"apiVersion": PODS, "kind": "Pod", **template, "status": {"phase": "Pending"}}
        self.api.create(path_of(PODS, m["namespace"], "pods"), pod)

    # -- scheduler and kubelet -------------------------------------------------------------

    def _held(self, node: str) -> set[int]:
        return {gpu for r in self.running.values() if r.node == node for gpu, _, _ in r.devices}

    def _pods(self, world: World) -> None:
        present = {meta(p)["uid"] for p in world.pods}
        for uid in [u for u in self.running if u not in present]:
            del self.running[uid]
        placed = [p for p in world.pods if (p.get("spec") or {}).get("nodeName")]
        nodes = {meta(n)["name"]: n for n in world.nodes}
        for pod in sorted(world.pods, key=lambda p: meta(p).get("creationTimestamp") or ""):
            uid, now = meta(pod)["uid"], time.time()
            run = self.running.get(uid)
            if phase(pod) in cluster.DONE:
                self.running.pop(uid, None)
            elif not (pod.get("spec") or {}).get("nodeName"):
                self._schedule(pod, world.nodes, placed)
            elif run is None:
                self._run(pod, nodes.get(pod["spec"]["nodeName"]))
            elif _ends(pod) and now - run.started >= _runtime(pod):
                fail = _setting(pod, OUTCOME) == "fail"
                self._end(pod, "Failed" if fail else "Succeeded", "Error" if fail else "Completed")
            elif now - run.logged >= LOG_EVERY_S:
                run.logged = now
                self._say(pod, f"{now - run.started:.0f} s: GPU utilization {util(pod)} %")

    def _schedule(self, pod: dict, nodes: list[dict], placed: list[dict]) -> None:
        m = meta(pod)
        claim = self._claim_of(pod)
        extended = self._extended_of(pod) if claim is None else None
        claimable, backed, offers = None, frozenset[str](), set[str]()
        if claim is not None:
            claimable = _claimable(self._view(), claim[1], offers)
        elif extended is not None:  # KEP-5004: DRA gives it where no device plugin does
            resource, request = extended
            offers = {meta(n)["name"] for n in nodes if _advertises(n, resource)}
            claimable = _claimable(self._view(), request, offers)
            backed = frozenset((resource,))
        node, why = cluster.place(pod, nodes, placed, claimable, backed)
        path = path_of(PODS, m["namespace"], "pods", m["name"])
        if node is None:
            cond = condition("PodScheduled", "Unschedulable", why, status="False")
            old = [
                c
                for c in (pod.get("status") or {}).get("conditions") or []
                if c.get("type") == "PodScheduled"
            ]
            if not old or old[0].get("message") != why:
                self.api.patch(
                    path + "/status", {"status": {"phase": "Pending", "conditions": [cond]}}
                )
            return
        if claim is not None:
            self._allocate(pod, claim, node)
        elif extended is not None and node not in offers:
            self._allocate_extended(pod, extended, node)
        self.api.patch(path, {"spec": {"nodeName": node}})
        pod.setdefault("spec", {})["nodeName"] = node
        placed.append(pod)

    # -- DRA: kube-scheduler's dynamicresources plugin and the resource claim controller --

    def _view(self) -> DraView:
        if self._dra is None:
            base = f"/apis/{dra_driver.API_VERSION}"
            self._dra = dra.view(
                self.api.items(f"{base}/deviceclasses"),
                self.api.items(f"{base}/resourceslices"),
                self.api.items(f"{base}/resourceclaims"),
            )
        return self._dra

    def _claim_of(self, pod: dict) -> tuple[dict, ClaimRequest] | None:
        """The template of the pod's claim (its first ResourceClaimTemplate) and its request."""
        names = claims.template_names(pod.get("spec") or {})
        if not names:
            return None
        ns = meta(pod)["namespace"]
        template = self.api.get(
            path_of(dra_driver.API_VERSION, ns, "resourceclaimtemplates", names[0])
        )
        request = claims.from_template(template)
        return (template, request) if request is not None else None

    def _extended_of(self, pod: dict) -> tuple[str, ClaimRequest] | None:
        """A resource of the pod's limits that a DeviceClass maps, and the claim for it."""
        for resource, n in cluster.pod_devices(pod).items():
            request = dra_driver.extended_request(self._view(), resource, n)
            if request is not None:
                return resource, request
        return None

    def _allocate(self, pod: dict, claim: tuple[dict, ClaimRequest], node: str) -> None:
        """Make the pod's claim from its template, allocated on NODE and reserved for it."""
        m = meta(pod)
        template, request = claim
        name = f"{m['name']}-{claims.CLAIM}"
        spec = (template.get("spec") or {}).get("spec") or {}
        self._claimed(pod, name, {dra.POD_CLAIM_NAME: claims.CLAIM}, spec, request, node)
        statuses = [{"name": claims.CLAIM, "resourceClaimName": name}]
        self.api.patch(
            path_of(PODS, m["namespace"], "pods", m["name"]) + "/status",
            {"status": {"resourceClaimStatuses": statuses}},
        )

    def _allocate_extended(self, pod: dict, extended: tuple[str, ClaimRequest], node: str) -> None:
        """KEP-5004: the claim kube-scheduler makes for the pod's plain limit of a resource a
        DeviceClass maps (annotated, owned by the pod, one request per container and
        resource), and the pod's status naming it and which container has which request."""
        m = meta(pod)
        resource, request = extended
        choice = request.choices[0]
        name = f"{m['name']}-extended-resources-{suffix()}"
        spec = {"devices": {"requests": [{"name": choice.name, "exactly": choice.to_dict(request.count)}]}}  # fmt: skip
        self._claimed(pod, name, {dra.EXTENDED_CLAIM: "true"}, spec, request, node)
        container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name")
        mapping = {"containerName": container, "resourceName": resource, "requestName": choice.name}
        self.api.patch(
            path_of(PODS, m["namespace"], "pods", m["name"]) + "/status",
            {"status": {"extendedResourceClaimStatus": {"resourceClaimName": name, "requestMappings": [mapping]}}},
        )  # fmt: skip

    def _claimed(self, pod: dict, name: str, annotations: dict, spec: dict, request: ClaimRequest, node: str) -> None:  # fmt: skip
        """Create claim NAME of the pod, allocated on NODE and reserved for the pod."""
        m = meta(pod)
        results = dra_driver.allocate(self._view(), request, node) or []
        base = path_of(dra_driver.API_VERSION, m["namespace"], "resourceclaims")
        owner = {"apiVersion": PODS, "kind": "Pod", "name": m["name"], "uid": m.get("uid", ""), "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        self.api.create(base, {
            "apiVersion": dra_driver.API_VERSION, "kind": "ResourceClaim",
            "metadata": {"name": name, "annotations": annotations, "ownerReferences": [owner]},
            "spec": spec,
        })  # fmt: skip
        self.api.patch(f"{base}/{name}/status", {"status": {
            "allocation": {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": m["name"], "uid": m.get("uid", "")}],
        }})  # fmt: skip
        self._dra = None  # the devices it took are no longer free

    def _orphaned_claims(self, world: World) -> None:
        """Claims whose pod is gone (deleted, or collected with its owner) go too."""
        pods = {meta(p).get("uid") for p in world.pods if meta(p).get("uid") not in self.removed}
        for claim in world.others[CLAIMS]:
            owner = controller_of(claim)
            if owner and owner.get("kind") == "Pod" and owner.get("uid") not in pods:
                m = meta(claim)
                self.api.delete(
                    path_of(dra_driver.API_VERSION, m["namespace"], "resourceclaims", m["name"])
                )

    def _release(self, pod: dict) -> None:
        """A pod's claim made from a template, or for its extended resource, goes with it
        (the resource claim controller)."""
        m = meta(pod)
        names = [f"{m['name']}-{claims.CLAIM}"] if claims.template_names(pod.get("spec") or {}) else []  # fmt: skip
        extended = _extended_claim(pod)
        for name in names + ([extended] if extended else []):
            self.api.delete(path_of(dra_driver.API_VERSION, m["namespace"], "resourceclaims", name))

    def node_devices(self, node: str) -> list[cluster.Device] | None:
        """What the device plugins of NODE hand out; None: it has no accelerators."""
        hw, chips = self.gpus.get(node), self.chips.get(node)
        if hw is not None:
            return hw.devices()
        if chips is not None:
            return [cluster.Device(chips.resource, i, None) for i in range(chips.count)]
        return None

    def _devices(self, pod: dict, node: str) -> list[tuple[int, str | None, int]] | None:
        """The devices the device plugin gives the pod on NODE; None when too few are free."""
        present = self.node_devices(node)
        wanted = cluster.pod_devices(pod)
        if not wanted:
            return []
        if present is None:
            return None
        taken = {d for r in self.running.values() if r.node == node for d in r.devices}
        out = []
        for resource, count in wanted.items():
            free = [key for key, d in keyed(present) if d.resource == resource and key not in taken]
            if len(free) < count:
                return None
            out += free[:count]
        return out

    def _run(self, pod: dict, node: dict | None) -> None:
        m, name = meta(pod), pod["spec"]["nodeName"]
        devices = self._devices(pod, name) if node is not None else None
        if node is not None and _extended_claim(pod):
            devices = []  # the DRA driver gives them, through the claim
        if devices is None:  # kubelet admission: the devices are not there (any more)
            why = f"Allocate failed due to not enough devices on node {name}"
            self._end(pod, "Failed", "UnexpectedAdmissionError", why)
            return
        self.running[m["uid"]] = Running(time.time(), name, devices, time.time())
        containers = (pod.get("spec") or {}).get("containers") or []
        status = {
            "phase": "Running",
            "startTime": now_text(),
            "hostIP": _ip(name),
            "podIP": f"10.1.{zlib.crc32(name.encode()) % 250}.{zlib.crc32(m['name'].encode()) % 250 + 1}",
            "conditions": [
                condition("PodScheduled", "Scheduled", ""),
                condition("Initialized", "Initialized", ""),
                condition("ContainersReady", "ContainersReady", ""),
                condition("Ready", "Ready", ""),
            ],
            "containerStatuses": [
                _container(c, {"running": {"startedAt": now_text()}}, True) for c in containers
            ],
        }
        self.api.patch(
            path_of(PODS, m["namespace"], "pods", m["name"]) + "/status", {"status": status}
        )
        pod["status"] = status
        for c in containers:
            self.logs.start_log(m["namespace"], m["name"], c.get("name"))
        unit = self.chips[name].unit if name in self.chips else "GPU"
        held = ", ".join(f"{unit} {g}" + (f" MIG {p}" if p else "") for g, p, _ in devices)
        held = held or "no GPU"
        model = self.gpus[name].model.short_name if name in self.gpus else ""
        model = self.chips[name].model if name in self.chips else model
        command = " ".join((containers[0].get("command") or []) + (containers[0].get("args") or []))
        runs = f"runs {_runtime(pod):g} s" if _ends(pod) else "runs until deleted"
        self._say(
            pod,
            f"simulated container started on {name}: {held}" + (f" ({model})" if devices else ""),
        )
        self._say(
            pod, f"{command or '(image default command)'}: {runs}, GPU utilization {util(pod)} %"
        )

    def _say(self, pod: dict, text: str) -> None:
        m = meta(pod)
        for c in (pod.get("spec") or {}).get("containers") or []:
            self.logs.write_log(m["namespace"], m["name"], c.get("name"), f"[sandbox] {text}")

    def _end(self, pod: dict, to: str, reason: str, message: str = "") -> None:
        m = meta(pod)
        code = 0 if to == "Succeeded" else 1
        finished_at = now_text()
        ended = {"terminated": {"exitCode": code, "reason": reason, "finishedAt": finished_at}}
        status: dict = {
            "phase": to,
            "containerStatuses": [
                _container(c, ended, False) for c in (pod.get("spec") or {}).get("containers") or []
            ],
            "conditions": [condition("Ready", "PodCompleted", "", status="False")],
        }
        if reason in ("DeadlineExceeded", "UnexpectedAdmissionError"):
            status["reason"] = reason
            status["message"] = (
                message or "Pod was active on the node longer than the specified deadline"
            )
        self.api.patch(
            path_of(PODS, m["namespace"], "pods", m["name"]) + "/status", {"status": status}
        )
        self._say(pod, f"exited with code {code} ({reason})")
        for c in (pod.get("spec") or {}).get("containers") or []:
            self.logs.end_log(m["namespace"], m["name"], c.get("name"))
        self.running.pop(m["uid"], None)
        self._release(pod)

    def holders(self, node: str, pods: list[dict]) -> dict[tuple[int, str | None, int], dict]:
        """Which pod holds each device of NODE."""
        by_uid = {meta(p).get("uid"): p for p in pods}
        return {
            device: by_uid[uid]
            for uid, run in self.running.items()
            if run.node == node and uid in by_uid
            for device in run.devices
        }


def _keep_together(template: dict, job: str, key: str) -> None:
    """JobSet's exclusive placement, as its pod webhook gives a child Job's pods: the Job's
    key as a label, and required pod affinity on KEY to the pods with that label
    (kubernetes-sigs/jobset pkg/webhooks/pod_mutating_webhook.go; the anti-affinity that keeps
    other Jobs out of the domain is not simulated)."""
    job_key = hashlib.sha1(job.encode()).hexdigest()
    template.setdefault("metadata", {}).setdefault("labels", {})[JOB_KEY] = job_key
    term = {
        "labelSelector": {
            "matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [job_key]}]
        },
        "topologyKey": key,
    }
    affinity = (
        template.setdefault("spec", {}).setdefault("affinity", {}).setdefault("podAffinity", {})
    )
    affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)


def _claimable(view: DraView, request: ClaimRequest, offers: set[str]) -> Callable[[str], bool]:
    """Whether a node can give the pod REQUEST: its device plugin OFFERS it, or the claim
    can be allocated there."""
    return lambda name: name in offers or dra_driver.allocate(view, request, name) is not None


def _advertises(node: dict, resource: str) -> bool:
    """Whether NODE's device plugin advertises RESOURCE."""
    return (
        quantity.count(((node.get("status") or {}).get("allocatable") or {}).get(resource, 0)) > 0
    )


def _extended_claim(pod: dict) -> str | None:
    """The claim kube-scheduler made for the pod's extended resources (KEP-5004)."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    return status.get("resourceClaimName") or None


def keyed(
    devices: list[cluster.Device],
) -> list[tuple[tuple[int, str | None, int], cluster.Device]]:
    """Each device with a key that stays the same when other GPUs change: (GPU, profile,
    ordinal among that GPU's slices of the profile)."""
    seen: dict[tuple[int, str | None], int] = {}
    out = []
    for d in devices:
        n = seen.get((d.gpu, d.profile), 0)
        seen[d.gpu, d.profile] = n + 1
        out.append(((d.gpu, d.profile, n), d))
    return out


def _container(spec: dict, state: dict, ready: bool) -> dict:
    name, image = spec.get("name"), spec.get("image")
    return {
        "name": name,
        "ready": ready,
        "started": ready,
        "restartCount": 0,
        "image": image,
        "imageID": f"{image}@sha256:{zlib.crc32(str(image).encode()):08x}" + "0" * 56,
        "containerID": f"containerd://{zlib.crc32(f'{name}/{time.time()}'.encode()):08x}"
        + "0" * 56,
        "state": state,
    }


def _ip(node: str) -> str:
    return f"10.0.{zlib.crc32(node.encode()) % 250}.{zlib.crc32(node[::-1].encode()) % 250 + 1}"


def _ends(pod: dict) -> bool:
    return (pod.get("spec") or {}).get("restartPolicy") in ("Never", "OnFailure")


def _setting(pod: dict, annotation: str) -> str | None:
    """An annotation of the pod, else its first container's SANDBOX_* variable."""
    given = (meta(pod).get("annotations") or {}).get(annotation)
    if given is not None:
        return str(given)
    name = "SANDBOX_" + annotation.removeprefix("gpuctl.io/sandbox-").replace("-", "_").upper()
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    env = {e.get("name"): e.get("value") for e in containers[0].get("env") or []}
    return None if env.get(name) is None else str(env[name])


def util(pod: dict) -> int:
    """The GPU utilization the pod's devices show: SANDBOX_GPU_UTIL, else a busy figure."""
    given = _setting(pod, GPU_UTIL)
    if given is not None and given.isdigit():
        return min(int(given), 100)
    wobble = int(time.time() // 5 + zlib.crc32(meta(pod)["name"].encode())) % 17
    return 80 + wobble


def _runtime(pod: dict) -> float:
    text = _setting(pod, RUNTIME)
    try:
        value = max(float(text), 0.0) if text is not None else float("nan")
    except ValueError:
        value = float("nan")
    return DEFAULT_RUNTIME_S if value != value else value  # NaN: not given
