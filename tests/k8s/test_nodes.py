"""The one GPU-node rule, on nodes as clusters label them (GPU Operator, device plugin
alone, MIG, time-slicing, a failing plugin, Network Operator NICs, Karpenter), and the same
rule for any vendor's accelerators."""

import pytest

from gpuctl.k8s import nodes, objects

GFD = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
}
CPU = {"cpu": "64", "memory": "512Gi", "pods": "110"}


def node(labels=None, allocatable=None, capacity=None):
    alloc = {**CPU, **(allocatable or {})}
    return {
        "metadata": {"name": "n", "labels": labels or {}},
        "status": {"allocatable": alloc, "capacity": {**alloc, **(capacity or {})}},
    }


@pytest.mark.parametrize(
    "labels, allocatable, capacity",
    [
        # the GPU Operator: GPU Feature Discovery's labels, the plugin's resource
        (GFD, {"nvidia.com/gpu": "8"}, None),
        # the device plugin alone (EKS GPU AMI with the plugin's Helm chart): no GFD labels
        ({"node.kubernetes.io/instance-type": "p5.48xlarge"}, {"nvidia.com/gpu": "8"}, None),
        # MIG, mixed strategy: only MIG devices, no whole GPU
        ({}, {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/gpu": "0"}, None),
        # time-slicing with renameByDefault: the GPUs are advertised as .shared only
        ({}, {"nvidia.com/gpu.shared": "32"}, None),
        ({}, {"nvidia.com/mig-1g.10gb.shared": "14"}, None),
        # the plugin marked every GPU unhealthy: allocatable 0, capacity keeps the count
        ({}, {"nvidia.com/gpu": "0"}, {"nvidia.com/gpu": "8"}),
        # GFD ran, the plugin not yet (or it advertises a name of the site's choosing)
        ({"nvidia.com/gpu.present": "true"}, None, None),
        ({"nvidia.com/gpu.count": "4"}, {"example.com/accelerator": "4"}, None),
    ],
)
def test_a_gpu_node_is_one_under_every_scheme(labels, allocatable, capacity):
    assert nodes.is_gpu_node(node(labels, allocatable, capacity))


@pytest.mark.parametrize(
    "labels, allocatable",
    [
        ({}, None),
        ({}, {"nvidia.com/gpu": "0"}),
        # the Network Operator's SR-IOV and RDMA devices share the nvidia.com/ prefix
        ({}, {"nvidia.com/sriov_rdma": "8", "nvidia.com/hostdev": "2"}),
        ({"nvidia.com/gpu.present": "false", "nvidia.com/gpu.count": "0"}, None),
        # a cloud label says what the instance has, not that its GPUs can be used
        ({"karpenter.k8s.aws/instance-gpu-count": "8"}, None),
    ],
)
def test_other_nodes_are_not_gpu_nodes(labels, allocatable):
    assert not nodes.is_gpu_node(node(labels, allocatable))


@pytest.mark.parametrize(
    "labels, allocatable, capacity",
    [
        ({}, {"amd.com/gpu": "8"}, None),
        ({}, {"amd.com/cpx_nps4": "64"}, None),  # AMD's mixed naming: partitions only
        ({}, {"aws.amazon.com/neuron": "16", "aws.amazon.com/neuroncore": "128"}, None),
        ({}, {"aws.amazon.com/neuroncore": "2"}, None),
        ({}, {"google.com/tpu": "4"}, None),
        ({}, {"habana.ai/gaudi": "8"}, None),
        ({}, {"gpu.intel.com/xe": "1"}, None),
        ({}, {"amd.com/gpu": "0"}, {"amd.com/gpu": "8"}),  # every device unhealthy
        # a vendor's discovery labelled it, its device plugin advertises nothing (yet)
        ({"feature.node.kubernetes.io/amd-gpu": "true"}, None, None),
        ({"beta.amd.com/gpu.device-id.67df": "1"}, None, None),
        ({"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"}, None, None),
        ({"habana.ai/device.count": "8"}, None, None),
        ({"feature.node.kubernetes.io/pci-1da3.present": "true"}, None, None),
        (GFD, None, None),
    ],
)
def test_an_accelerator_node_is_one_for_every_vendor(labels, allocatable, capacity):
    n = node(labels, allocatable, capacity)
    assert nodes.is_accelerator_node(n)
    nvidia = any(k.startswith("nvidia.com/") for k in [*labels, *(allocatable or {})])
    assert nodes.is_gpu_node(n) == nvidia  # the GPU-node rule stays NVIDIA's


@pytest.mark.parametrize(
    "labels, allocatable",
    [
        ({}, None),
        ({}, {"amd.com/gpu": "0", "google.com/tpu": "0"}),
        # not accelerators: EFA, SR-IOV NICs, Intel's monitoring resource, HAMi's GPU memory
        ({}, {"vpc.amazonaws.com/efa": "16", "nvidia.com/sriov_rdma": "8"}),
        ({}, {"gpu.intel.com/i915_monitoring": "1", "nvidia.com/gpumem": "81920"}),
        ({"habana.ai/device.count": "0"}, None),
        # the instance type's accelerators, not a working stack's
        ({"karpenter.k8s.aws/instance-accelerator-count": "16"}, None),
        ({"node.kubernetes.io/instance-type": "trn2.48xlarge"}, None),
    ],
)
def test_other_nodes_are_not_accelerator_nodes(labels, allocatable):
    assert not nodes.is_accelerator_node(node(labels, allocatable))


def test_accelerator_resources_are_every_vendors_and_nothing_else():
    n = node(
        allocatable={
            "nvidia.com/gpu": "2",
            "amd.com/cpx_nps4": "64",
            "aws.amazon.com/neuroncore": "128",
            "google.com/tpu": "4",
            "habana.ai/gaudi": "8",
            "nvidia.com/sriov_rdma": "4",
            "vpc.amazonaws.com/efa": "32",
            "amd.com/xgmi": "1",
        }
    )
    assert nodes.accelerator_resources(n) == {
        "nvidia.com/gpu": 2,
        "amd.com/cpx_nps4": 64,
        "aws.amazon.com/neuroncore": 128,
        "google.com/tpu": 4,
        "habana.ai/gaudi": 8,
    }


def test_gpu_resources_are_the_plugins_names_only():
    n = node(
        allocatable={
            "nvidia.com/gpu": "2",
            "nvidia.com/gpu.shared": "8",
            "nvidia.com/mig-3g.40gb": "1",
            "nvidia.com/sriov_rdma": "4",
            "vpc.amazonaws.com/efa": "32",
        }
    )
    assert nodes.gpu_resources(n) == {
        "nvidia.com/gpu": 2,
        "nvidia.com/gpu.shared": 8,
        "nvidia.com/mig-3g.40gb": 1,
    }


def test_accessors_read_missing_parts_as_empty():
    bare = {"metadata": {"name": "n"}}
    assert objects.labels_of(bare) == {} and nodes.allocatable(bare) == {}
    assert nodes.capacity(bare) == {} and nodes.taints(bare) == []
