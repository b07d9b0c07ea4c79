"""Topology names resolved on real label sets (tests/data/topology), the levels a Kueue
Topology gets, and the domains nodes form (gpuctl.gpus.topology)."""

import pytest

from gpuctl.common.errors import GpuctlError
from gpuctl.common.k8s_names import label_key
from gpuctl.gpus import topology
from gpuctl.gpus.topology import TopologyError, levels, resolve
from tests.topology_corpus import labels

EKS = labels("eks-p4de")
GKE = labels("gke-a3-ultra")
GB200 = labels("gfd-gb200-clique")


@pytest.mark.parametrize(
    "nodes,within,key",
    [
        (EKS, "block", "topology.k8s.aws/network-node-layer-3"),
        (EKS, "spine", "topology.k8s.aws/network-node-layer-2"),
        (EKS, "zone", "topology.kubernetes.io/zone"),
        (EKS, "host", "kubernetes.io/hostname"),
        (GKE, "block", "cloud.google.com/gce-topology-subblock"),
        (GKE, "spine", "cloud.google.com/gce-topology-block"),
        (GKE, "host", "cloud.google.com/gce-topology-host"),
        (GB200, "nvlink", "nvidia.com/gpu.clique"),
        # a literal key the nodes carry is itself
        (EKS, "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-1"),
    ],
)
def test_names_resolve_to_the_label_the_cloud_uses(nodes, within, key):
    assert resolve(within, nodes.values()) == key


def test_nvlink_on_nodes_without_cliques_names_what_they_carry():
    with pytest.raises(TopologyError) as e:
        resolve("nvlink", EKS.values())
    text = str(e.value)
    assert "nvidia.com/gpu.clique" in text  # what was looked for
    assert "topology.k8s.aws/network-node-layer-3 (block)" in text  # what is there
    assert "\n" not in text
    assert isinstance(e.value, GpuctlError)


def test_a_key_no_node_has_is_refused():
    with pytest.raises(TopologyError, match="no node carries the label 'example.com/rack'"):
        resolve("example.com/rack", GKE.values())
    with pytest.raises(TopologyError, match="no nodes were found"):
        resolve("block", [])


def test_levels_are_widest_first_hostname_last_in_the_clouds_order():
    assert levels(EKS.values()) == [
        "topology.kubernetes.io/zone",
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
        "kubernetes.io/hostname",
    ]
    # GKE's own order (its TAS page): block, subblock, host, hostname
    assert levels(GKE.values())[1:] == [
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host",
        "kubernetes.io/hostname",
    ]
    assert levels(GB200.values()) == ["nvidia.com/gpu.clique", "kubernetes.io/hostname"]


def test_every_name_has_candidates_that_are_label_keys():
    for name, keys in topology.NAMES.items():
        assert keys and all(label_key(k) for k in keys), name
        assert topology.assumed(name) == keys[0]
    assert set(topology.LEVELS) >= {k for ks in topology.NAMES.values() for k in ks}
