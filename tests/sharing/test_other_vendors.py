"""`gpuctl share` and `gpuctl mig configure` refuse nodes whose accelerators are another
vendor's, saying whose and which (real node objects of tests/data/nodes in the emulator), and
change nothing."""

from __future__ import annotations

import pytest

from tests.gpu_cluster import daemonset, seed
from tests.node_corpus import corpus

pytestmark = pytest.mark.integration

NODES = corpus()


@pytest.fixture
def cluster(kube_api):
    seed(
        kube_api,
        NODES["amd-mi300x-labeller"],
        NODES["neuron-trn2-karpenter"],
        NODES["gfd-h100"],
        daemonset("nvidia-device-plugin-daemonset", "gpu-operator", config_map="dp-config"),
    )
    return kube_api


def test_share_refuses_an_amd_and_a_trainium_node_naming_their_accelerators(cli, cluster, kube):
    amd = NODES["amd-mi300x-labeller"]["metadata"]["name"]
    trn = NODES["neuron-trn2-karpenter"]["metadata"]["name"]
    before = len(kube.requests())
    r = cli("share", "timeslice", "--replicas", "4", "--node", f"{amd},{trn}", "--yes")
    assert r.code == 1, r
    assert f"{amd}: its accelerators are amd MI300X (amd.com/gpu)" in r.err
    assert f"{trn}: its accelerators are aws Trainium2 (aws.amazon.com/neuron)" in r.err
    assert not [q for q in kube.requests()[before:] if q[0] in ("PATCH", "PUT", "POST")]


def test_mig_configure_refuses_another_vendor_s_node_before_labelling(cli, cluster, kube):
    amd = NODES["amd-mi300x-labeller"]["metadata"]["name"]
    before = len(kube.requests())
    r = cli("mig", "configure", "--node", amd, "-c", "all-1g.10gb", "--yes")
    assert r.code == 1, r
    assert "MIG is NVIDIA's" in r.err and f"{amd}: amd MI300X (amd.com/gpu)" in r.err
    assert "Device Config Manager" in r.err
    assert not [q for q in kube.requests()[before:] if q[0] in ("PATCH", "PUT", "POST")]
