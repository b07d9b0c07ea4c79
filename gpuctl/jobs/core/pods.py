"""What every form of a job shares: the labels and metadata of its objects, its pod
template (container, GPU limits, volumes, affinity, tolerations) and the torchrun
environment of a multi-node job's workers. Pure."""

from __future__ import annotations

import copy
from typing import Any

from gpuctl.jobs.core import topology, volumes
from gpuctl.jobs.core.spec import JobSpec
from gpuctl.k8s import claims, compute_domain
from gpuctl.k8s.labels import (
    JOB_LABEL,
    MANAGED_BY,
    QUEUE_LABEL,
)
from gpuctl.k8s.placement import Placement

COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def labels_for(spec: JobSpec) -> dict[str, str]:
    return {MANAGED_BY[0]: MANAGED_BY[1], JOB_LABEL: spec.name, **dict(spec.labels)}


def template_metadata(spec: JobSpec) -> dict[str, Any]:
    """The metadata of a job's pod template: its labels, and Kueue's topology annotation."""
    meta: dict[str, Any] = {"labels": labels_for(spec)}
    if annotations := topology.template_annotations(spec.topology):
        meta["annotations"] = annotations
    return meta


def metadata(spec: JobSpec) -> dict[str, Any]:
    """The metadata of the job's top object (and its Service): with the queue label when
    Kueue is to admit it."""
    meta: dict[str, Any] = {"name": spec.name}
    if spec.namespace:
        meta["namespace"] = spec.namespace
    meta["labels"] = labels_for(spec)
    if spec.queue:
        meta["labels"][QUEUE_LABEL] = spec.queue
    return meta


def pod_spec(spec: JobSpec, where: Placement) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": spec.image}
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    env = [{"name": k, "value": v} for k, v in spec.env] + volumes.secret_env(spec.secrets)
    if env:
        container["env"] = env
    if spec.working_dir:
        container["workingDir"] = spec.working_dir

    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    resource = (where.resource, where.per_worker) if where.resource else None
    claimed = where.claim is not None and not where.claim.extended_resource
    if resource:
        limits[resource[0]] = str(resource[1])
    for key, value in (("cpu", spec.cpu), ("memory", spec.memory)):
        if value is not None:
            limits[key] = requests[key] = value
    limits.update(spec.extra_resources)
    if limits:
        container["resources"] = {"limits": limits, **({"requests": requests} if requests else {})}

    pod: dict[str, Any] = {"containers": [container]}
    if claimed:
        claims.pod_claims(pod, claims.template_name(spec.name))
    pod_volumes, mounts = volumes.pod_volumes(spec.volumes, spec.secrets)
    if spec.shm:
        shm = {"medium": "Memory", "sizeLimit": spec.shm}
        pod_volumes.insert(0, {"name": volumes.SHM_VOLUME, "emptyDir": shm})
        mounts.insert(0, {"name": volumes.SHM_VOLUME, "mountPath": volumes.SHM_PATH})
    if mounts:
        container["volumeMounts"] = mounts
        pod["volumes"] = pod_volumes
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    together = topology.pod_affinity(spec.topology, spec.name)
    if spec.compute_domain and spec.topology and spec.topology.key == compute_domain.CLIQUE_LABEL:
        together = None  # the ComputeDomain's own clique affinity (join) keeps them, required
    affinity = topology.with_pin(where.affinity, spec.topology)
    if affinity or together:
        pod["affinity"] = copy.deepcopy(
            {**(affinity or {}), **({"podAffinity": together} if together else {})}
        )
    if spec.compute_domain:  # adds to the affinity: a copy, not the placement's own
        compute_domain.join(pod, spec.name)
    own = where.toleration
    tolerations = ([own] if own else []) + [dict(t) for t in spec.tolerations]
    if tolerations:
        pod["tolerations"] = tolerations
    if spec.priority:
        pod["priorityClassName"] = spec.priority
    if spec.scheduler:
        pod["schedulerName"] = spec.scheduler
    if spec.service_account:
        pod["serviceAccountName"] = spec.service_account
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in spec.image_pull_secrets]
    return pod


def nproc_per_node(spec: JobSpec) -> int:
    if spec.nproc_per_node:
        return spec.nproc_per_node
    return spec.gpus if spec.gpus and not spec.shared else 1


def with_torchrun_env(pod: dict[str, Any], spec: JobSpec, master: str) -> None:
    """Put the torchrun environment first in the worker container's env; MASTER is the
    stable DNS name of worker 0."""
    container = pod["containers"][0]
    container["env"] = _torchrun_env(spec, master) + container.get("env", [])


def _torchrun_env(spec: JobSpec, master: str) -> list[dict[str, Any]]:
    """What a Kubeflow PyTorchJob gives each worker (training-operator v1.9 setPodEnv), with
    worker 0 (MASTER, its stable DNS name) as its master:
    - PET_*: torchrun reads PET_<OPTION> as the default of each option, so a bare
      `torchrun train.py` joins the others (static rendezvous at worker 0);
    - MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE: for one process per worker that calls
      init_process_group("env://") itself. WORLD_SIZE counts those processes, one per
      worker (as the operator's, whose default nprocPerNode is "auto"); under torchrun each
      process gets its own RANK and WORLD_SIZE (workers × nproc) from torchrun instead;
    - NNODES/NPROC_PER_NODE/NODE_RANK: gpuctl's names, for `torchrun --nnodes=$(NNODES)`."""
    nproc = str(nproc_per_node(spec))
    port = str(spec.master_port)
    index = {"valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}
    return [
        {"name": "PET_NNODES", "value": str(spec.nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": nproc},
        {"name": "PET_NODE_RANK", **index},
        {"name": "PET_MASTER_ADDR", "value": master},
        {"name": "PET_MASTER_PORT", "value": port},
        {"name": "MASTER_ADDR", "value": master},
        {"name": "MASTER_PORT", "value": port},
        {"name": "RANK", **index},
        {"name": "WORLD_SIZE", "value": str(spec.nodes)},
        {"name": "NNODES", "value": str(spec.nodes)},
        {"name": "NPROC_PER_NODE", "value": nproc},
        {"name": "NODE_RANK", **index},
    ]
