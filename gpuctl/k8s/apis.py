"""The API groups and versions of the custom resources gpuctl speaks: Kueue's,
JobSet's and KEDA's. Pure: which version to use is decided here from the versions a cluster serves
(the adapter's `Kube.api_versions(group)`)."""

from __future__ import annotations

from collections.abc import Iterable

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # what gpuctl speaks, preferred first
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_API_VERSION = f"{JOBSET_GROUP}/{JOBSET_VERSION}"
KEDA_GROUP = "keda.sh"
KEDA_VERSION = "v1alpha1"  # ScaledObject's only version
# served by prometheus-adapter or by KEDA's metrics server (one of them only)
EXTERNAL_METRICS_GROUP = "external.metrics.k8s.io"


def has_keda(served: Iterable[str]) -> bool:
    return KEDA_VERSION in set(served)


def kueue_api_version(version: str) -> str:
    return f"{KUEUE_GROUP}/{version}"


def kueue_version(served: Iterable[str]) -> str | None:
    """The Kueue API version gpuctl speaks with a cluster serving these versions of
    kueue.x-k8s.io; None without Kueue (or with none gpuctl speaks)."""
    have = set(served)
    return next((v for v in KUEUE_VERSIONS if v in have), None)


def has_jobset(served: Iterable[str]) -> bool:
    return JOBSET_VERSION in set(served)
