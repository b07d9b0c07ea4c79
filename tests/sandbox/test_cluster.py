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
