"""Who holds a DRA-allocated GPU, in the cluster view (`top --prometheus`) and `advise`:
dcgm-exporter names a DRA-allocated GPU's pod only when it runs with --kubernetes-enable-dra,
off by default (NVIDIA/dcgm-exporter @ d5e5f51, pkg/cmd/app.go and internal/pkg/
transformation/kubernetes.go), so by default its series carry the device's UUID and no pod.
gpuctl joins them by UUID to the pod the device's ResourceClaim is reserved for (real slices:
tests/data/dra; the claim through the API emulator), the join reclaim uses (Exporter.claimed);
with the flag on, the pod the series names stands."""

from __future__ import annotations

import json

import pytest

from tests.cluster_data import gpu
from tests.gpu_cluster import node, seed
from tests.gpus.test_dra import AKS, CLASSES, SLICES, T4, allocated, as_v1
from tests.gpus.test_dra_mig_holders import AKS_GPU, mig
from tests.reclaim.test_dra_holders import UUIDS

pytestmark = pytest.mark.integration


def claimed_by(pod: str) -> dict:
    claim = allocated("ml", "train", ("gpu.nvidia.com", T4, "gpu-0"))
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": pod, "uid": "u"}]
    return claim


def t4(index: int, util: float, **holder) -> list:
    """dcgm-exporter's default series of one of the node's T4s, by its real UUID."""
    return gpu("Hostname", T4, index, util, model="Tesla T4", extra={"UUID": UUIDS[index]}, **holder)  # fmt: skip


@pytest.fixture
def dra_cluster(kube, kube_api):
    seed(kube_api, node(T4, 0, gfd=False), *CLASSES, *map(as_v1, SLICES), claimed_by("train-0"))
    return kube


def top(cli, url: str) -> dict:
    r = cli("top", "--prometheus", url, "--once", "-o", "json")
    assert r.code == 0, r
    return {g["uuid"]: g for g in json.loads(r.out)["gpus"]}


def test_the_cluster_view_names_the_claim_s_pod(cli, dra_cluster, prometheus_with):
    prom = prometheus_with(t4(0, 0) + t4(1, 0))
    gpus = top(cli, prom.url)
    held, free = gpus[UUIDS[0]], gpus[UUIDS[1]]
    assert (held["namespace"], held["pod"]) == ("ml", "train-0")
    assert held["idle"] is True  # held and idle: the waste the view is for
    assert (free["namespace"], free["pod"]) == (None, None)


def test_without_a_cluster_the_series_alone_decide(cli, prometheus_with):
    prom = prometheus_with(t4(0, 0))
    assert top(cli, prom.url)[UUIDS[0]]["pod"] is None  # KUBECONFIG names no file: no claims


def test_a_pod_the_series_names_stands(cli, dra_cluster, prometheus_with):
    prom = prometheus_with(t4(0, 50, pod="other-0", namespace="team-b"))
    assert top(cli, prom.url)[UUIDS[0]]["pod"] == "other-0"


def test_advise_judges_the_claim_s_pod(cli, dra_cluster, prometheus_with):
    prom = prometheus_with(t4(0, 0) + t4(1, 0))
    r = cli("advise", "--prometheus", prom.url, "--window", "20m", "-o", "json")
    assert r.code == 0, r
    (row,) = json.loads(r.out)["workloads"]
    # the pod's workload as advise names it without kube-state-metrics' owner series
    assert (row["namespace"], row["name"], row["gpus_held"], row["advice"]) == ("ml", "train", 1, "release")  # fmt: skip


def aks_mig(instance: int, util: float) -> list:
    """dcgm-exporter's default series of a 1g.10gb GPU instance of the AKS A100: the
    parent's UUID, the profile and the instance id; no pod without --kubernetes-enable-dra
    (and none with it: the exporter keys MIG series by GPU index and instance id)."""
    return gpu("Hostname", AKS, 0, util, model="NVIDIA A100 80GB PCIe", mig=(instance, "1g.10gb", 9856), extra={"UUID": AKS_GPU})  # fmt: skip


def mig_claim(name: str, *devices: str) -> dict:
    return mig("ml", name, AKS, *devices)


@pytest.mark.parametrize(
    "claims, holders",
    [
        # one pod holds both 1g.10gb devices of the GPU: each instance's series is its
        ([mig_claim("a", "gpu-0-mig-19-2-1", "gpu-0-mig-19-3-1")], {"a-pod"}),
        # one held, one free: nothing says which instance id is whose
        ([mig_claim("a", "gpu-0-mig-19-2-1")], {None}),
        ([mig_claim("a", "gpu-0-mig-19-2-1"), mig_claim("b", "gpu-0-mig-19-3-1")], {None}),
    ],
)
def test_mig_devices_through_dra_are_named_where_the_profile_leaves_no_doubt(
    cli, kube_api, prometheus_with, claims, holders
):
    seed(kube_api, node(AKS, 0, gfd=False), *CLASSES, *map(as_v1, SLICES), *claims)
    prom = prometheus_with(aks_mig(7, 0) + aks_mig(8, 30))
    r = cli("top", "--prometheus", prom.url, "--once", "-o", "json")
    assert r.code == 0, r
    doc = json.loads(r.out)
    rows = [g for g in doc["gpus"] if g["uuid"] == AKS_GPU]
    assert len(rows) == 2 and {g["pod"] for g in rows} == holders
    held = doc["summary"]["idle_allocated_mig_slices"]
    assert held == (1 if holders == {"a-pod"} else 0)  # instance 7 idle
