"""`gpuctl quota set` with Kueue ties the flavors to a Topology of the nodes' network levels
(Kueue's Topology Aware Scheduling), and `quota lint` flags flavors that are not; against
the API emulator serving Kueue's CRDs (v0.19.2, Topology included), on node sets from
tests/data/topology (EKS p4de with EC2's network-node layers, GKE A3 Ultra; each file cites
its sources)."""

from __future__ import annotations

import json

import pytest

from tests.crd_schema import assert_valid_cr
from tests.gpu_cluster import mark, node, seed, seed_custom, writes
from tests.topology_corpus import layout

KUEUE = ("ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology")
GROUP = "kueue.x-k8s.io"
EKS_LEVELS = [
    "topology.kubernetes.io/zone",
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "kubernetes.io/hostname",
]
P4DE = "p4de-24xlarge"  # the flavor of node.kubernetes.io/instance-type=p4de.24xlarge


@pytest.fixture
def custom(kube_api):
    from kubernetes import client

    return client.CustomObjectsApi(kube_api)


def _objects(custom, plural, version="v1beta2"):
    return custom.list_cluster_custom_object(GROUP, version, plural)["items"]


def _set(cli, team, *args, key="node.kubernetes.io/instance-type"):
    return cli("quota", "set", team, "--gpu-label-key", key, "--gpus", "8", *args)


def test_set_creates_a_topology_of_the_eks_levels_and_ties_the_flavor_to_it(
    cli, kube, kube_api, custom
):
    kube.install_crds(*KUEUE)
    seed(kube_api, *layout("eks-p4de"))
    r = _set(cli, "team-a", "--dry-run")
    assert r.code == 0, r
    assert _objects(custom, "topologies") == []  # a dry run creates nothing
    r = _set(cli, "team-a")
    assert r.code == 0, r
    (topology,) = _objects(custom, "topologies")
    assert_valid_cr(topology)
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == EKS_LEVELS
    name = topology["metadata"]["name"]
    assert (
        f"Topology {name}: create" in r.err and "levels: (none) → " + ", ".join(EKS_LEVELS) in r.err
    )
    (flavor,) = _objects(custom, "resourceflavors")
    assert_valid_cr(flavor)
    assert flavor["spec"]["topologyName"] == name
    assert flavor["spec"]["nodeLabels"] == {"node.kubernetes.io/instance-type": "p4de.24xlarge"}
    # a second team: the same Topology and flavor, left as they are
    since = mark(kube)
    r = _set(cli, "team-b")
    assert r.code == 0, r
    assert f"Topology {name}: unchanged" in r.err and f"ResourceFlavor {P4DE}: unchanged" in r.err
    assert not [w for w in writes(kube, since) if "topologies" in w[1] or "resourceflavors" in w[1]]


def test_an_existing_topology_with_the_same_levels_is_used_as_it_is(cli, kube, kube_api, custom):
    kube.install_crds(*KUEUE)
    seed(kube_api, *layout("eks-p4de"))
    theirs = {
        "apiVersion": f"{GROUP}/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": k} for k in EKS_LEVELS]},
    }
    seed_custom(kube_api, theirs)
    r = _set(cli, "team-a")
    assert r.code == 0 and "Topology default: reused" in r.err, r
    assert [t["metadata"]["name"] for t in _objects(custom, "topologies")] == ["default"]
    assert _objects(custom, "resourceflavors")[0]["spec"]["topologyName"] == "default"


def test_nodes_without_network_labels_get_no_topology(cli, kube, kube_api, custom):
    kube.install_crds(*KUEUE)
    seed(kube_api, node("gpu-1", labels={"topology.kubernetes.io/zone": "us-east-1a"}))
    r = _set(cli, "team-a", key="nvidia.com/gpu.product")
    assert r.code == 0, r
    assert _objects(custom, "topologies") == [] and "Topology" not in r.err
    assert "topologyName" not in _objects(custom, "resourceflavors")[0]["spec"]


