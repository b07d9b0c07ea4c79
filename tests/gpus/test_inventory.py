"""The accelerator inventory (gpuctl.gpus.inventory) on the real node corpus (tests/data/nodes,
each file citing its source): every node's rows, what its pods hold, and the DRA seam."""

from __future__ import annotations

import copy

import pytest

from gpuctl.gpus.accelerators import DRA, Accelerator
from gpuctl.gpus.vendors import is_accelerator_resource, vendor_of, vendor_of_driver
from gpuctl.k8s.nodes import inventory_of
from tests.node_corpus import corpus

NODES = corpus()
GIB = 1 << 30
MIB = 1 << 20
# file → its rows: (vendor, model, resource, partition, count, unhealthy, sharing, replicas,
# memory per device in MiB); a row of count 0 is a node labelled with accelerators that no
# device plugin advertises
EXPECTED = {
    "gfd-h100": [("nvidia", "H100-80GB", "nvidia.com/gpu", None, 8, 0, None, 1, 81559)],
    "gfd-h100-unhealthy": [("nvidia", "H100-80GB", "nvidia.com/gpu", None, 8, 1, None, 1, 81559)],
    "gfd-h100-plugin-not-running": [
        ("nvidia", "H100-80GB", "nvidia.com/gpu", None, 0, 0, None, 1, 81559)
    ],
    "gfd-a100-old-name": [("nvidia", "A100-40GB", "nvidia.com/gpu", None, 8, 0, None, 1, 40960)],
    "gfd-a100-80gb": [("nvidia", "A100-80GB", "nvidia.com/gpu", None, 8, 0, None, 1, 81920)],
    # the single strategy: nvidia.com/gpu counts 1g.5gb slices, GFD's memory is the slice's
    "gfd-a100-mig-single": [
        ("nvidia", "A100-40GB", "nvidia.com/gpu", "1g.5gb", 14, 0, None, 1, 4864)
    ],
    "gfd-a100-mig-mixed": [
        ("nvidia", "A100-40GB", "nvidia.com/mig-7g.40gb", "7g.40gb", 4, 0, None, 1, 40192)
    ],
    "gfd-a100-mig-invalid": [("nvidia", "A100-80GB", "nvidia.com/gpu", None, 0, 0, None, 1, 81920)],
    "gfd-t4": [("nvidia", "T4", "nvidia.com/gpu", None, 1, 0, None, 1, 15360)],
    # time-slicing: the resource counts replicas, 8 of one T4
    "gfd-t4-shared": [("nvidia", "T4", "nvidia.com/gpu", None, 8, 0, "time-slicing", 8, 15360)],
    "gfd-a10g-shared-renamed": [
        ("nvidia", "A10G", "nvidia.com/gpu.shared", None, 4, 0, "time-slicing", 4, 23028)
    ],
    "gfd-l4": [("nvidia", "L4", "nvidia.com/gpu", None, 1, 0, None, 1, 23034)],
    "karpenter-p4d": [("nvidia", "A100-40GB", "nvidia.com/gpu", None, 8, 0, None, 1, 40960)],
    "eks-instance-type-g5": [("nvidia", "A10G", "nvidia.com/gpu", None, 1, 0, None, 1, None)],
    "gke-l4": [("nvidia", "L4", "nvidia.com/gpu", None, 1, 0, None, 1, None)],
    # GKE's partitions: each 1g.5gb one nvidia.com/gpu, memory from the MIG geometry
    "gke-a100-partitioned": [
        ("nvidia", "A100-40GB", "nvidia.com/gpu", "1g.5gb", 7, 0, None, 1, 4864)
    ],
    "aks-a100": [("nvidia", "A100-80GB", "nvidia.com/gpu", None, 1, 0, None, 1, 81920)],
    "gpuctl-h100": [("nvidia", "H100-80GB", "nvidia.com/gpu", None, 8, 0, None, 1, 81559)],
    # other vendors, named by their labels (gpuctl.gpus.vendor_models): the labeller's device
    # ID where it wrote no product name, Karpenter's accelerator name, the instance type, GKE's
    # accelerator (the slice's topology as the partition), Habana's device type
    "amd-mi300x-vf": [("amd", "MI300X", "amd.com/gpu", None, 1, 0, None, 1, 192 * 1024)],
    "amd-mi300x-labeller": [("amd", "MI300X", "amd.com/gpu", None, 8, 0, None, 1, 192 * 1024)],
    # a Polaris (device ID 67df) no table names; its 8G of VRAM as the labeller wrote it
    "amd-labelled-no-capacity": [("amd", None, "amd.com/gpu", None, 0, 0, None, 1, 8 * 1024)],
    "amd-mixed-partitions": [
        ("amd", None, "amd.com/spx_nps1", "spx_nps1", 5, 0, None, 1, None),
        ("amd", None, "amd.com/cpx_nps1", "cpx_nps1", 24, 0, None, 1, None),
    ],
    "neuron-inf1-eks": [
        ("aws", "Inferentia", "aws.amazon.com/neuron", None, 1, 0, None, 1, 8 * 1024)
    ],
    "neuron-inf2-instance-type": [
        ("aws", "Inferentia2", "aws.amazon.com/neuron", None, 12, 0, None, 1, 32 * 1024),
        ("aws", "Inferentia2", "aws.amazon.com/neuroncore", "neuroncore", 24, 0, None, 1, None),
    ],
    "neuron-trn2-karpenter": [
        ("aws", "Trainium2", "aws.amazon.com/neuron", None, 16, 0, None, 1, 96 * 1024),
        ("aws", "Trainium2", "aws.amazon.com/neuroncore", "neuroncore", 128, 0, None, 1, None),
    ],
    "gke-tpu-v5e-2x4": [("google", "TPU-v5e", "google.com/tpu", "2x4", 4, 0, None, 1, 16 * 1024)],
    # Habana's feature discovery of driver 0.11 wrote no device type or ID
    "gaudi-hfd": [("intel", None, "habana.ai/gaudi", None, 8, 0, None, 1, None)],
    "gaudi2-hfd": [("intel", "Gaudi2", "habana.ai/gaudi", None, 8, 0, None, 1, 96 * 1024)],
}


