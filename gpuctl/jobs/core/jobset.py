"""A multi-node job as a JobSet (kubernetes-sigs/jobset, `jobset.x-k8s.io/v1alpha2`). Pure.

One replicatedJob, `workers`: one Indexed Job of N pods, so worker i is the pod of
completion index i, as in an Indexed Job of gpuctl's own and in JobSet's PyTorch examples
(site/static/examples/pytorch/). What JobSet adds:
- stable DNS: JobSet makes a headless Service named after the JobSet and gives worker i
  the name `<jobset>-workers-0-<i>.<jobset>`; worker 0's is the torchrun master address;
- the whole group restarts when one worker fails: the Job has backoffLimit 0, so a failed
  pod fails it, and JobSet's failure policy recreates every Job, up to `retries` times
  (`failurePolicy.maxRestarts`), so no worker is left waiting for a peer that is gone;
- Kueue admits a JobSet as one Workload (one podSet of N pods), all of it or none.
A multislice TPU job (`tpu_slices: S`) is S replicas of that Job, one per slice, each on a
node pool of its own (JobSet's exclusive-topology annotation on cloud.google.com/gke-nodepool),
with the MEGASCALE_* environment instead of torchrun's.
"""

from __future__ import annotations

from typing import Any

from gpuctl.jobs.core import pods, topology
from gpuctl.jobs.core.spec import JOBSET_WORKERS, JobSpec
from gpuctl.k8s.apis import JOBSET_API_VERSION
from gpuctl.k8s.placement import Placement

# xpk's multislice JobSets (src/xpk/core/scheduling.py, core/docker_resources.py)
EXCLUSIVE_TOPOLOGY = topology.JOBSET_EXCLUSIVE
GKE_NODEPOOL = "cloud.google.com/gke-nodepool"
JOB_INDEX = "metadata.annotations['jobset.sigs.k8s.io/job-index']"


def master_address(name: str) -> str:
    """Worker 0's stable DNS name: `<jobset>-<replicatedJob>-<job index>-<pod index>.<subdomain>`
    (the subdomain defaults to the JobSet's name)."""
    return f"{name}-{JOBSET_WORKERS}-0-0.{name}"


def render(spec: JobSpec, where: Placement) -> dict[str, Any]:
    pod = pods.pod_spec(spec, where)
    pod["restartPolicy"] = "Never"  # a failed worker fails its Job, and so restarts the group
    slices = spec.accelerator.slices if spec.accelerator else 1
    if slices > 1:
        _with_megascale_env(pod, spec, slices)
    else:
        pods.with_torchrun_env(pod, spec, master=master_address(spec.name))
    job: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": spec.nodes // slices,
        "parallelism": spec.nodes // slices,
        "backoffLimit": 0,
        # the pods carry the job's labels (gpuctl jobs logs finds them); the Job does not,
        # so it is not listed as a gpuctl job of its own
        "template": {"metadata": pods.template_metadata(spec), "spec": pod},
    }
    if spec.deadline:
        job["activeDeadlineSeconds"] = spec.deadline
    jobset: dict[str, Any] = {
        "replicatedJobs": [{"name": JOBSET_WORKERS, "replicas": slices, "template": {"spec": job}}],
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "failurePolicy": {"maxRestarts": spec.retries},
    }
    if spec.ttl_after_finished:
        jobset["ttlSecondsAfterFinished"] = spec.ttl_after_finished
    if spec.queue:
        jobset["suspend"] = True
    meta = pods.metadata(spec)
    if slices > 1:  # each slice's Job on a node pool of its own (a multi-host slice is one)
        meta["annotations"] = {EXCLUSIVE_TOPOLOGY: GKE_NODEPOOL}
    elif annotations := topology.jobset_annotations(spec.topology):
        meta["annotations"] = annotations
    return {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": meta, "spec": jobset}


def _with_megascale_env(pod: dict[str, Any], spec: JobSpec, slices: int) -> None:
    """What a multislice TPU job's workers need to find each other across slices (xpk's
    JobSets: the coordinator is worker 0 of slice 0; a slice's id its Job's index)."""
    container = pod["containers"][0]
    index = {"valueFrom": {"fieldRef": {"fieldPath": JOB_INDEX}}}
    container["env"] = [
        {"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": master_address(spec.name)},
        {"name": "MEGASCALE_NUM_SLICES", "value": str(slices)},
        {"name": "MEGASCALE_SLICE_ID", **index},
    ] + container.get("env", [])
