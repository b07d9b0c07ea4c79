"""Placement on real node objects (tests/data/nodes): the affinity a gpu_type renders selects
the nodes that have that GPU, whole; MIG and shared requests ask for what the nodes offer;
the fit check reads the same resolver."""

from __future__ import annotations

import pytest

from gpuctl.k8s.fit import check_fit
from gpuctl.k8s.labels import GPU_TOLERATION
from gpuctl.k8s.objects import labels_of
from gpuctl.k8s.placement import GpuRequest, place, terms_match
from tests.node_corpus import corpus

NODES = corpus()
CLUSTER = list(NODES.values())

WHOLE = {
    "h100": {"gfd-h100", "gfd-h100-unhealthy", "gfd-h100-plugin-not-running", "gpuctl-h100"},
    "a100": {
        "gfd-a100-old-name",
        "gfd-a100-80gb",
        "gfd-a100-mig-mixed",  # mixed: a GPU may be left whole
        "karpenter-p4d",
        "aks-a100",
    },
    "a100-80gb": {"gfd-a100-80gb", "aks-a100"},
    "t4": {"gfd-t4"},
    "l4": {"gfd-l4", "gke-l4"},
}
NOT_OFFLINE = {"aks-a100"}  # an AKS VM size is only read from a node (a pattern, not a value)


def selected(terms) -> set[str]:
    return {stem for stem, n in NODES.items() if terms_match(labels_of(n), terms)}


@pytest.mark.parametrize("gpu_type", sorted(WHOLE))
def test_gpu_type_selects_the_nodes_with_that_gpu_with_the_cluster_read(gpu_type):
    where = place(GpuRequest(gpus=1, gpu_types=(gpu_type,)), nodes=CLUSTER)
    assert where.resource == "nvidia.com/gpu"
    assert selected(where.terms) == WHOLE[gpu_type]


@pytest.mark.parametrize("gpu_type", sorted(WHOLE))
def test_gpu_type_selects_the_nodes_with_that_gpu_without_a_cluster(gpu_type):
    where = place(GpuRequest(gpus=1, gpu_types=(gpu_type,)))
    assert selected(where.terms) == WHOLE[gpu_type] - NOT_OFFLINE
    assert "every label scheme" in where.scheme


def test_an_explicit_label_key_wins_and_gets_the_values_of_its_scheme():
    where = place(GpuRequest(gpus=1, gpu_types=("h100",)), "nvidia.com/gpu.product", CLUSTER)
    assert [e["key"] for t in where.terms for e in t] == ["nvidia.com/gpu.product"]
    assert selected(where.terms) == WHOLE["h100"] - {"gpuctl-h100"}
    offline = place(GpuRequest(gpus=1, gpu_types=("h100",)), "nvidia.com/gpu.product")
    assert "NVIDIA-H100-80GB-HBM3" in offline.terms[0][0]["values"]
    assert place(GpuRequest(gpus=1, gpu_types=("h100",)), "gpu-type").terms == (
        ({"key": "gpu-type", "operator": "In", "values": ["h100"]},),
    )


def test_whole_gpus_without_a_type_stay_off_mig_slices_and_shared_replicas():
    where = place(GpuRequest(gpus=1), nodes=CLUSTER)
    assert selected(where.terms) == set(NODES) - {
        "gfd-a100-mig-single",
        "gfd-a100-mig-invalid",
        "gfd-t4-shared",
        "gke-a100-partitioned",
    }


def test_a_mig_request_asks_for_the_resource_the_mig_nodes_offer():
    single = place(GpuRequest(mig="1g.5gb"), nodes=CLUSTER)  # only single-strategy nodes
    assert single.resource == "nvidia.com/gpu"
    assert selected(single.terms) == {"gfd-a100-mig-single", "gke-a100-partitioned"}
    mixed = place(GpuRequest(mig="7g.40gb"), nodes=CLUSTER)
    assert (mixed.resource, mixed.terms) == ("nvidia.com/mig-7g.40gb", ())
    assert NODES["gfd-a100-mig-mixed"]["status"]["allocatable"][mixed.resource] == "4"
    offline = place(GpuRequest(mig="1g.5gb"))
    assert offline.resource == "nvidia.com/mig-1g.5gb" and "mixed strategy" in offline.notes[0]


def test_a_cluster_offering_a_profile_both_ways_uses_one_and_says_so():
    import copy

    single = copy.deepcopy(NODES["gfd-a100-mig-single"])
    single["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB-MIG-7g.40gb"
    for part in ("capacity", "allocatable"):
        single["status"][part]["nvidia.com/gpu"] = "2"
    where = place(GpuRequest(mig="7g.40gb"), nodes=[NODES["gfd-a100-mig-mixed"], single])
    assert where.resource == "nvidia.com/mig-7g.40gb"  # 4 slices there against 2
    assert "offered two ways" in where.notes[0] and "uses the mixed ones" in where.notes[0]


def test_a_shared_request_asks_for_what_the_shared_nodes_offer():
    plain = place(GpuRequest(gpus=1, shared=True, gpu_types=("t4",)), nodes=CLUSTER)
    assert plain.resource == "nvidia.com/gpu" and selected(plain.terms) == {"gfd-t4-shared"}
    renamed = place(GpuRequest(gpus=1, shared=True, gpu_types=("a10g",)), nodes=CLUSTER)
    assert renamed.resource == "nvidia.com/gpu.shared"
    assert selected(renamed.terms) == {"gfd-a10g-shared-renamed"}


def check(gpu_type: str, gpus: int):
    where = place(GpuRequest(gpus=gpus, gpu_types=(gpu_type,)), nodes=CLUSTER)
    return check_fit(CLUSTER, [], where, 1, [GPU_TOLERATION])


def test_fit_on_the_corpus_tells_unhealthy_and_starting_nodes_apart():
    report = check("h100", 8)
    fits = {n.name: n for n in report.nodes}
    assert report.can_ever_fit
    assert fits["xe9680-h100"].slots_ever == 1 and fits["ip-10-1-2-3.ec2.internal"].slots_ever == 1
    assert fits["xe9680-h100-degraded"].reason == "7 nvidia.com/gpu, a worker needs 8"
    assert fits["xe9680-h100-starting"].reason == (
        "no nvidia.com/gpu (the device plugin advertises no GPUs yet)"
    )
    assert fits["g4dn-t4"].reason == "not H100-80GB"


def test_a_whole_gpu_request_refused_where_only_shared_replicas_are_says_so():
    report = check("t4", 2)
    assert not report.can_ever_fit
    assert report.never_fits_reason().endswith(
        "1 node with T4 offers them only as MIG slices or time-shared replicas "
        "(ask with mig: or shared: true)"
    )