def rows(inventory) -> list[tuple]:
    return [
        (
            a.vendor,
            a.model,
            a.resource,
            a.partition,
            a.count,
            a.unhealthy,
            a.sharing,
            a.replicas,
            a.memory_bytes // MIB if a.memory_bytes else None,
        )
        for a in inventory.accelerators
    ]


def test_every_corpus_node_is_expected():
    assert set(NODES) == set(EXPECTED)


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_each_real_node_gives_its_rows(stem):
    inventory = inventory_of(NODES[stem], [])
    assert inventory.name == NODES[stem]["metadata"]["name"]
    assert rows(inventory) == EXPECTED[stem]
    assert all(a.source == "device-plugin" and a.allocated == 0 for a in inventory.accelerators)
    # a node that has accelerators nothing advertises says so; no other node has problems
    silent = [a.resource for a in inventory.accelerators if not a.count]
    assert bool(inventory.problems) == bool(silent)
    assert all(f"no device plugin advertises {r}" in " ".join(inventory.problems) for r in silent)


def test_the_scheme_and_product_are_what_named_the_gpu():
    h100 = inventory_of(NODES["gfd-h100"], []).accelerators[0]
    assert (h100.scheme, h100.product) == ("gfd", "NVIDIA-H100-80GB-HBM3")
    mixed = inventory_of(NODES["gfd-a100-mig-mixed"], []).accelerators[0]
    assert mixed.product == "NVIDIA-A100-SXM4-40GB-MIG-7g.40gb"  # the profile's own label
    karpenter = inventory_of(NODES["karpenter-p4d"], []).accelerators[0]
    assert (karpenter.scheme, karpenter.product) == ("karpenter", "a100")
    invalid = inventory_of(NODES["gfd-a100-mig-invalid"], [])
    assert "MIG layouts differ between its GPUs" in invalid.problems[0]


def pod(name, node, limits, phase="Running", init=None, requests=None):
    resources = {"limits": limits, **({"requests": requests} if requests else {})}
    spec = {"nodeName": node, "containers": [{"name": "c", "resources": resources}]}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"limits": init}}]
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


def test_allocated_counts_the_pods_bound_to_the_node_that_are_not_finished():
    h100 = NODES["gfd-h100-unhealthy"]  # 8 GPUs, 1 unhealthy
    name = h100["metadata"]["name"]
    pods = [
        pod("a", name, {"nvidia.com/gpu": "2"}),
        pod("b", name, {"nvidia.com/gpu": "1"}, phase="Pending"),  # bound, starting
        # an init container holds its GPUs while it runs: the pod needs the larger of both
        pod("c", name, {"nvidia.com/gpu": "1"}, init={"nvidia.com/gpu": "3"}),
        pod("done", name, {"nvidia.com/gpu": "4"}, phase="Succeeded"),
        pod("failed", name, {"nvidia.com/gpu": "4"}, phase="Failed"),
        pod("elsewhere", "other-node", {"nvidia.com/gpu": "4"}),
        pod("unbound", None, {"nvidia.com/gpu": "4"}, phase="Pending"),
        pod("cpu", name, {"cpu": "4"}),
    ]
    (a,) = inventory_of(h100, pods).accelerators
    assert (a.count, a.unhealthy, a.allocated, a.free) == (8, 1, 6, 1)
    assert a.to_dict()["free"] == 1


