"""`quota set` with Kueue on a cluster of every vendor (issue 39, point 3): a ResourceFlavor per
accelerator model, selected by the labels each vendor's tools write, and the ClusterQueue's
quota on each vendor's resource, validated against Kueue's CRDs. The nodes are the real node
corpus (tests/data/nodes, each file citing its source)."""

import copy
import json

import pytest

from gpuctl.common.errors import UsageError
from gpuctl.k8s import apis
from gpuctl.k8s.placement import AUTO
from gpuctl.quota.core import kueue
from tests.crd_schema import assert_valid_cr
from tests.node_corpus import corpus

NODES = ("gfd-h100", "amd-mi300x-labeller", "neuron-trn2-karpenter", "gke-tpu-v5e-2x4",
         "gaudi2-hfd")  # fmt: skip


def cluster() -> list[dict]:
    found = corpus()
    return [copy.deepcopy(found[stem]) for stem in NODES]


def team(**kw):
    return kueue.check(kueue.TeamQuota(**{"team": "team-a", "gpus": 8, "per_type": True, **kw}))


def by_resource(flavors):
    return {f.resource: f for f in flavors}


def test_a_flavor_per_model_selected_by_each_vendors_labels():
    flavors = by_resource(kueue.flavors_for(cluster(), AUTO, ()))
    assert set(flavors) == {
        "nvidia.com/gpu",
        "amd.com/gpu",
        "aws.amazon.com/neuron",
        "google.com/tpu",
        "habana.ai/gaudi",
    }
    spec = {r: f.object()["spec"] for r, f in flavors.items()}
    assert spec["amd.com/gpu"]["nodeLabels"] == {
        "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"
    }
    assert spec["aws.amazon.com/neuron"]["nodeLabels"] == {
        "karpenter.k8s.aws/instance-accelerator-name": "trainium2"
    }
    # a TPU flavor is one slice shape: accelerator and topology
    assert spec["google.com/tpu"]["nodeLabels"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "2x4",
    }
    assert spec["habana.ai/gaudi"]["nodeLabels"] == {"habana.ai/device.type": "GAUDI2"}
    # each tolerates its own vendor's taint
    assert spec["google.com/tpu"]["tolerations"] == [
        {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert flavors["google.com/tpu"].name == "tpu-v5e-2x4"
    assert flavors["aws.amazon.com/neuron"].cpu == "191450m"  # what its node has


@pytest.mark.parametrize("version", apis.KUEUE_VERSIONS)
def test_the_cluster_queue_gives_each_flavor_its_vendors_resource(version):
    flavors = kueue.flavors_for(cluster(), AUTO, ())
    q = team(cohort="ml", borrowing_limit=2, lending_limit=4)
    cq = kueue.cluster_queue(q, flavors, version)
    assert_valid_cr(cq)
    for f in flavors:
        rf = f.object()
        rf["apiVersion"] = apis.kueue_api_version(version)
        assert_valid_cr(rf)
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == [
        "cpu",
        "memory",
        "nvidia.com/gpu",
        "amd.com/gpu",
        "aws.amazon.com/neuron",
        "google.com/tpu",
        "habana.ai/gaudi",
    ]
    quota = {(g["name"], r["name"]): r for g in group["flavors"] for r in g["resources"][2:]}
    tpu = by_resource(flavors)["google.com/tpu"].name
    assert quota[tpu, "google.com/tpu"] == {
        "name": "google.com/tpu",
        "nominalQuota": "8",
        "borrowingLimit": "2",
        "lendingLimit": "4",
    }
    assert quota[tpu, "nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": "0"}
    assert all(g["resources"][0]["name"] == "cpu" for g in group["flavors"])


def test_gpu_type_names_another_vendors_model():
    flavors = kueue.flavors_for(cluster(), AUTO, ("mi300x",))
    assert [(f.resource, f.gpu_type) for f in flavors] == [
        ("amd.com/gpu", "AMD_Instinct_MI300X_OAM")
    ]
    q = team(per_type=False)
    (group,) = kueue.cluster_queue(q, flavors, "v1beta2")["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "amd.com/gpu"]


def test_a_model_no_label_tells_from_another_is_refused():
    nodes = cluster()
    twin = copy.deepcopy(nodes[1])  # an MI300X whose labels say MI300X's product name...
    twin["metadata"]["name"] = "mi300x-b"
    twin["metadata"]["labels"] = {
        k: v for k, v in twin["metadata"]["labels"].items() if "product-name" not in k
    }  # ...no longer: only its device id, which the other MI300X node carries too
    other = copy.deepcopy(twin)  # an MI325X labelled with the same device id
    other["metadata"]["name"] = "mi325x"
    other["metadata"]["labels"]["amd.com/gpu.product-name"] = "AMD_Instinct_MI325X_OAM"
    with pytest.raises(UsageError, match="carry no label that selects them"):
        kueue.flavors_for([twin, other], AUTO, ())


def test_quota_set_makes_them_through_the_api(cli, kube, kube_api):
    """`gpuctl quota set` against the API emulator serving Kueue's CRDs, seeded with the
    corpus nodes: the objects as stored are valid, and a second run changes nothing."""
    from kubernetes import client

    from tests.gpu_cluster import seed

    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor")
    seed(kube_api, *cluster())
    args = ("quota", "set", "team-a", "--gpus", "4", "--gpus-per-type", "--yes")
    r = cli(*args)
    assert r.code == 0, r
    custom = client.CustomObjectsApi(kube_api)
    flavors = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors")
    by_name = {f["metadata"]["name"]: f for f in flavors["items"]}
    assert by_name["tpu-v5e-2x4"]["spec"]["nodeLabels"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "2x4",
    }
    cq = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a")
    for obj in (*by_name.values(), cq):
        assert_valid_cr(obj)
    (group,) = cq["spec"]["resourceGroups"]
    assert len(group["flavors"]) == 5 and "habana.ai/gaudi" in group["coveredResources"]
    r = cli(*args)
    assert r.code == 0 and "nothing to change" in r.err, r
    # quota list: each flavor's own accelerator (and cpu, memory), not the others' zeros
    listed = cli("quota", "list", "-o", "json")
    assert listed.code == 0, listed
    doc = json.loads(listed.out)
    rows = next(v for k, v in doc.items() if isinstance(v, list) and v and "flavor" in v[0])
    shown = {
        (row["flavor"], row["resource"]) for row in rows if row["resource"] not in ("cpu", "memory")
    }
    assert shown == {
        ("gaudi2", "habana.ai/gaudi"),
        ("h100-80gb", "nvidia.com/gpu"),
        ("mi300x", "amd.com/gpu"),
        ("tpu-v5e-2x4", "google.com/tpu"),
        ("trainium2", "aws.amazon.com/neuron"),
    }


def test_the_resource_quota_limits_each_vendors_devices(cli, kube, kube_api):
    """The ResourceQuota engine on the same nodes: `requests.<resource>` for each vendor's
    device resource the nodes offer (not NeuronCores), valid for the API (the emulator
    stores it; kubectl-equivalent schema checked by the existing ResourceQuota tests)."""
    from kubernetes import client

    from tests.gpu_cluster import seed

    seed(kube_api, *cluster())
    r = cli("quota", "set", "team-a", "--gpus", "4", "--engine", "resourcequota", "--yes")
    assert r.code == 0, r
    quota = client.CoreV1Api(kube_api).read_namespaced_resource_quota("gpuctl-gpus", "team-a")
    assert quota.spec.hard == {
        "requests.nvidia.com/gpu": "4",
        "requests.amd.com/gpu": "4",
        "requests.aws.amazon.com/neuron": "4",
        "requests.google.com/tpu": "4",
        "requests.habana.ai/gaudi": "4",
    }
    listed = cli("quota", "list", "-o", "json")
    assert listed.code == 0, listed
    resources = {
        row["resource"] for row in json.loads(listed.out)["quotas"] if row["namespace"] == "team-a"
    }
    assert "google.com/tpu" in resources and "aws.amazon.com/neuron" in resources


def test_lint_checks_each_vendors_quota_against_its_nodes():
    from gpuctl.quota.core.queue_usage import ERROR, WARNING, lint

    nodes = cluster()
    flavors = kueue.flavors_for(nodes, AUTO, ())
    cq = kueue.cluster_queue(team(gpus=4), flavors, "v1beta2")
    rows, findings = lint([cq], [f.object() for f in flavors], nodes)
    # a row per flavor for its own accelerator only (the others' 0 are left out)
    assert {(r.flavor, r.resource, r.allocatable) for r in rows} == {
        ("gaudi2", "habana.ai/gaudi", "8"),
        ("h100-80gb", "nvidia.com/gpu", "8"),
        ("mi300x", "amd.com/gpu", "8"),
        ("tpu-v5e-2x4", "google.com/tpu", "4"),
        ("trainium2", "aws.amazon.com/neuron", "16"),
    }
    assert not [f for f in findings if f.level == ERROR]
    # 4 of the TPU host's 4 chips are in the quota: no warning for it; 4 of 8 elsewhere
    warned = {f.flavor for f in findings if f.level == WARNING}
    assert warned == {"gaudi2", "h100-80gb", "mi300x", "trainium2"}
    over = kueue.cluster_queue(team(gpus=6), flavors, "v1beta2")
    _, findings = lint([over], [f.object() for f in flavors], nodes)
    assert [f.flavor for f in findings if f.level == ERROR] == ["tpu-v5e-2x4", "tpu-v5e-2x4"]


def _borrower(cq: dict, name: str) -> dict:
    """CQ as a team with no accelerator quota of its own: every vendor's at 0 (it is
    admitted by borrowing from its cohort, where it has one)."""
    from gpuctl.gpus.vendors import vendor_of

    out = copy.deepcopy(cq)
    out["metadata"]["name"] = name
    for group in out["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                if vendor_of(r["name"]) is not None:
                    r["nominalQuota"] = "0"
    return out


VENDOR_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron", "google.com/tpu",
                    "habana.ai/gaudi")  # fmt: skip


@pytest.mark.parametrize("resource", VENDOR_RESOURCES)
def test_a_zero_quota_is_covered_on_its_vendors_flavor_and_filler_on_the_others(resource):
    """Kueue counts a resource listed at nominalQuota 0 as covered (queue_usage.fillers):
    list and lint show it at 0 on its own vendor's flavor, and leave out the zeros one
    resource group makes every other vendor's flavor list, by one rule."""
    from gpuctl.quota.core.queue_usage import lint, queue_rows

    nodes = cluster()
    flavors = kueue.flavors_for(nodes, AUTO, ())
    own = by_resource(flavors)[resource].name
    cq = kueue.cluster_queue(team(gpus=4), flavors, "v1beta2")
    queues = [cq, _borrower(cq, "team-b")]
    listed = {(r.cluster_queue, r.flavor, r.nominal) for r in queue_rows(queues) if r.resource == resource}  # fmt: skip
    assert listed == {("team-a", own, "4"), ("team-b", own, "0")}
    objects = [f.object() for f in flavors]
    for linted in (queues, queues[1:]):  # the borrower alone: its flavors' vendors from nodes
        rows, _ = lint(linted, objects, nodes)
        assert {r.flavor for r in rows if r.resource == resource} == {own}


def test_a_zero_quota_in_use_or_limited_is_shown():
    from gpuctl.quota.core.queue_usage import queue_rows

    flavors = kueue.flavors_for(cluster(), AUTO, ())
    cq = kueue.cluster_queue(team(gpus=4), flavors, "v1beta2")
    (group,) = cq["spec"]["resourceGroups"]
    h100 = next(f for f in group["flavors"] if f["name"] == "h100-80gb")
    next(r for r in h100["resources"] if r["name"] == "amd.com/gpu")["borrowingLimit"] = "2"
    cq["status"] = {"flavorsReservation": [{"name": "mi300x", "resources": [{"name": "google.com/tpu", "total": "1", "borrowed": "1"}]}]}  # fmt: skip
    shown = {(r.flavor, r.resource) for r in queue_rows([cq])}
    assert {("h100-80gb", "amd.com/gpu"), ("mi300x", "google.com/tpu")} <= shown
    assert ("h100-80gb", "google.com/tpu") not in shown
