"""The sandbox's simulated cluster: nodes as the GPU Operator labels them, and placement as
kube-scheduler's filters and MostAllocated score at gpuctl's weights decide it."""

from __future__ import annotations

import random

import pytest

from gpuctl.common.errors import GpuctlError
from gpuctl.gpus.scoring import most_allocated, resource_weights
from gpuctl.k8s.nodes import is_gpu_node, mig_reason
from gpuctl.sim import cluster


def _nodes(text=cluster.DEFAULT_NODES):
    return cluster.node_objects(cluster.parse_nodes(text))


def _pod(name="p", gpus=1, gpu_type=None, tolerate=True, cpu="1", node=None, phase=None):
    limits = {"cpu": cpu, "memory": "1Gi"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    spec: dict = {"containers": [{"name": "main", "resources": {"limits": limits}}]}
    if gpu_type:
        term = {"matchExpressions": [{"key": "gpu-type", "operator": "In", "values": [gpu_type]}]}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    if tolerate:
        spec["tolerations"] = [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase or "Running"}}


def test_nodes_carry_the_gpu_operator_labels_and_the_mig_single_strategy():
    nodes = {n["metadata"]["name"]: n for n in _nodes()}
    assert set(nodes) == {
        "cpu-node-1",
        "h100-node-1",
        "h100-node-2",
        "a100-node-1",
        "a100-mig-node-1",
    }
    assert not is_gpu_node(nodes["cpu-node-1"])
    h100 = nodes["h100-node-1"]
    assert is_gpu_node(h100)
    labels = h100["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["gpu-type"] == "h100" and labels["nvidia.com/gpu.count"] == "8"
    assert h100["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    mig = nodes["a100-mig-node-1"]
    mlabels = mig["metadata"]["labels"]
    assert mlabels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    assert mlabels["nvidia.com/mig.strategy"] == "single"
    assert mig["status"]["allocatable"]["nvidia.com/gpu"] == "56"  # 7 slices on each of 8
    assert mig_reason(mig) is None or "1g.10gb" in str(mig_reason(mig))


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("H100", "is not COUNTxMODEL"),
        ("0xH100-80GB", "is not COUNTxMODEL"),
        ("2xNOPE", "NOPE"),
        ("1xH100-80GB:mig=9g.99gb", "9g.99gb"),
        ("0xMI300X", "at least 1"),
        ("1xMI250X", "the sandbox simulates MI300X"),
        ("1xTPU-v5e", "needs its topology"),
        ("1xTPU-v5e:1x3", "not whole hosts"),
        ("1xMI300X:2x4", "the sandbox simulates"),
    ],
)
def test_a_bad_node_spec_is_refused(bad, why):
    with pytest.raises(GpuctlError, match=why):
        cluster.parse_nodes(bad)


