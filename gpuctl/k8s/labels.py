"""The labels and the toleration gpuctl puts on what it creates, and the labels it reads
on what others create. Pure."""

from __future__ import annotations

from typing import Any

from gpuctl.gpus.vendors import vendor_of
from gpuctl.k8s.objects import labels_of

MANAGED_BY = ("app.kubernetes.io/managed-by", "gpuctl")
MANAGED = dict([MANAGED_BY])  # the labels of an object gpuctl made
MANAGED_SELECTOR = "=".join(MANAGED_BY)
JOB_LABEL = "gpuctl.io/job"  # on every object and pod of a job: the job's name
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue's: the LocalQueue a job goes to
# GPU node groups are tainted so that only pods asking for GPUs land there.
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# The same for every vendor: its accelerator nodes tainted NoSchedule with its resource's name
# as the key, as GKE's TPU samples tolerate them (google.com/tpu: xpk, KubeRay's TPU
# examples) and EKS's Neuron node groups are tainted (aws.amazon.com/neuron: the
# aws-neuron-sdk EKS setup, Karpenter NodePools of data-on-eks). A worker tolerates its own
# vendor's taint only; tolerating a taint a node does not carry changes nothing.
ACCELERATOR_TAINTS = {
    "nvidia": "nvidia.com/gpu",
    "amd": "amd.com/gpu",
    "aws": "aws.amazon.com/neuron",
    "google": "google.com/tpu",
    "intel": "habana.ai/gaudi",
}


def accelerator_toleration(resource: str | None) -> dict[str, Any] | None:
    """The toleration a worker asking for RESOURCE gets; None for no accelerator."""
    vendor = vendor_of(resource) if resource else None
    return vendor_toleration(vendor.name) if vendor is not None else None


def vendor_toleration(vendor: str) -> dict[str, Any]:
    """The toleration of VENDOR's accelerator taint (a worker claiming them through DRA)."""
    return {"key": ACCELERATOR_TAINTS[vendor], "operator": "Exists", "effect": "NoSchedule"}


def managed_by_gpuctl(obj: dict[str, Any]) -> bool:
    return labels_of(obj).get(MANAGED_BY[0]) == MANAGED_BY[1]
