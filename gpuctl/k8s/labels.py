"""The labels and the toleration gpuctl puts on what it creates, and the labels it reads
on what others create. Pure."""

from __future__ import annotations

from typing import Any

from gpuctl.k8s.objects import labels_of

MANAGED_BY = ("app.kubernetes.io/managed-by", "gpuctl")
MANAGED = dict([MANAGED_BY])  # the labels of an object gpuctl made
MANAGED_SELECTOR = "=".join(MANAGED_BY)
JOB_LABEL = "gpuctl.io/job"  # on every object and pod of a job: the job's name
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue's: the LocalQueue a job goes to
# GPU node groups are tainted so that only pods asking for GPUs land there.
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def managed_by_gpuctl(obj: dict[str, Any]) -> bool:
    return labels_of(obj).get(MANAGED_BY[0]) == MANAGED_BY[1]
