"""The GPU identity resolver on real node objects (tests/data/nodes, each citing its source)."""

from __future__ import annotations

import pytest

from gpuctl.k8s.nodes import gpus_of
from tests.node_corpus import DIR, corpus

NODES = corpus()
# file → (model, scheme, MIG strategy, slices, sharing, whole GPUs allocatable)
EXPECTED = {
    "gfd-h100": ("H100-80GB", "gfd", "none", {}, "none", 8),
    "gfd-h100-unhealthy": ("H100-80GB", "gfd", "none", {}, "none", 7),
    "gfd-h100-plugin-not-running": ("H100-80GB", "gfd", "none", {}, "none", 0),
    "gfd-a100-old-name": ("A100-40GB", "gfd", "none", {}, "none", 8),
    "gfd-a100-80gb": ("A100-80GB", "gfd", "none", {}, "none", 8),
    "gfd-a100-mig-single": ("A100-40GB", "gfd", "single", {"1g.5gb": 14}, "none", 0),
    "gfd-a100-mig-mixed": ("A100-40GB", "gfd", "mixed", {"7g.40gb": 4}, "none", 0),
    "gfd-a100-mig-invalid": ("A100-80GB", "gfd", "single", {}, "none", 0),
    "gfd-t4": ("T4", "gfd", "none", {}, "none", 1),
    "gfd-t4-shared": ("T4", "gfd", "none", {}, "time-slicing", 0),
    "gfd-a10g-shared-renamed": ("A10G", "gfd", "none", {}, "time-slicing", 0),
    "gfd-l4": ("L4", "gfd", "none", {}, "none", 1),
    "karpenter-p4d": ("A100-40GB", "karpenter", "none", {}, "none", 8),
    "eks-instance-type-g5": ("A10G", "instance-type", "none", {}, "none", 1),
    "gke-l4": ("L4", "gke", "none", {}, "none", 1),
    "gke-a100-partitioned": ("A100-40GB", "gke", "single", {"1g.5gb": 7}, "none", 0),
    "aks-a100": ("A100-80GB", "aks", "none", {}, "none", 1),
    "gpuctl-h100": ("H100-80GB", "gpuctl", "none", {}, "none", 8),
    # other vendors' nodes: no NVIDIA GPU (their inventory: tests/gpus/test_inventory.py)
    **{
        stem: (None, None, "none", {}, "none", 0)
        for stem in (
            "amd-mi300x-vf",
            "amd-labelled-no-capacity",
            "amd-mixed-partitions",
            "amd-mi300x-labeller",
            "neuron-inf1-eks",
            "neuron-inf2-instance-type",
            "neuron-trn2-karpenter",
            "gke-tpu-v5e-2x4",
            "gaudi-hfd",
            "gaudi2-hfd",
        )
    },
}


def test_every_corpus_file_is_checked_and_cites_its_source():
    assert set(NODES) == set(EXPECTED)
    for stem in NODES:
        with open(f"{DIR}/{stem}.yaml", encoding="utf-8") as f:
            header = f.read().split("apiVersion:", 1)[0]
        assert "http" in header or "gpuctl/" in header, stem


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_the_resolver_reads_each_real_node(stem):
    g = gpus_of(NODES[stem])
    model, scheme, strategy, slices, sharing, whole = EXPECTED[stem]
    assert (g.model, g.scheme, g.mig_strategy, dict(g.mig_slices), g.sharing, g.whole_gpus) == (
        model,
        scheme,
        strategy,
        slices,
        sharing,
        whole,
    )


def test_capacity_allocatable_and_a_plugin_not_running_are_told_apart():
    assert gpus_of(NODES["gfd-h100-unhealthy"]).unhealthy == {"nvidia.com/gpu": 1}
    starting = gpus_of(NODES["gfd-h100-plugin-not-running"])
    assert not starting.plugin_running and starting.count == 8 and starting.unhealthy == {}
    assert gpus_of(NODES["gfd-h100"]).plugin_running


def test_count_memory_and_sharing_details():
    assert (gpus_of(NODES["karpenter-p4d"]).count, gpus_of(NODES["karpenter-p4d"]).memory_mib) == (
        8,
        40960,
    )
    assert gpus_of(NODES["eks-instance-type-g5"]).count == 1  # from the shipped instance table
    shared = gpus_of(NODES["gfd-t4-shared"])
    assert (shared.replicas, shared.count, shared.shared_resource) == (8, 1, None)
    renamed = gpus_of(NODES["gfd-a10g-shared-renamed"])
    assert (renamed.replicas, renamed.shared_resource) == (4, "nvidia.com/gpu.shared")
    invalid = gpus_of(NODES["gfd-a100-mig-invalid"])
    assert invalid.mig_invalid and invalid.mig_config == "all-balanced"
    assert gpus_of(NODES["gfd-a100-mig-single"]).single_profile == "1g.5gb"
