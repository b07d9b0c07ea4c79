"""How many GPUs a node has: physical ones, MIG slices apart (gpuctl.gpus.identity)."""


def test_physical_gpus_mig_slices_apart_on_real_nodes():
    """tests/data/nodes: GFD's nvidia.com/gpu.count is the slices under the single MIG
    strategy (its README: "Number of MIG devices") and the physical GPUs otherwise."""
    from gpuctl.gpus.identity import GpuCount
    from gpuctl.k8s.nodes import gpus_of
    from tests.node_corpus import corpus

    nodes = corpus()
    expected = {
        "gfd-a100-mig-single": GpuCount(2, 2, 14),  # 2 A100 40GB as all-1g.5gb
        "gfd-a100-mig-mixed": GpuCount(4, 4, 4),  # 4 × 7g.40gb
        "gke-a100-partitioned": GpuCount(1, 1, 7),  # nvidia.com/gpu: 7 partitions
        "gfd-t4-shared": GpuCount(1),  # 8 time-shared replicas of one T4
        "gfd-a10g-shared-renamed": GpuCount(1),
        "gfd-h100": GpuCount(8),
        "gfd-a100-mig-invalid": GpuCount(unknown=1),  # GFD counts 0 there
    }
    assert {name: gpus_of(nodes[name]).physical for name in expected} == expected
    assert sum(expected.values(), GpuCount()).text() == (
        "17 GPUs, 7 split into 25 MIG slices (and the uncounted GPUs of 1 node)"
    )


def test_the_fewest_gpus_that_hold_mig_slices():
    from gpuctl.gpus import geometry

    a100 = next(m for m in geometry.models() if m.short_name == "A100-80GB")
    assert a100.gpus_for({"1g.10gb": 56}) == 8  # 7 a GPU
    assert a100.gpus_for({"3g.40gb": 16}) == 8  # 2 a GPU (6 of its 7 compute slices)
    assert a100.gpus_for({"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}) == 1
    assert a100.gpus_for({"7g.80gb": 3, "1g.10gb": 1}) == 4
