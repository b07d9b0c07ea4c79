"""`gpuctl advise` names a workload from the cluster's objects where Prometheus has no
kube-state-metrics owner series (the sandbox, many small clusters): the held device's pod, its
Job and the Job's CronJob read through the API emulator. The pod's name alone tells only
"some controller's rocm" (a Job's pod is NAME-xxxxx). AMD's series as its Helm chart's scrape
stores them (honorLabels true: the holder in the plain labels) and as the Prometheus
Operator's default stores them (exported_*) name the same workload."""

from __future__ import annotations

import json

import pytest

from tests.gpu_cluster import pod, seed
from tests.vendor_series import amd_gpu

pytestmark = pytest.mark.integration


def owned(obj: dict, kind: str, name: str) -> dict:
    ref = {"apiVersion": "batch/v1", "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}  # fmt: skip
    obj["metadata"]["ownerReferences"] = [ref]
    return obj


def job(name: str) -> dict:
    spec = {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "ml"}, "spec": {"template": {"spec": spec}}}  # fmt: skip


@pytest.fixture
def cluster(kube_api):
    from kubernetes import client

    batch = client.BatchV1Api(kube_api)
    batch.create_namespaced_job("ml", job("rocm"))
    batch.create_namespaced_job("ml", owned(job("nightly-29000000"), "CronJob", "nightly"))
    seed(
        kube_api,
        owned(pod("rocm-2tlcz", "ml", 1, resource="amd.com/gpu", node_name="mi300x-1"), "Job", "rocm"),
        owned(pod("nightly-29000000-x7k2p", "ml", 1, resource="amd.com/gpu", node_name="mi300x-1"), "Job", "nightly-29000000"),
    )  # fmt: skip


def names(cli, url: str) -> set[tuple[str | None, str, str]]:
    r = cli("advise", "--prometheus", url, "--window", "20m", "-o", "json")
    assert r.code == 0, r
    return {(w["kind"], w["name"], w["owner_from"]) for w in json.loads(r.out)["workloads"]}


@pytest.mark.parametrize("honor_labels", [True, False])
def test_the_cluster_names_an_amd_job_s_workload(cli, kube, cluster, prometheus_with, honor_labels):  # fmt: skip
    series = amd_gpu(0, 70.0, ("ml", "rocm-2tlcz", "main"), honor_labels=honor_labels)
    series += amd_gpu(1, 0.0, ("ml", "nightly-29000000-x7k2p", "main"), honor_labels=honor_labels)
    since = len(kube.requests())
    assert names(cli, prometheus_with(series).url) == {
        ("Job", "rocm", "cluster"),
        ("CronJob", "nightly", "cluster"),
    }
    # one connection for the claims, the nodes' models and the pods' owners
    assert [p for _, p, _ in kube.requests()[since:]].count("/version/") == 1


def test_without_a_cluster_the_pod_s_name_tells_what_it_can(cli, prometheus_with):
    series = amd_gpu(0, 70.0, ("ml", "rocm-2tlcz", "main"), honor_labels=True)
    assert names(cli, prometheus_with(series).url) == {(None, "rocm", "pod name")}
