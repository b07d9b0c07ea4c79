"""Kueue's controller, simulated for `gpuctl sandbox --kueue` (kubernetes-sigs/kueue v0.19,
whose CRDs the sandbox serves; objects read and written at kueue.x-k8s.io/v1beta2).

- A Job or JobSet labelled `kueue.x-k8s.io/queue-name` (created suspended, as gpuctl does)
  gets a Workload as Kueue's job framework writes it: named `KIND-NAME-HASH`
  (pkg/controller/jobframework/workload_names.go: the first 5 hex digits of the SHA-1 of
  kind, group, name and uid), owned by the job (controller, blockOwnerDeletion), labelled
  with its uid, one podSet per pod template (`main` for a Job; a JobSet's replicated Jobs
  by name) with its pod count, the queue name.
- Admission, oldest first (BestEffortFIFO; StrictFIFO stops a ClusterQueue at its first
  workload that does not fit): through its LocalQueue to the ClusterQueue, each podSet's
  requests in the first flavor of each resource group whose nodeLabels its pods may run on
  and whose nominal quota has room beside what admitted workloads use. Admitted: the
  QuotaReserved and Admitted conditions and status.admission (flavors, resource usage,
  counts); then the job is unsuspended with the flavor's nodeLabels in its pods'
  nodeSelector and its tolerations (what Kueue's job integrations do on start). Not
  admitted: QuotaReserved=False with Kueue's message ("couldn't assign flavors to pod set
  main: insufficient unused quota for nvidia.com/gpu in flavor h100, 4 more needed"), or
  reason Inadmissible when its LocalQueue or ClusterQueue does not exist.
- A Workload deactivated (spec.active: false) is evicted: its job suspended again (its pods
  go), Evicted=True (reason Deactivated), its quota released; reactivated, it queues
  again. A job unsuspended without admission is suspended again. A finished job's Workload
  is Finished (its quota released); one whose job is gone is deleted.
- ClusterQueue and LocalQueue status: pending, reserving and admitted workloads, flavor
  usage and reservation, Active.
- Topology-aware scheduling enough to keep a gang in one domain (gpuctl.sim.kueue_tas).
Not simulated: cohorts (borrowing, lending), preemption, fair sharing, priorities,
admission checks, partial admission, waitForPodsReady.
"""

from __future__ import annotations

import hashlib
from typing import Any

from gpuctl.k8s.selectors import pod_may_run_on
from gpuctl.sim import cluster, kueue_tas
from gpuctl.sim.controllers import (
    JOBS,
    JOBSETS,
    Api,
    World,
    condition,
    controller_of,
    finished,
    meta,
    owner_ref,
    path_of,
    with_condition,
)

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
API = f"{GROUP}/{VERSION}"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
NAME_PREFIX = 252 - 5  # workload_names.go: the name's most, less '-' and the hash


def workload_name(kind: str, group: str, name: str, uid: str) -> str:
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()
    return f"{kind.lower()}-{name}"[:NAME_PREFIX] + "-" + digest[:5]


def podsets(job: dict) -> list[dict]:
    spec = job.get("spec") or {}
    if job["kind"] == "Job":
        count = int(spec.get("parallelism") or 1)
        sets: list[dict[str, Any]] = [
            {"name": "main", "count": count, "template": spec.get("template") or {}}
        ]
    else:
        sets = []
        for rj in spec.get("replicatedJobs") or []:
            job_spec = (rj.get("template") or {}).get("spec") or {}
            count = int(rj.get("replicas") or 1) * int(job_spec.get("parallelism") or 1)
            template = job_spec.get("template") or {}
            sets.append({"name": rj["name"], "count": count, "template": template})
    for ps in sets:
        request = kueue_tas.topology_request(ps["template"])
        if request is not None:
            ps["topologyRequest"] = request
    return sets


def _text(resource: str, amount: int) -> str:
    """A quantity as Kubernetes writes it, from gpuctl.sim.cluster's units."""
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    for suffix, size in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if amount >= size and amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)


