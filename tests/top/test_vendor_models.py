"""Another vendor's model named from its node's labels: AMD's device-metrics-exporter labels a
GPU with its board part number only (`card_model`, tests/vendor_series.py cites the source),
while AMD's node labeller names the product on the node (tests/data/nodes/
amd-mi300x-labeller.yaml); the cluster view and advise show the model the identity resolver
reads there, and the part number where the cluster has no such node."""

from __future__ import annotations

import copy
import json

import pytest

from tests.gpu_cluster import seed
from tests.node_corpus import corpus
from tests.vendor_series import amd_gpu

pytestmark = pytest.mark.integration


def amd_node(name: str) -> dict:
    node = copy.deepcopy(corpus()["amd-mi300x-labeller"])
    node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return node


@pytest.fixture
def prom(kube_api, prometheus_with):
    seed(kube_api, amd_node("mi300x-1"))
    held = amd_gpu(0, 0.0, ("ml", "train-0", "trainer"))
    return prometheus_with(held + amd_gpu(1, 50.0) + amd_gpu(0, 40.0, node="mi300x-9"))


def test_the_cluster_view_names_the_model_the_node_s_labels_name(cli, prom):
    r = cli("top", "--prometheus", prom.url, "--once", "-o", "json")
    assert r.code == 0, r
    models = {(g["node"], g["gpu"]): g["model"] for g in json.loads(r.out)["gpus"]}
    assert models == {
        ("mi300x-1", "0"): "MI300X",
        ("mi300x-1", "1"): "MI300X",
        ("mi300x-9", "0"): "102-D65209-0C",  # no such node in the cluster: the part number
    }
    r = cli("top", "--prometheus", prom.url, "--once")
    assert r.code == 0 and "AMD MI300X" in r.out, r


def test_advise_names_the_model_the_node_s_labels_name(cli, prom):
    r = cli("advise", "--prometheus", prom.url, "--window", "20m", "-o", "json")
    assert r.code == 0, r
    (row,) = json.loads(r.out)["workloads"]
    assert (row["pods"], row["vendor"], row["model"], row["advice"]) == (["train-0"], "amd", "MI300X", "release")  # fmt: skip
