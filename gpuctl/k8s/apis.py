"""The API groups and versions gpuctl speaks where a cluster's release or add-ons decide them:
Kueue's, JobSet's and KEDA's custom resources, and DRA's resource.k8s.io. Pure: which version to use is decided here from the versions a cluster
serves (the adapter's `Kube.api_versions(group)`; `Kube.kueue_version()` asks it for Kueue's)."""

from __future__ import annotations

from collections.abc import Iterable

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # what gpuctl speaks, preferred first
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_API_VERSION = f"{JOBSET_GROUP}/{JOBSET_VERSION}"
KEDA_GROUP = "keda.sh"
KEDA_VERSION = "v1alpha1"  # ScaledObject's only version
KEDA_API_VERSION = f"{KEDA_GROUP}/{KEDA_VERSION}"
# Dynamic Resource Allocation (kubernetes/api resource/v1/types.go): v1 from Kubernetes 1.34;
# 1.32 and 1.33 serve v1beta2 and v1beta1, whose devices nest their fields under `basic:`
# in v1beta1 only
DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")  # what gpuctl speaks, preferred first
# NVIDIA's DRA driver's ComputeDomain (multi-node NVLink; gpuctl.k8s.compute_domain)
COMPUTE_DOMAIN_API_VERSION = "resource.nvidia.com/v1beta1"
# served by prometheus-adapter or by KEDA's metrics server (one of them only)
EXTERNAL_METRICS_GROUP = "external.metrics.k8s.io"


def kueue_api_version(version: str | None) -> str:
    """kueue.x-k8s.io/VERSION; VERSION None: the version gpuctl prefers."""
    return f"{KUEUE_GROUP}/{version or KUEUE_VERSIONS[0]}"


def kueue_topology_api_version(served: Iterable[str], kueue_version: str) -> str:
    """The apiVersion of Kueue's Topology on a cluster serving these versions of
    kueue.x-k8s.io, where gpuctl speaks KUEUE_VERSION for the other kinds: Kueue 0.9 to 0.13
    serve Topology as v1alpha1 (the same levels), 0.14 as v1beta1; before 0.9 there is none."""
    if kueue_version == "v1beta1" and "v1alpha1" in set(served):
        return f"{KUEUE_GROUP}/v1alpha1"
    return f"{KUEUE_GROUP}/{kueue_version}"


def kueue_version(served: Iterable[str]) -> str | None:
    """The Kueue API version gpuctl speaks with a cluster serving these versions of
    kueue.x-k8s.io; None without Kueue (or with none gpuctl speaks)."""
    have = set(served)
    return next((v for v in KUEUE_VERSIONS if v in have), None)


def dra_version(served: Iterable[str]) -> str | None:
    """The resource.k8s.io version gpuctl reads from a cluster serving these versions of it;
    None without DRA."""
    have = set(served)
    return next((v for v in DRA_VERSIONS if v in have), None)
