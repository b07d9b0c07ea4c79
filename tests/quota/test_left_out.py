"""A ResourceFlavor selects nodes by equal labels only: where nodes of one GPU model carry
different labels (tests/data/nodes: GFD on one H100 node, only gpuctl's gpu-type on the
other), `quota set` names the nodes its flavor leaves out, in the plan, in -o json (an
annotation on the flavor) and on the flavor it creates, and keeps that annotation current."""

import json

from gpuctl.k8s.placement import AUTO
from gpuctl.quota.core import kueue
from gpuctl.quota.core.plans import KueueWorld, plan_kueue
from tests.crd_schema import assert_valid_cr
from tests.gpu_cluster import seed
from tests.node_corpus import corpus

NODES = corpus()
GFD_H100, GPUCTL_H100 = NODES["gfd-h100"], NODES["gpuctl-h100"]
LEFT = "ip-10-1-2-3.ec2.internal (labelled gpu-type=h100)"


def test_the_flavor_names_the_nodes_of_its_model_it_does_not_select():
    (f,) = kueue.flavors_for([GFD_H100, GPUCTL_H100], AUTO, ())
    assert (f.label_key, f.gpu_type) == ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")
    assert f.left_out == LEFT and f.of_type == 2
    assert f.object()["metadata"]["annotations"] == {kueue.LEFT_OUT: LEFT}
    # the default cpu quota is what the selected node has, not the one left out
    assert f.cpu == kueue.format_quantity(
        kueue.quantity_total([GFD_H100["status"]["allocatable"]["cpu"]]), "cpu"
    )
    note = f.left_out_note()
    assert note is not None
    assert "of the 2 H100-80GB nodes these lack it and are left out of the quota" in note
    assert LEFT in note


def test_gke_and_gfd_l4_nodes_one_flavor_misses_the_other_and_says_so():
    (f,) = kueue.flavors_for([NODES["gfd-l4"], NODES["gke-l4"]], AUTO, ())
    missed = NODES["gke-l4"] if f.label_key == "nvidia.com/gpu.product" else NODES["gfd-l4"]
    assert f.left_out.startswith(missed["metadata"]["name"] + " (labelled ")


def test_nodes_that_all_carry_the_label_leave_nothing_out():
    other = {**GFD_H100, "metadata": {**GFD_H100["metadata"], "name": "xe9680-h100-b"}}
    (f,) = kueue.flavors_for([GFD_H100, other], AUTO, ())
    assert f.left_out == "" and f.left_out_note() is None
    assert "annotations" not in f.object()["metadata"]
    # an explicit label key: the flavors are its values, nothing to name
    assert all(not f.left_out for f in kueue.flavors_for([GFD_H100, GPUCTL_H100], "gpu-type", ()))


def test_the_plan_warns():
    q = kueue.check(kueue.TeamQuota("team-a", 8, {}))
    plan = plan_kueue(q, AUTO, (), None, KueueWorld(nodes=[GFD_H100, GPUCTL_H100]))
    assert len(plan.notes) == 1 and LEFT in plan.notes[0]
    assert plan.plan.to_dict()["notes"] == list(plan.notes)


def test_quota_set_warns_carries_it_in_json_and_keeps_the_annotation_current(cli, kube, kube_api):
    from kubernetes import client

    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor")
    seed(kube_api, GFD_H100, GPUCTL_H100)
    r = cli("quota", "set", "team-a", "--gpus", "8", "--dry-run", "-o", "json")
    assert r.code == 0, r
    assert LEFT in r.err and "left out of the quota" in r.err
    items = json.loads(r.out)["items"]
    (rf,) = [o for o in items if o["kind"] == "ResourceFlavor"]
    assert rf["metadata"]["annotations"] == {kueue.LEFT_OUT: LEFT}
    assert_valid_cr(rf)
    assert cli("quota", "set", "team-a", "--gpus", "8", "--yes").code == 0
    custom = client.CustomObjectsApi(kube_api)
    name = rf["metadata"]["name"]

    def annotations():
        got = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", name)
        return got["metadata"].get("annotations") or {}

    assert annotations()[kueue.LEFT_OUT] == LEFT
    # once the node carries GFD's label too, the flavor covers it and the annotation goes
    client.CoreV1Api(kube_api).patch_node(
        GPUCTL_H100["metadata"]["name"],
        {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}},
    )
    r = cli("quota", "set", "team-a", "--gpus", "8", "--yes")
    assert r.code == 0, r
    assert "left out" not in r.err and f"ResourceFlavor {name}: update" in r.err
    assert kueue.LEFT_OUT not in annotations()


def test_gpu_nodes_in_no_flavor_are_named():
    from tests.gpu_cluster import node

    q = kueue.check(kueue.TeamQuota("team-a", 8, {}))
    bare = node("bare", 8, gfd=False)  # nvidia.com/gpu allocatable, no GPU label at all
    plan = plan_kueue(q, AUTO, (), None, KueueWorld(nodes=[GFD_H100, bare]))
    assert plan.notes == (
        "GPU nodes in no ResourceFlavor, so outside every quota: bare (gpuctl names no GPU "
        "model from their labels; label them, or give --gpu-label-key with a label they carry)",
    )
    # an explicit key: the GPU nodes without it are in no flavor
    plan = plan_kueue(q, "gpu-type", (), None, KueueWorld(nodes=[GFD_H100, GPUCTL_H100]))
    assert [f.gpu_type for f in plan.flavors] == ["h100"]
    assert len(plan.notes) == 1 and "outside every quota: xe9680-h100 (no gpu-type" in plan.notes[0]
    # types asked for by name leave the others out on purpose: nothing to say
    plan = plan_kueue(q, "gpu-type", ("h100",), None, KueueWorld(nodes=[GFD_H100, GPUCTL_H100]))
    assert plan.notes == ()


def test_undoing_the_annotation_keeps_the_flavors_other_annotations():
    """A run removed the LEFT_OUT annotation from a flavor that had others; its undo puts
    that one back at its own path, never by replacing the whole annotation map."""
    applied = "kubectl.kubernetes.io/last-applied-configuration"
    before = {"metadata": {"annotations": {applied: "{}", kueue.LEFT_OUT: "n1"}}}
    rendered = {"metadata": {}}  # nothing left out now
    patch = kueue.annotation_patch(before, rendered)
    assert patch == [
        {"op": "remove", "path": "/metadata/annotations/gpuctl.io~1gpu-nodes-not-selected"}
    ]
    after = kueue.annotated_as(before, rendered)
    assert after == {"metadata": {"annotations": {applied: "{}"}}}
    assert kueue.annotation_patch(after, before) == [
        {
            "op": "add",
            "path": "/metadata/annotations/gpuctl.io~1gpu-nodes-not-selected",
            "value": "n1",
        }
    ]
    # a flavor with no annotations at all: the map is created
    bare = kueue.annotated_as(
        {"metadata": {}}, {"metadata": {"annotations": {kueue.LEFT_OUT: "n2"}}}
    )
    assert kueue.annotation_patch(bare, {"metadata": {}}) == [
        {"op": "remove", "path": "/metadata/annotations/gpuctl.io~1gpu-nodes-not-selected"}
    ]
