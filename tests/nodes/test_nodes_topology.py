"""`gpuctl nodes --topology` on topology-labelled nodes (tests/data/topology: EKS p4de, GKE A3
Ultra, GB200 trays with GFD's clique) and a pod holding GPUs, through the API emulator: each
node's `topology`, and per domain of each label the nodes, the whole free ones and the
accelerators free."""

from __future__ import annotations

import json

import pytest

from tests.gpu_cluster import pod, seed
from tests.topology_corpus import layout

pytestmark = pytest.mark.integration

BLOCK = "topology.k8s.aws/network-node-layer-3"
EKS = [n["metadata"]["name"] for n in layout("eks-p4de")]


@pytest.fixture
def cluster(kube, kube_api):
    nodes = [*layout("eks-p4de"), *layout("gke-a3-ultra"), *layout("gfd-gb200-clique")]
    seed(kube_api, *nodes, pod("train-0", "default", 3, node_name=EKS[0]))
    return kube


def test_each_node_says_where_it_sits(cli, cluster):
    r = cli("nodes", "-o", "json")
    assert r.code == 0, r
    found = {n["name"]: n for n in json.loads(r.out)["nodes"]}
    assert found[EKS[0]]["topology"] == {
        "topology.kubernetes.io/zone": "us-west-2b",
        "topology.k8s.aws/network-node-layer-1": "nn-b59b170155f6801f8",
        "topology.k8s.aws/network-node-layer-2": "nn-a42b0750f49b48c69",
        BLOCK: "nn-38464347ecf47e324",
    }
    assert found["gb-nvl-043-bianca-1"]["topology"] == {
        "nvidia.com/gpu.clique": "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"
    }
    assert "topology" not in json.loads(r.out)  # only with --topology


def test_domains_group_nodes_and_free_gpus(cli, cluster):
    r = cli("nodes", "--topology", "-o", "json")
    assert r.code == 0, r
    doc = json.loads(r.out)["topology"]
    assert doc["levels"][:4] == [
        "topology.kubernetes.io/zone",
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        BLOCK,
    ]
    assert doc["levels"][-2:] == ["nvidia.com/gpu.clique", "cloud.google.com/gce-topology-host"]
    by = {(d["key"], d["value"]): d for d in doc["domains"]}
    block = by[(BLOCK, "nn-38464347ecf47e324")]
    assert block["name"] == "block" and block["nodes"] == EKS[:2]
    assert block["free_nodes"] == [EKS[1]]  # train-0 holds 3 GPUs of the first
    (gpus,) = block["accelerators"]
    assert (gpus["resource"], gpus["count"], gpus["allocated"], gpus["free"]) == (
        "nvidia.com/gpu", 16, 3, 13,
    )  # fmt: skip
    spine = by[("topology.k8s.aws/network-node-layer-2", "nn-a42b0750f49b48c69")]
    assert spine["name"] == "spine" and len(spine["nodes"]) == 3 and len(spine["free_nodes"]) == 2
    clique = by[("nvidia.com/gpu.clique", "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766")]
    assert clique["name"] == "nvlink" and clique["accelerators"][0]["free"] == 8


def test_the_table_names_each_level(cli, cluster):
    r = cli("nodes", "--topology")
    assert r.code == 0, r
    rows = [line.split() for line in r.out.splitlines()]
    block = next(row for row in rows if "nn-38464347ecf47e324" in row)
    assert block[:6] == ["block", f"({BLOCK})", "nn-38464347ecf47e324", "2", "1", "nvidia"]
    assert block[-3:] == ["16", "3", "13"]


def test_nodes_without_topology_labels_say_so(cli, kube, kube_api):
    from tests.node_corpus import corpus

    seed(kube_api, corpus()["gfd-h100"])
    r = cli("nodes", "--topology")
    assert r.code == 0 and r.out == ""
    assert "no topology labels on these nodes" in r.err