def test_other_vendors_nodes_are_labelled_tainted_and_sized_as_their_stacks_do():
    """An MI300X node as AMD's labeller labels one (issue #266's values, product name
    present), a v5e 2x4 slice as two GKE hosts of 4 chips in one node pool of their own."""
    nodes = {n["metadata"]["name"]: n for n in _nodes("1xMI300X,2xTPU-v5e:2x4")}
    amd = nodes["mi300x-node-1"]
    labels = amd["metadata"]["labels"]
    assert labels["amd.com/gpu.product-name"] == "AMD_Instinct_MI300X_OAM"
    assert labels["beta.amd.com/gpu.device-id.74a1"] == "8" and labels["amd.com/gpu.vram"] == "192G"
    assert amd["status"]["allocatable"]["amd.com/gpu"] == "8"
    assert amd["spec"]["taints"][0]["key"] == "amd.com/gpu"
    hosts = sorted(n for n in nodes if n.startswith("tpu-"))
    assert hosts == [f"tpu-v5e-2x4-{s}-node-{h}" for s in (1, 2) for h in (1, 2)]
    pools = {nodes[h]["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for h in hosts}
    assert pools == {"tpu-v5e-2x4-1", "tpu-v5e-2x4-2"}
    tpu = nodes[hosts[0]]
    assert tpu["status"]["allocatable"]["google.com/tpu"] == "4"
    assert tpu["metadata"]["labels"]["cloud.google.com/gke-tpu-topology"] == "2x4"
    assert tpu["spec"]["taints"][0]["key"] == "google.com/tpu"


def test_placement_prefers_the_fuller_node_as_most_allocated_scores():
    nodes = _nodes("2xH100-80GB")
    running = [_pod("a", gpus=4, node="h100-node-2")]
    node, why = cluster.place(_pod("b", gpus=2, gpu_type="h100"), nodes, running)
    assert (node, why) == ("h100-node-2", "")


def test_a_pod_that_fits_nowhere_gets_the_schedulers_reasons():
    nodes = _nodes("1xH100-80GB,1xA100-80GB")
    running = [_pod("a", gpus=8, node="h100-node-1")]
    node, why = cluster.place(_pod("b", gpus=1, gpu_type="h100"), nodes, running)
    assert node is None
    assert why == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    node, why = cluster.place(_pod("c", gpus=1, tolerate=False), nodes, [])
    assert node is None and "untolerated taint {nvidia.com/gpu: present}" in why


def test_finished_pods_free_their_gpus():
    nodes = _nodes("1xH100-80GB")
    done = [_pod("a", gpus=8, node="h100-node-1", phase="Succeeded")]
    assert cluster.place(_pod("b", gpus=8), nodes, done)[0] == "h100-node-1"


def test_the_scalar_score_is_the_replays_score():
    """gpuctl.gpus.scoring.most_allocated (the sandbox's) against whatif's array Scorer."""
    np = pytest.importorskip("numpy")
    from gpuctl.whatif.core.scoring import Scorer

    rng = random.Random(7)
    weights = resource_weights()
    for _ in range(300):
        alloc = [rng.choice([0, 1, 8, 96_000, 64_000]) for _ in weights]
        req = [rng.randint(0, a + 3) for a in alloc]
        names = [r for r, _ in weights]
        ours = most_allocated(dict(zip(names, req)), dict(zip(names, alloc)), weights)
        theirs = Scorer(np.array(alloc, dtype=np.int64)[:, None], [w for _, w in weights])
        assert ours == int(theirs.most_allocated(np.array(req, dtype=np.int64)[:, None])[0])


BLOCK = "topology.k8s.aws/network-node-layer-3"
SPINE = "topology.k8s.aws/network-node-layer-2"


def test_nodes_of_aws_instance_types_carry_eks_topology_labels_in_blocks_of_two():
    nodes = {
        n["metadata"]["name"]: n["metadata"]["labels"] for n in _nodes("3xH100-80GB,2xH200,1xA30")
    }
    block = {name: labels.get(BLOCK) for name, labels in nodes.items()}
    assert block["h100-node-1"] == block["h100-node-2"] != block["h100-node-3"]
    # a group starts a block of its own, blocks fill spines of two
    assert block["h200-node-1"] == block["h200-node-2"] not in {block["h100-node-3"]}
    spine = {name: labels.get(SPINE) for name, labels in nodes.items()}
    assert spine["h100-node-1"] == spine["h100-node-3"] != spine["h200-node-1"]
    layer1 = {labels.get("topology.k8s.aws/network-node-layer-1") for labels in nodes.values()}
    assert len(layer1 - {None}) == 1
    assert block["a30-node-1"] is None and block["cpu-node-1"] is None  # no EC2 topology
    assert all(v is None or (v.startswith("nn-") and len(v) == 20) for v in block.values())


def _gang(name, gpus, key, node=None):
    """A worker of gang `g` that must share KEY's domain with the other workers."""
    pod = _pod(name, gpus=gpus, node=node, phase="Pending")
    pod["metadata"] |= {"namespace": "ml", "labels": {"gang": "g"}}
    term = {"labelSelector": {"matchLabels": {"gang": "g"}}, "topologyKey": key}
    pod["spec"]["affinity"] = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return pod


def test_a_gang_with_required_pod_affinity_on_the_block_stays_in_one_block():
    nodes = _nodes("4xH100-80GB")  # blocks {1, 2} and {3, 4}
    running = [_pod("a", gpus=4, node="h100-node-1"), _pod("b", gpus=4, node="h100-node-3")]
    # without the constraint MostAllocated puts the two workers on the half-full nodes,
    # one in each block
    first, _ = cluster.place(_pod("w0", gpus=4), nodes, running)
    second, _ = cluster.place(_pod("w1", gpus=4), nodes, [*running, _pod("w0", gpus=4, node=first)])
    assert {first, second} == {"h100-node-1", "h100-node-3"}
    first, why = cluster.place(_gang("w0", 4, BLOCK), nodes, running)
    assert first in ("h100-node-1", "h100-node-3"), why
    placed = [*running, _gang("w0", 4, BLOCK, node=first)]
    second, why = cluster.place(_gang("w1", 4, BLOCK), nodes, placed)
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}
    assert second is not None and labels[second][BLOCK] == labels[first][BLOCK], why
    assert second != first


def test_a_gang_worker_with_no_room_in_its_block_waits_with_the_schedulers_reason():
    nodes = _nodes("3xH100-80GB")  # blocks {1, 2} and {3}
    placed = [_pod("a", gpus=8, node="h100-node-2"), _gang("w0", 8, BLOCK, node="h100-node-1")]
    node, why = cluster.place(_gang("w1", 8, BLOCK), nodes, placed)
    assert node is None
    assert "1 node(s) didn't match pod affinity rules" in why  # h100-node-3: another block
    assert "3 Insufficient nvidia.com/gpu" in why  # h100-node-1 and -2, the CPU node
    # on nodes without the key no worker goes anywhere, as kube-scheduler does
    node, why = cluster.place(_gang("w0", 1, BLOCK), _nodes("1xA30"), [])
    assert node is None and "didn't match pod affinity rules" in why