def test_every_flavor_of_the_queue_gets_a_topology_when_one_does(cli, kube, kube_api, custom):
    """Kueue admits a pod set that asks for no topology only onto flavors without one when
    a ClusterQueue mixes them: so the L40S flavor, whose nodes have no network labels, is
    tied to a Topology of the levels they have."""
    kube.install_crds(*KUEUE)
    l40s = node("l40s-1", labels={"node.kubernetes.io/instance-type": "g6e.48xlarge", "kubernetes.io/hostname": "l40s-1"})  # fmt: skip
    seed(kube_api, *layout("eks-p4de"), l40s)
    r = _set(cli, "team-a", "--gpus-per-type")
    assert r.code == 0, r
    levels = {
        t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]]
        for t in _objects(custom, "topologies")
    }
    tied = {f["metadata"]["name"]: f["spec"]["topologyName"] for f in _objects(custom, "resourceflavors")}  # fmt: skip
    assert levels[tied[P4DE]] == EKS_LEVELS
    assert levels[tied["g6e-48xlarge"]] == ["kubernetes.io/hostname"]


def test_a_cluster_serving_kueue_v1beta1_gets_a_v1beta1_topology(cli, kube, kube_api, custom):
    kube.install_crds(*KUEUE, served=("v1beta1",))
    seed(kube_api, *layout("eks-p4de"))
    r = _set(cli, "team-a")
    assert r.code == 0, r
    (topology,) = _objects(custom, "topologies", "v1beta1")
    assert topology["apiVersion"] == f"{GROUP}/v1beta1"
    assert_valid_cr(topology)


def test_a_kueue_without_topology_says_so_and_ties_nothing(cli, kube, kube_api, custom):
    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor")  # before Kueue 0.9
    seed(kube_api, *layout("eks-p4de"))
    r = _set(cli, "team-a")
    assert r.code == 0, r
    assert "this Kueue serves no Topology" in r.err
    assert "topologyName" not in _objects(custom, "resourceflavors")[0]["spec"]


def _flavor(name, labels, topology=None):
    spec = {"nodeLabels": labels, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}  # fmt: skip
    if topology:
        spec["topologyName"] = topology
    meta = {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpuctl"}}
    return {"apiVersion": f"{GROUP}/v1beta2", "kind": "ResourceFlavor", "metadata": meta, "spec": spec}  # fmt: skip


def test_a_flavors_topology_is_kept_and_its_labels_are_not_changed_under_it(
    cli, kube, kube_api, custom
):
    """Kueue: topologyName, nodeLabels and tolerations are immutable once topologyName is set."""
    kube.install_crds(*KUEUE)
    seed(kube_api, *layout("eks-p4de"))
    seed_custom(kube_api, _flavor(P4DE, {"node.kubernetes.io/instance-type": "p4de.24xlarge"}, "racks"))  # fmt: skip
    r = _set(cli, "team-a")
    assert r.code == 0, r
    assert _objects(custom, "resourceflavors")[0]["spec"]["topologyName"] == "racks"
    assert _objects(custom, "topologies") == []  # none made that no flavor names
    custom.delete_cluster_custom_object(GROUP, "v1beta2", "resourceflavors", P4DE)
    seed_custom(kube_api, _flavor(P4DE, {"gpu-type": "a100"}, "racks"))
    since = mark(kube)
    r = _set(cli, "team-b")
    assert r.code == 1, r
    assert f"ResourceFlavor {P4DE} is tied to Topology racks" in r.err and "nodeLabels" in r.err
    assert writes(kube, since) == []


def test_lint_flags_flavors_without_topology_on_topology_nodes_and_missing_topologies(
    cli, kube, kube_api
):
    kube.install_crds(*KUEUE)
    seed(kube_api, *layout("eks-p4de"), *layout("gke-a3-ultra"))
    gke = layout("gke-a3-ultra")[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"]
    seed_custom(kube_api, _flavor("p4de", {"node.kubernetes.io/instance-type": "p4de.24xlarge"}))
    seed_custom(kube_api, _flavor("a3", {"node.kubernetes.io/instance-type": gke}, "gone"))
    quota = [{"name": r, "nominalQuota": q} for r, q in (("cpu", "1"), ("memory", "1Gi"), ("nvidia.com/gpu", "8"))]  # fmt: skip
    groups = [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": f, "resources": quota} for f in ("a3", "p4de")]}]  # fmt: skip
    seed_custom(kube_api, {"apiVersion": f"{GROUP}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": {"namespaceSelector": {}, "resourceGroups": groups}})  # fmt: skip
    r = cli("quota", "lint", "-o", "json")
    found = {f["message"] for f in json.loads(r.out)["findings"]}
    assert any(
        m.startswith("flavor p4de has no topologyName")
        and "topology.k8s.aws/network-node-layer-3" in m
        for m in found
    ), found
    assert any(
        m.startswith("flavor a3 names Topology gone, which does not exist") for m in found
    ), found
    assert r.code == 1  # the missing Topology is an error
