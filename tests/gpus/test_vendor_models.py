"""Who a non-NVIDIA accelerator is (gpuctl.gpus.vendor_models), beyond the real nodes of
tests/gpus/test_inventory.py: each label form the vendors' tools write, the cases where labels
disagree or say nothing, a job spec's accelerator names, and TPU hosts per slice."""

from __future__ import annotations

import pytest

from gpuctl.gpus import vendor_models as vm
from gpuctl.gpus.vendor_models import GIB, Named

AMD_GPU = "amd.com/gpu"


def test_amd_product_name_wins_over_the_device_id_and_only_names_models_it_knows():
    # the labeller writes sysfs product_name with spaces as "_" (cmd/k8s-node-labeller)
    both = {"amd.com/gpu.product-name": "AMD_Instinct_MI325X", "amd.com/gpu.device-id": "74a1"}
    assert vm.amd(both, AMD_GPU).model == "MI325X"
    odd = {"amd.com/gpu.product-name": "AMD_Radeon_Pro_W7900", "amd.com/gpu.device-id": "7408"}
    assert vm.amd(odd, AMD_GPU).model == "MI250X"  # no Instinct name: the ID tells
    unknown = {"amd.com/gpu.product-name": "AMD_Radeon_Pro_W7900"}
    assert vm.amd(unknown, AMD_GPU) == Named(None, "AMD_Radeon_Pro_W7900", None, None)


def test_amd_beta_count_forms_and_a_mixed_node():
    # heterogeneous nodes only get <prop>.<value>=<count> (createLabels)
    one = {"beta.amd.com/gpu.device-id.74b5": "4", "beta.amd.com/gpu.vram.192G": "4"}
    assert vm.amd(one, AMD_GPU) == Named("MI300X", None, 192 * GIB, "amd-labeller")
    two = {"beta.amd.com/gpu.device-id.74a1": "4", "beta.amd.com/gpu.device-id.740f": "4"}
    assert vm.amd(two, AMD_GPU).model is None  # two models on one node: neither is "the" model
    vfs = {"beta.amd.com/gpu.device-id.74a1": "4", "beta.amd.com/gpu.device-id.74b5": "4"}
    assert vm.amd(vfs, AMD_GPU).model == "MI300X"  # PF and VF IDs of one model


def test_amd_partitions_of_the_single_strategy_and_the_vm_size():
    cpx = {"amd.com/gpu.device-id": "74a1", "amd.com/gpu.compute-memory-partition": "cpx_nps4"}
    # amd.com/gpu counts CPX partitions: the model, no per-device memory
    assert vm.amd(cpx, AMD_GPU) == Named("MI300X", None, None, "amd-labeller", "cpx_nps4")
    spx = {**cpx, "amd.com/gpu.compute-memory-partition": "spx_nps1"}
    assert vm.amd(spx, AMD_GPU).partition is None
    aks = {"node.kubernetes.io/instance-type": "Standard_ND96isr_MI300X_v5"}
    assert vm.amd(aks, AMD_GPU) == Named("MI300X", None, 192 * GIB, "instance-type")
    assert vm.amd({"node.kubernetes.io/instance-type": "trn2.48xlarge"}, AMD_GPU).model is None


def test_neuron_karpenter_name_then_the_instance_type():
    karp = {"karpenter.k8s.aws/instance-accelerator-name": "inferentia2"}
    assert vm.neuron(karp, "aws.amazon.com/neuron").model == "Inferentia2"
    old = {"beta.kubernetes.io/instance-type": "trn1n.32xlarge"}
    assert vm.neuron(old, "aws.amazon.com/neuron") == Named(
        "Trainium", "trn1n.32xlarge", 32 * GIB, "instance-type"
    )
    assert vm.neuron({"node.kubernetes.io/instance-type": "p5.48xlarge"}, "x").model is None
    assert vm.instance({"node.kubernetes.io/instance-type": "trn2.48xlarge"}) == (
        "Trainium2",
        16,
        128,
        16,
    )


def test_tpu_and_gaudi_labels():
    v6e = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"}
    assert vm.tpu(v6e, "google.com/tpu") == Named("TPU-v6e", "tpu-v6e-slice", 32 * GIB, "gke")
    new = {"cloud.google.com/gke-tpu-accelerator": "tpu-v9-future"}
    assert vm.tpu(new, "google.com/tpu").model is None  # a generation the table lacks
    # Habana's feature discovery: the device type sanitised (GAUDI HL2000M → GAUDI_HL2000M)
    assert vm.gaudi({"habana.ai/device.type": "GAUDI_HL2000M"}, "habana.ai/gaudi").model == (
        "Gaudi"
    )
    assert vm.gaudi({"habana.ai/device.id": "1060"}, "habana.ai/gaudi").model == "Gaudi3"
    dl1 = {"node.kubernetes.io/instance-type": "dl1.24xlarge"}
    assert vm.gaudi(dl1, "habana.ai/gaudi").model == "Gaudi"
    assert vm.gaudi({"habana.ai/device.type": "GAUDI2"}, "gpu.intel.com/i915") == Named()


@pytest.mark.parametrize(
    "typed, models",
    [
        ("mi300x", ("MI300X",)),
        ("MI300X", ("MI300X",)),
        ("trainium2", ("Trainium2",)),
        ("trn2", ("Trainium2",)),
        ("inferentia2", ("Inferentia2",)),
        ("tpu-v5e", ("TPU-v5e",)),
        ("TPU v6e", ("TPU-v6e",)),
        ("v5p", ("TPU-v5p",)),
        ("gaudi2", ("Gaudi2",)),
        ("gaudi", ("Gaudi",)),
        ("h100", ()),  # NVIDIA's are gpuctl.gpus.identity's
        ("mi999", ()),
    ],
)
def test_names_a_job_spec_may_use(typed, models):
    assert vm.models_named(typed) == models


@pytest.mark.parametrize(
    "topology, machine, hosts_chips",
    [
        ("2x4", "ct5lp-hightpu-4t", 4),  # v5e 2x4 multi-host: 2 VMs of 4
        ("2x4", "ct5lp-hightpu-8t", 8),  # the single-host 2x4
        ("2x4", None, 4),  # xpk: 4 chips per VM
        ("1x1", None, 1),
        ("2x2x2", None, 4),
        ("4x4", "ct6e-standard-4t", 4),
    ],
)
def test_tpu_chips_per_host(topology, machine, hosts_chips):
    assert vm.chips_per_host(topology, machine) == hosts_chips
    assert vm.slice_chips(topology) % hosts_chips == 0


def test_every_table_row_names_a_model_of_the_catalogue():
    known = vm.models()
    for table in ("amd_device_ids", "gaudi_device_ids", "karpenter_accelerator_names", "tpus"):
        assert set(vm._table(table).values()) <= set(known), table
    assert {row[0] for row in vm._table("instances").values()} <= set(known)
