"""`gpuctl nodes` against the API emulator seeded with the real node corpus (tests/data/nodes,
NVIDIA beside AMD, Neuron, TPU and Gaudi nodes) and pods holding their accelerators, through
the official client; kubectl reads the same cluster."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.gpu_cluster import mark, node, pod, seed
from tests.node_corpus import corpus

pytestmark = pytest.mark.integration

NODES = corpus()
NAME = {stem: n["metadata"]["name"] for stem, n in NODES.items()}
# the contract's fields, in its order (docs/nodes.md)
FIELDS = [
    "vendor", "model", "product", "count", "memory_bytes", "source", "resource",
    "device_class", "partition", "sharing", "replicas", "allocated", "free", "unhealthy",
    "blocked", "devices", "driver", "scheme",
]  # fmt: skip
PODS = [
    pod("train-0", "ml", 3, node_name=NAME["gfd-h100"]),
    pod("done", "ml", 4, phase="Succeeded", node_name=NAME["gfd-h100"]),
    pod("waiting", "ml", 8, phase="Pending", node_name=None),  # not bound: holds nothing
    pod("mig", "infer", 1, "Pending", "nvidia.com/mig-7g.40gb", NAME["gfd-a100-mig-mixed"]),
    pod("neuron", "ml", 4, resource="aws.amazon.com/neuron", node_name=NAME["neuron-trn2-karpenter"]),
    pod("amd", "infer", 1, resource="amd.com/gpu", node_name=NAME["amd-mi300x-vf"]),
    pod("tpu", "ml", 4, resource="google.com/tpu", node_name=NAME["gke-tpu-v5e-2x4"]),
    pod("gaudi", "ml", 2, resource="habana.ai/gaudi", node_name=NAME["gaudi-hfd"]),
]  # fmt: skip


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


@pytest.fixture
def cluster(kube, kube_api):
    seed(kube_api, namespace("ml"), namespace("infer"), *NODES.values(), *PODS)
    return kube


def listed(cli, *args: str) -> dict[str, dict]:
    r = cli("nodes", "-o", "json", *args)
    assert r.code == 0, r
    return {n["name"]: n for n in json.loads(r.out)["nodes"]}


def test_every_node_s_accelerators_allocated_and_free(cli, cluster):
    found = listed(cli)
    assert set(found) == set(NAME.values())  # every corpus node has accelerators
    for n in found.values():
        for a in n["accelerators"]:
            assert list(a) == FIELDS
            assert a["blocked"] == 0  # no shared counters on a device plugin's node
            assert a["free"] == max(a["count"] - a["unhealthy"] - a["allocated"], 0)

    def row(stem, resource):
        return next(a for a in found[NAME[stem]]["accelerators"] if a["resource"] == resource)

    h100 = row("gfd-h100", "nvidia.com/gpu")
    assert (h100["vendor"], h100["model"], h100["count"], h100["allocated"], h100["free"]) == (
        "nvidia",
        "H100-80GB",
        8,
        3,
        5,
    )
    assert (h100["source"], h100["product"], h100["devices"]) == (
        "device-plugin",
        "NVIDIA-H100-80GB-HBM3",
        [],
    )
    mig = row("gfd-a100-mig-mixed", "nvidia.com/mig-7g.40gb")
    assert (mig["partition"], mig["allocated"], mig["free"]) == ("7g.40gb", 1, 3)
    assert (row("gfd-t4-shared", "nvidia.com/gpu")["sharing"], row("gfd-t4-shared", "nvidia.com/gpu")["replicas"]) == ("time-slicing", 8)  # fmt: skip
    # other vendors: vendor, model, count and what their pods hold, as their labels name them
    for stem, resource, vendor, model, count, held in [
        ("amd-mi300x-vf", "amd.com/gpu", "amd", "MI300X", 1, 1),
        ("amd-mi300x-labeller", "amd.com/gpu", "amd", "MI300X", 8, 0),
        ("amd-mixed-partitions", "amd.com/cpx_nps1", "amd", None, 24, 0),
        ("neuron-trn2-karpenter", "aws.amazon.com/neuron", "aws", "Trainium2", 16, 4),
        ("neuron-trn2-karpenter", "aws.amazon.com/neuroncore", "aws", "Trainium2", 128, 0),
        ("neuron-inf2-instance-type", "aws.amazon.com/neuron", "aws", "Inferentia2", 12, 0),
        ("neuron-inf1-eks", "aws.amazon.com/neuron", "aws", "Inferentia", 1, 0),
        ("gke-tpu-v5e-2x4", "google.com/tpu", "google", "TPU-v5e", 4, 4),
        ("gaudi-hfd", "habana.ai/gaudi", "intel", None, 8, 2),
        ("gaudi2-hfd", "habana.ai/gaudi", "intel", "Gaudi2", 8, 0),
    ]:
        a = row(stem, resource)
        assert (a["vendor"], a["model"], a["count"], a["allocated"]) == (vendor, model, count, held)
    assert row("gke-tpu-v5e-2x4", "google.com/tpu")["partition"] == "2x4"  # the slice's topology
    starting = found[NAME["gfd-h100-plugin-not-running"]]
    assert starting["problems"] == [
        "labelled with nvidia accelerators, but no device plugin advertises nvidia.com/gpu"
    ]
    assert found[NAME["amd-labelled-no-capacity"]]["accelerators"][0]["count"] == 0


def test_kubectl_reads_the_same_nodes_and_allocatable(cli, cluster, kubectl):
    found = listed(cli)
    seen = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert {n["metadata"]["name"] for n in seen} == set(found)
    for n in seen:
        allocatable = n["status"]["allocatable"]
        for a in found[n["metadata"]["name"]]["accelerators"]:
            if a["count"]:
                assert int(allocatable[a["resource"]]) == a["count"] - a["unhealthy"]
    pods = json.loads(kubectl("get", "pods", "-A", "-o", "json").stdout)["items"]
    assert len(pods) == len(PODS)


def test_a_selector_goes_to_the_server_and_is_applied_here_too(cli, cluster):
    since = mark(cluster)
    found = listed(cli, "-l", "karpenter.sh/nodepool=trainium")
    assert list(found) == [NAME["neuron-trn2-karpenter"]]
    sent = [(path, query) for _, path, query in cluster.requests()[since:]]
    # nodes, pods and DRA's objects read once each: the selector to the server, pods bound
    # to a node, DRA in the version the cluster serves
    assert sent == [
        ("/api/v1/nodes", {"labelSelector": "karpenter.sh/nodepool=trainium"}),
        ("/api/v1/pods", {"fieldSelector": "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"}),
        ("/apis/", {}),
        ("/apis/resource.k8s.io/v1/deviceclasses", {}),
        ("/apis/resource.k8s.io/v1/resourceslices", {}),
        ("/apis/resource.k8s.io/v1/resourceclaims", {}),
    ]  # fmt: skip
    assert listed(cli, "-l", "cloud.google.com/gke-tpu-topology in (2x4, 4x4)").keys() == {
        NAME["gke-tpu-v5e-2x4"]
    }


def test_a_bad_selector_is_a_usage_error_before_any_request(cli, cluster):
    since = mark(cluster)
    r = cli("nodes", "-l", "a=b=c")
    assert r.code == 2 and "selector" in r.err, r
    assert cluster.requests()[since:] == []


def test_yaml_is_the_same_document_and_all_adds_the_other_nodes(cli, kube, kube_api):
    seed(kube_api, NODES["gfd-l4"], NODES["gaudi-hfd"], node("cpu-1", 0, gfd=False))
    as_json = json.loads(cli("nodes", "-o", "json").out)
    as_yaml = yaml.safe_load(cli("nodes", "-o", "yaml").out)
    assert as_json == as_yaml and [n["name"] for n in as_json["nodes"]] == ["g6-l4", "gaudi-1"]
    every = json.loads(cli("nodes", "--all", "-o", "json").out)["nodes"]
    assert [(n["name"], n["accelerators"]) for n in every][0] == ("cpu-1", [])
    assert len(every) == 3


def test_the_table_and_the_wide_table(cli, cluster):
    r = cli("nodes", "-l", "nvidia.com/gpu.product=Tesla-T4-SHARED")
    assert r.code == 0, r
    header, row = r.out.splitlines()
    assert header.split() == [
        "NODE", "VENDOR", "MODEL", "COUNT", "ALLOCATED", "FREE", "SOURCE", "RESOURCE",
    ]  # fmt: skip
    assert row.split() == [
        NAME["gfd-t4-shared"], "nvidia", "T4", "8", "0", "8", "device-plugin", "nvidia.com/gpu",
    ]  # fmt: skip
    wide = cli("nodes", "-o", "wide", "-l", "nvidia.com/mig.config=all-7g.40gb").out.splitlines()
    assert wide[0].split()[-5:] == ["MEMORY", "PARTITION", "SHARING", "UNHEALTHY", "PRODUCT"]
    assert wide[1].split()[-5:] == ["39.2Gi", "7g.40gb", "-", "0", "NVIDIA-A100-SXM4-40GB-MIG-7g.40gb"]  # fmt: skip
    trn2 = cli("nodes", "-l", "karpenter.sh/nodepool=trainium").out.splitlines()[1:]
    assert [line.split()[-1] for line in trn2] == [
        "aws.amazon.com/neuron",
        "aws.amazon.com/neuroncore",
    ]


def test_problems_go_to_stderr_and_an_empty_answer_says_so(cli, cluster):
    r = cli("nodes", "-l", "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")
    assert r.code == 0, r
    assert (
        f"{NAME['gfd-h100-plugin-not-running']}: labelled with nvidia accelerators, but no device "
        "plugin advertises nvidia.com/gpu"
    ) in r.err
    r = cli("nodes", "-l", "pool=none")
    assert (r.code, r.out) == (0, "") and "no accelerator nodes" in r.err