def test_allocated_is_per_resource_for_every_vendor():
    trn2 = NODES["neuron-trn2-karpenter"]
    name = trn2["metadata"]["name"]
    pods = [
        pod("whole", name, {"aws.amazon.com/neuron": "4", "vpc.amazonaws.com/efa": "4"}),
        pod("cores", name, {"aws.amazon.com/neuroncore": "2"}, requests={"cpu": "1"}),
    ]
    devices, cores = inventory_of(trn2, pods).accelerators
    assert (devices.allocated, devices.free) == (4, 12)
    assert (cores.allocated, cores.free) == (2, 126)
    mixed = NODES["gfd-a100-mig-mixed"]
    (mig,) = inventory_of(
        mixed, [pod("m", "node-with-mig", {"nvidia.com/mig-7g.40gb": 3})]
    ).accelerators
    assert (mig.allocated, mig.free) == (3, 1)
    # more requested than the node has (a stale pod list): free never goes below 0
    (over,) = inventory_of(
        mixed, [pod("m", "node-with-mig", {"nvidia.com/mig-7g.40gb": 9})]
    ).accelerators
    assert over.free == 0


class Published:
    """A DraSource: what a DRA driver publishes for each node."""

    def __init__(self, **by_node: tuple[Accelerator, ...]):
        self.by_node = by_node

    def accelerators(self, node: str) -> tuple[Accelerator, ...]:
        return self.by_node.get(node, ())

    def problems(self, node: str) -> tuple[str, ...]:
        return ()


def dra_gpus(count: int) -> Accelerator:
    return Accelerator(
        "nvidia", "H100-80GB", "NVIDIA H100 80GB HBM3", count, 80 * GIB, DRA,
        device_class="gpu.nvidia.com", driver="gpu.nvidia.com",
        devices=tuple(f"gpu-{i}" for i in range(count)), scheme="dra",
    )  # fmt: skip


def test_dra_devices_join_the_device_plugins_and_both_at_once_is_a_problem():
    h100 = NODES["gfd-h100"]
    name = h100["metadata"]["name"]
    both = inventory_of(h100, [], dra=Published(**{name: (dra_gpus(2),)}))
    assert [a.source for a in both.accelerators] == ["device-plugin", "dra"]
    assert both.problems == ("nvidia.com/gpu from both the device plugin and DRA (gpu.nvidia.com)",)
    assert both.to_dict()["accelerators"][1]["devices"] == ["gpu-0", "gpu-1"]


def test_a_dra_node_s_discovery_labels_are_no_missing_device_plugin():
    # GFD labels a DRA-managed node too; its device plugin does not run there
    starting = NODES["gfd-h100-plugin-not-running"]
    name = starting["metadata"]["name"]
    alone = inventory_of(starting, [])
    assert alone.problems and [a.count for a in alone.accelerators] == [0]
    with_dra = inventory_of(starting, [], dra=Published(**{name: (dra_gpus(8),)}))
    assert with_dra.problems == ()
    assert [(a.source, a.count) for a in with_dra.accelerators] == [("dra", 8)]
    other = copy.deepcopy(starting)
    other["metadata"]["name"] = "another"  # DRA devices are per node
    assert inventory_of(other, [], dra=Published(**{name: (dra_gpus(8),)})).problems


@pytest.mark.parametrize(
    "resource, vendor, partition",
    [
        ("nvidia.com/gpu", "nvidia", None),
        ("nvidia.com/gpu.shared", "nvidia", None),
        ("nvidia.com/mig-1g.10gb", "nvidia", "1g.10gb"),
        ("nvidia.com/mig-1g.10gb.shared", "nvidia", "1g.10gb"),
        ("amd.com/gpu", "amd", None),
        ("amd.com/cpx_nps4", "amd", "cpx_nps4"),
        ("amd.com/spx_nps1", "amd", "spx_nps1"),
        ("aws.amazon.com/neuron", "aws", None),
        ("aws.amazon.com/neurondevice", "aws", None),  # its deprecated name
        ("aws.amazon.com/neuroncore", "aws", "neuroncore"),
        ("google.com/tpu", "google", None),
        ("habana.ai/gaudi", "intel", None),
        ("gpu.intel.com/i915", "intel", None),
        ("gpu.intel.com/xe", "intel", None),
    ],
)
def test_the_vendor_table_knows_each_device_plugin_resource(resource, vendor, partition):
    assert is_accelerator_resource(resource)
    found = vendor_of(resource)
    assert found is not None and found.name == vendor
    assert found.partition_of(resource) == partition


@pytest.mark.parametrize(
    "resource",
    [
        "cpu",
        "vpc.amazonaws.com/efa",
        "nvidia.com/sriov_rdma",
        "nvidia.com/gpumem",  # HAMi: memory, not devices
        "gpu.intel.com/i915_monitoring",
        "amd.com/xgmi",
        "amd.com/cpx_nps3",
        "google.com/tpu-v5",
        "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
    ],
)
def test_other_resources_are_no_accelerators(resource):
    assert not is_accelerator_resource(resource) and vendor_of(resource) is None


def test_dra_drivers_name_their_vendor():
    drivers = ("gpu.nvidia.com", "gpu.amd.com", "neuron.aws.com", "gaudi.intel.com")
    assert [vendor_of_driver(d).name for d in drivers] == ["nvidia", "amd", "aws", "intel"]
    assert vendor_of_driver("compute-domain.nvidia.com") is None  # channels, not accelerators
