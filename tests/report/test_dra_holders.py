"""`gpuctl report` on GPUs allocated through DRA, against a real Prometheus. dcgm-exporter
names the pod of a DRA-allocated GPU only with --kubernetes-enable-dra (NVIDIA/dcgm-exporter
@ d5e5f51, internal/pkg/transformation/kubernetes.go): then each series of the device gets
`pod`/`namespace`/`container` and `dra_claim_name`, `dra_claim_namespace`, `dra_driver_name`,
`dra_pool_name`, `dra_device_name` (const.go), which the GPU Operator's ServiceMonitor
(honorLabels false) renames `exported_*` where they clash with the exporter pod's own. Then
the report counts it held. Without the flag the series carry no pod: the report, which reads
holders over past days from the labels alone, counts such a GPU unheld and says so when the
cluster's ResourceClaims allocate GPUs now (real slices: tests/data/dra)."""

from __future__ import annotations

import json

import pytest

from tests.cluster_data import gpu
from tests.gpus.test_dra import T4
from tests.reclaim.test_dra_holders import UUIDS
from tests.top.test_dra_holders import dra_cluster  # noqa: F401 (a fixture: a T4 claimed by ml/train-0)

pytestmark = pytest.mark.integration

# the GPU Operator's DRA exporter pod, as the ServiceMonitor's target labels name it
EXPORTER_POD = {
    "pod": "nvidia-dcgm-exporter-dra-7xk2p",
    "namespace": "gpu-operator",
    "container": "nvidia-dcgm-exporter-dra",
    "job": "nvidia-dcgm-exporter-dra",
}


def t4(index: int, util: float, **labels) -> list:
    """dcgm-exporter's series of one of the node's T4s, by its real UUID; LABELS: added."""
    return gpu(
        "Hostname", T4, index, util, model="Tesla T4", extra={"UUID": UUIDS[index], **labels}
    )


def flagged(index: int, util: float, pod: str) -> list:
    """A T4's series as dcgm-exporter with --kubernetes-enable-dra emits them for the pod
    its claim `<pod>-gpu-x7k2q` holds, scraped through the ServiceMonitor."""
    dra = {
        "exported_pod": pod,
        "exported_namespace": "ml",
        "exported_container": "main",
        "dra_claim_name": f"{pod}-gpu-x7k2q",
        "dra_claim_namespace": "ml",
        "dra_driver_name": "gpu.nvidia.com",
        "dra_pool_name": "harpatil4220c-g9kfm-gpu-c-rd8r8",
        "dra_device_name": f"gpu-{index}",
    }
    return t4(index, util, **EXPORTER_POD, **dra)


def report(cli, url: str) -> dict:
    r = cli("report", "--prometheus", url, "--window", "20m", "--step", "5m", "-o", "json")
    assert r.code == 0, r
    return json.loads(r.out)


@pytest.mark.usefixtures("dra_cluster")
def test_a_gpu_the_exporter_names_through_dra_counts_held(cli, prometheus_with):
    prom = prometheus_with(flagged(0, 40, "train-0") + t4(1, 0, **EXPORTER_POD))
    doc = report(cli, prom.url)
    (team,) = doc["teams"]
    assert team["team"] == "ml"
    assert team["held_gpu_hours"] == pytest.approx(20 / 60, rel=0.01)  # one GPU, the window
    assert team["busy_gpu_hours"] == pytest.approx(0.4 * 20 / 60, rel=0.05)
    assert doc["cluster"]["gpu_hours"] == pytest.approx(2 * 20 / 60, rel=0.01)
    assert doc["dra_devices_unlabelled"] == 0  # the held T4 is named; the free one has no claim


@pytest.mark.usefixtures("dra_cluster")
def test_a_dra_gpu_the_series_naming_no_pod_is_said_to_count_unheld(cli, prometheus_with):
    prom = prometheus_with(t4(0, 40) + t4(1, 0))
    doc = report(cli, prom.url)
    assert doc["teams"] == [] and doc["dra_devices_unlabelled"] == 1
    r = cli("report", "--prometheus", prom.url, "--window", "20m")
    assert r.code == 0, r
    said = " ".join(r.out.split())
    assert "1 device the cluster allocates through DRA" in said
    assert "counted as unheld" in said and "--kubernetes-enable-dra" in said


def test_without_a_cluster_nothing_is_said(cli, prometheus_with):
    prom = prometheus_with(t4(0, 40))
    assert report(cli, prom.url)["dra_devices_unlabelled"] == 0
