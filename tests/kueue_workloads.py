"""Kueue's Workload for a job, as Kueue's controller would write it (kubernetes-sigs/kueue
v0.19.2: pkg/controller/jobframework/reconciler.go ConstructWorkload, workload_names.go;
pkg/controller/jobs/job and jobs/jobset PodSets; pkg/workload SetQuotaReservation).
Kueue cannot run here: the tests write these objects and statuses in the CRD's shape (the
API emulator checks them against gpuctl/sim/crds/kueue.x-k8s.io_workloads.yaml)."""

from __future__ import annotations

import hashlib

T0 = "2026-11-30T12:00:00Z"


def _pods_per_replica(job_spec: dict) -> int:
    # PodsCountPerReplica: min(parallelism (default 1), completions when set)
    parallelism = job_spec.get("parallelism", 1)
    completions = job_spec.get("completions")
    return min(parallelism, completions) if completions is not None else parallelism


def pod_sets(job: dict) -> list[dict]:
    """One podSet per replicatedJob of a JobSet (count: replicas × pods per replica), one
    named main for a batch Job."""
    if job["kind"] == "JobSet":
        return [
            {
                "name": rj["name"],
                "count": rj.get("replicas", 1) * _pods_per_replica(rj["template"]["spec"]),
                "template": rj["template"]["spec"]["template"],
            }
            for rj in job["spec"]["replicatedJobs"]
        ]
    return [
        {
            "name": "main",
            "count": _pods_per_replica(job["spec"]),
            "template": job["spec"]["template"],
        }
    ]


def workload_for(job: dict, uid: str | None = None) -> dict:
    """The Workload Kueue makes for JOB, owned by it through its uid (the one the API server
    gave it, when JOB was read back)."""
    kind, meta = job["kind"], job["metadata"]
    uid = uid or meta.get("uid") or "0b8e7c1e-5b5a-4f53-9f0e-1d2c3b4a5968"
    digest = hashlib.sha1(f"{meta['name']}{uid}{job['apiVersion']}{kind}".encode()).hexdigest()
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"{kind.lower()}-{meta['name']}-{digest[:5]}",
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": uid},
            "ownerReferences": [
                {
                    "apiVersion": job["apiVersion"],
                    "kind": kind,
                    "name": meta["name"],
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": meta["labels"]["kueue.x-k8s.io/queue-name"],
            "podSets": pod_sets(job),
        },
    }


def condition(type_: str, status: str, reason: str, message: str = "") -> dict:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": T0,
    }


def pending(message: str) -> dict:
    """The status of a workload that does not fit its ClusterQueue's free quota."""
    return {"conditions": [condition("QuotaReserved", "False", "Pending", message)]}


def admitted(workload: dict, cluster_queue: str, flavor: str, resource: str) -> dict:
    """Quota reserved and admitted: every podSet assigned FLAVOR for its GPU RESOURCE."""
    assignments = []
    for ps in workload["spec"]["podSets"]:
        limits = ps["template"]["spec"]["containers"][0]["resources"]["limits"]
        per_pod = int(limits[resource])
        assignments.append(
            {
                "name": ps["name"],
                "count": ps["count"],
                "flavors": {resource: flavor},
                "resourceUsage": {resource: str(per_pod * ps["count"])},
            }
        )
    return {
        "admission": {"clusterQueue": cluster_queue, "podSetAssignments": assignments},
        "conditions": [
            condition(
                "QuotaReserved",
                "True",
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {cluster_queue}",
            ),
            condition("Admitted", "True", "Admitted", "The workload is admitted"),
        ],
    }