def _true(obj: dict, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


class Kueue:
    # what a tick reads, followed by the Simulation's informers (in World.others)
    watched = tuple(
        f"/apis/{API}/{plural}"
        for plural in ("workloads", "localqueues", "clusterqueues", "resourceflavors", "topologies")
    )

    def __init__(self, api: Api):
        self.api = api
        # what this tick read, for topology-aware admission
        self._topologies: dict[str, dict] = {}
        self._nodes: list[dict] = []
        self._free: dict[str, dict[str, int]] = {}

    def step(self, world: World) -> None:
        objects = {path.rsplit("/", 1)[1]: world.others[path] for path in self.watched}
        workloads = objects["workloads"]
        owners = {meta(o)["uid"]: o for o in world.jobs + world.jobsets}
        by_owner = {str((controller_of(w) or {}).get("uid")): w for w in workloads}
        for job in world.jobs + world.jobsets:
            queue = (meta(job).get("labels") or {}).get(QUEUE_LABEL)
            if queue and meta(job)["uid"] not in by_owner and controller_of(job) is None:
                self._create(job, queue)
        queues = {(meta(q)["namespace"], meta(q)["name"]): q for q in objects["localqueues"]}
        cqs = {meta(q)["name"]: q for q in objects["clusterqueues"]}
        flavors = {meta(f)["name"]: f for f in objects["resourceflavors"]}
        self._topologies = {meta(t)["name"]: t for t in objects["topologies"]}
        self._nodes = world.nodes
        self._free = kueue_tas.free_resources(world.nodes, world.pods)
        live = []
        for w in workloads:
            owner = owners.get(str((controller_of(w) or {}).get("uid")))
            if owner is None:
                self.api.delete(self._path(w))
            elif self._follow(w, owner):
                live.append((w, owner))
        usage = self._usage(w for w, _ in live)
        waiting = [(w, o) for w, o in live if not (w.get("status") or {}).get("admission")]
        waiting.sort(key=lambda wo: meta(wo[0]).get("creationTimestamp") or "")
        blocked: set[str] = set()
        for w, owner in waiting:
            if (w.get("spec") or {}).get("active") is False:
                continue
            self._admit(w, owner, queues, cqs, flavors, usage, blocked)
        self._queue_status(workloads, queues, cqs, usage)

    def _path(self, w: dict) -> str:
        return path_of(API, meta(w)["namespace"], "workloads", meta(w)["name"])

    def _create(self, job: dict, queue: str) -> None:
        m = meta(job)
        group = "batch" if job["kind"] == "Job" else "jobset.x-k8s.io"
        workload = {
            "apiVersion": API,
            "kind": "Workload",
            "metadata": {
                "name": workload_name(job["kind"], group, m["name"], m["uid"]),
                "namespace": m["namespace"],
                "labels": {JOB_UID_LABEL: m["uid"]},
                "ownerReferences": [owner_ref(job, JOBS if job["kind"] == "Job" else JOBSETS)],
            },
            "spec": {"queueName": queue, "podSets": podsets(job), "priority": 0, "active": True},
        }
        self.api.create(path_of(API, m["namespace"], "workloads"), workload)

    def _follow(self, w: dict, owner: dict) -> bool:
        """Keep the Workload and its job in step; whether it still competes for quota."""
        status = w.get("status") or {}
        conditions = status.get("conditions") or []
        if _true(w, "Finished"):
            return False
        state = finished(owner)
        if state:
            done = "Succeeded" if state == "Complete" else "Failed"
            said = "Job finished successfully" if done == "Succeeded" else "Job failed"
            conditions = with_condition(conditions, condition("Finished", done, said))
            self.api.patch(self._path(w) + "/status", {"status": {"conditions": conditions}})
            return False
        suspended = bool((owner.get("spec") or {}).get("suspend"))
        if status.get("admission") and (w.get("spec") or {}).get("active") is False:
            self._suspend(owner, True)
            said = "The workload is deactivated"
            conditions = with_condition(conditions, condition("Evicted", "Deactivated", said))
            conditions = with_condition(
                conditions, condition("QuotaReserved", "Pending", said, "False")
            )
            conditions = with_condition(
                conditions, condition("Admitted", "NoReservation", said, "False")
            )
            self.api.patch(
                self._path(w) + "/status", {"status": {"admission": None, "conditions": conditions}}
            )
            w["status"] = {"conditions": conditions}
        elif not status.get("admission") and not suspended:
            self._suspend(owner, True)  # Kueue stops what it did not admit
        return True

    def _suspend(
        self,
        owner: dict,
        suspend: bool,
        selector: dict | None = None,
        tolerations: list | None = None,
    ) -> None:
        m = meta(owner)
        if owner["kind"] == "Job":
            patch: dict = {"spec": {"suspend": suspend}}
            if selector is not None:
                pod = ((owner.get("spec") or {}).get("template") or {}).get("spec") or {}
                patch["spec"]["template"] = {"spec": _placed(pod, selector, tolerations)}
            self.api.patch(path_of(JOBS, m["namespace"], "jobs", m["name"]), patch)
            return
        spec = owner.get("spec") or {}
        patch = {"spec": {"suspend": suspend}}
        if selector is not None:
            jobs = []
            for rj in spec.get("replicatedJobs") or []:
                job = (rj.get("template") or {}).setdefault("spec", {})
                pod = job.setdefault("template", {}).setdefault("spec", {})
                pod |= _placed(pod, selector, tolerations)
                jobs.append(rj)
            patch["spec"]["replicatedJobs"] = jobs
        self.api.patch(path_of(JOBSETS, m["namespace"], "jobsets", m["name"]), patch)

    def _usage(self, workloads: Any) -> dict[str, dict[tuple[str, str], int]]:
        """Per ClusterQueue, the quota admitted workloads use: (flavor, resource) -> amount."""
        usage: dict[str, dict[tuple[str, str], int]] = {}
        for w in workloads:
            admission = (w.get("status") or {}).get("admission") or {}
            into = usage.setdefault(str(admission.get("clusterQueue")), {})
            for ps in admission.get("podSetAssignments") or []:
                for resource, flavor in (ps.get("flavors") or {}).items():
                    amount = cluster.amount((ps.get("resourceUsage") or {}).get(resource), resource)
                    into[flavor, resource] = into.get((flavor, resource), 0) + amount
        return usage

    def _admit(self, w, owner, queues, cqs, flavors, usage, blocked) -> None:
        spec, m = w.get("spec") or {}, meta(w)
        queue = queues.get((m["namespace"], spec.get("queueName")))
        cq_name = str(((queue or {}).get("spec") or {}).get("clusterQueue") or "")
        cq = cqs.get(cq_name)
        if cq_name in blocked:
            return
        if queue is None:
            why = ("Inadmissible", f"LocalQueue {spec.get('queueName')} doesn't exist")
        elif cq is None:
            why = ("Inadmissible", f"ClusterQueue {cq_name} doesn't exist")
        else:
            assigned = self._assign(w, cq, flavors, usage.setdefault(cq_name, {}))
            if not isinstance(assigned, str):
                self._admitted(w, owner, cq_name, *assigned, flavors, usage[cq_name])
                return
            why = ("Pending", assigned)
            if (cq.get("spec") or {}).get("queueingStrategy") == "StrictFIFO":
                blocked.add(cq_name)
        conditions = (w.get("status") or {}).get("conditions") or []
        new = with_condition(conditions, condition("QuotaReserved", why[0], why[1], "False"))
        if new is not conditions:
            self.api.patch(self._path(w) + "/status", {"status": {"conditions": new}})

    def _assign(
        self, w: dict, cq: dict, flavors: dict, used: dict
    ) -> tuple[list[dict], dict[str, str]] | str:
        """Each podSet's flavors, usage and topology assignment, with the node labels that
        pin its pods to their topology domain; or why one does not fit (Kueue's words)."""
        groups = (cq.get("spec") or {}).get("resourceGroups") or []
        taken: dict[tuple[str, str], int] = {}
        out = []
        placements: list[tuple[kueue_tas.Placement, dict]] = []
        for ps in (w.get("spec") or {}).get("podSets") or []:
            count = int(ps.get("count") or 1)
            asked = {
                r: n * count
                for r, n in cluster.requests(
                    {"spec": (ps.get("template") or {}).get("spec") or {}}
                ).items()
                if n
            }
            chosen: dict[str, str] = {}
            for resource in asked:
                group = next(
                    (g for g in groups if resource in (g.get("coveredResources") or [])), None
                )
                if group is None:
                    return f"couldn't assign flavors to pod set {ps['name']}: resource {resource} unavailable in ClusterQueue"
            for group in groups:
                mine = [r for r in asked if r in (group.get("coveredResources") or [])]
                if not mine:
                    continue
                lacks = []
                for fq in group.get("flavors") or []:
                    flavor = fq.get("name")
                    labels = ((flavors.get(flavor) or {}).get("spec") or {}).get("nodeLabels") or {}
                    node = {"metadata": {"labels": labels}}
                    pod_spec = (ps.get("template") or {}).get("spec") or {}
                    if labels and not pod_may_run_on(_only(pod_spec, labels), node):
                        lacks.append(f"flavor {flavor} doesn't match node affinity")
                        continue
                    group_flavors = [flavors.get(f.get("name")) or {} for f in group["flavors"]]
                    refusal = kueue_tas.flavor_refusal(
                        ps.get("topologyRequest"), flavors.get(flavor) or {}, group_flavors
                    )
                    if refusal is not None:
                        lacks.append(refusal)
                        continue
                    quota = {
                        r.get("name"): cluster.amount(r.get("nominalQuota"), r.get("name"))
                        for r in fq.get("resources") or []
                    }
                    short = [
                        (
                            r,
                            used.get((flavor, r), 0)
                            + taken.get((flavor, r), 0)
                            + asked[r]
                            - quota.get(r, 0),
                        )
                        for r in mine
                    ]
                    short = [(r, n) for r, n in short if n > 0]
                    if not short:
                        chosen |= dict.fromkeys(mine, flavor)
                        for r in mine:
                            taken[flavor, r] = taken.get((flavor, r), 0) + asked[r]
                        break
                    lacks += [
                        f"insufficient unused quota for {r} in flavor {flavor}, {_text(r, n)} more needed"
                        for r, n in short
                    ]
                else:
                    return f"couldn't assign flavors to pod set {ps['name']}: " + ", ".join(lacks)
            usage = {r: _text(r, n) for r, n in asked.items()}
            out.append(
                {"name": ps["name"], "flavors": chosen, "resourceUsage": usage, "count": count}
            )
            request, template = ps.get("topologyRequest"), ps.get("template") or {}
            if request is not None and chosen:
                flavor = flavors.get(chosen.get(cluster.GPU) or next(iter(chosen.values()))) or {}
                placed = kueue_tas.place(
                    request, count, template, flavor, self._topologies, self._nodes, self._free
                )
                if isinstance(placed, str):
                    return f"couldn't assign flavors to pod set {ps['name']}: {placed}"
                out[-1]["topologyAssignment"] = placed.assignment()
                placements.append((placed, template))
        pins: dict[str, str] = {}
        for placed, template in placements:
            kueue_tas.take(self._free, placed, template)
            pins |= {placed.key: placed.domain} if placed.domain is not None else {}
        return out, pins

    def _admitted(self, w, owner, cq_name, assigned, pins, flavors, used) -> None:
        conditions = (w.get("status") or {}).get("conditions") or []
        for kind in ("Evicted", "Requeued"):
            conditions = [c for c in conditions if c.get("type") != kind]
        conditions = with_condition(
            conditions,
            condition(
                "QuotaReserved", "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}"
            ),
        )
        conditions = with_condition(
            conditions, condition("Admitted", "Admitted", "The workload is admitted")
        )
        admission = {"clusterQueue": cq_name, "podSetAssignments": assigned}
        self.api.patch(
            self._path(w) + "/status",
            {"status": {"admission": admission, "conditions": conditions}},
        )
        w["status"] = {"admission": admission, "conditions": conditions}
        selector: dict = dict(pins)
        tolerations: list = []
        for ps in assigned:
            for flavor in set(ps["flavors"].values()):
                spec = (flavors.get(flavor) or {}).get("spec") or {}
                selector |= spec.get("nodeLabels") or {}
                tolerations += spec.get("tolerations") or []
            for r, text in ps["resourceUsage"].items():
                key = (ps["flavors"][r], r)
                used[key] = used.get(key, 0) + cluster.amount(text, r)
        self._suspend(owner, False, selector, tolerations)

    def _queue_status(self, workloads: list[dict], queues: dict, cqs: dict, usage: dict) -> None:
        counts: dict[tuple[str, str], dict[str, int]] = {}
        for w in workloads:
            m, status = meta(w), w.get("status") or {}
            queue = queues.get((m["namespace"], (w.get("spec") or {}).get("queueName")))
            if _true(w, "Finished") or queue is None:
                continue
            cq = str(((queue.get("spec") or {}).get("clusterQueue")) or "")
            state = "admittedWorkloads" if status.get("admission") else "pendingWorkloads"
            for key in (("cq", cq), ("lq", f"{m['namespace']}/{meta(queue)['name']}")):
                into = counts.setdefault(
                    key,
                    dict.fromkeys(
                        ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads"), 0
                    ),
                )
                into[state] += 1
                if state == "admittedWorkloads":
                    into["reservingWorkloads"] += 1
        active = condition("Active", "Ready", "Can admit new workloads")
        for name, cq in cqs.items():
            used = usage.get(name, {})
            flavors = [
                {
                    "name": fq.get("name"),
                    "resources": [
                        {
                            "name": r.get("name"),
                            "total": _text(
                                r.get("name"), used.get((fq.get("name"), r.get("name")), 0)
                            ),
                            "borrowed": "0",
                        }
                        for r in fq.get("resources") or []
                    ],
                }
                for g in (cq.get("spec") or {}).get("resourceGroups") or []
                for fq in g.get("flavors") or []
            ]
            status = {
                **counts.get(
                    ("cq", name),
                    dict.fromkeys(
                        ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads"), 0
                    ),
                ),
                "flavorsReservation": flavors,
                "flavorsUsage": flavors,
            }
            self._write(cq, path_of(API, None, "clusterqueues", name), status, active)
        for (ns, name), q in queues.items():
            status = counts.get(
                ("lq", f"{ns}/{name}"),
                dict.fromkeys(("pendingWorkloads", "reservingWorkloads", "admittedWorkloads"), 0),
            )
            self._write(q, path_of(API, ns, "localqueues", name), dict(status), active)

    def _write(self, obj: dict, path: str, status: dict, active: dict) -> None:
        old = obj.get("status") or {}
        conditions = with_condition(old.get("conditions") or [], active)
        if conditions is not (old.get("conditions") or []) or any(
            old.get(k) != v for k, v in status.items()
        ):
            self.api.patch(path + "/status", {"status": {**status, "conditions": conditions}})


def _placed(pod: dict, selector: dict, tolerations: list | None) -> dict:
    """The pod's nodeSelector and tolerations with a flavor's added, as Kueue starts a job."""
    known = pod.get("tolerations") or []
    more = [t for t in tolerations or [] if t not in known]
    return {
        "nodeSelector": {**(pod.get("nodeSelector") or {}), **selector},
        "tolerations": known + more,
    }


def _only(pod_spec: dict, labels: dict) -> dict:
    """The pod's node selection as Kueue checks a flavor: on the flavor's label keys only."""
    selector = {k: v for k, v in (pod_spec.get("nodeSelector") or {}).items() if k in labels}
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = []
    for term in affinity.get("nodeSelectorTerms") or []:
        exprs = [e for e in term.get("matchExpressions") or [] if e.get("key") in labels]
        terms.append({"matchExpressions": exprs})
    out: dict = {"nodeSelector": selector}
    if terms and all(t["matchExpressions"] for t in terms):
        out["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        }
    return out
