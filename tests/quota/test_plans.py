"""What `quota set` plans from what the cluster holds (pure): the engine, the steps and
their order, the fields that change, and when to ask before carrying it out."""

import pytest

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.quota.core import kueue, plans
from gpuctl.quota.core.rules import QUOTA_NAME
from tests.gpu_cluster import node

KEY = "nvidia.com/gpu.product"
H100 = "NVIDIA-H100-80GB-HBM3"
FLAVOR = "nvidia-h100-80gb-hbm3"


def team(**kw):
    return kueue.check(kueue.TeamQuota(**{"team": "team-a", "gpus": 8, **kw}))


def world(**kw):
    return plans.KueueWorld(**{"nodes": [node("gpu-1", labels={KEY: H100})], **kw})


def targets(plan):
    return [(s.action, s.target) for s in plan.plan.steps]


# --- the engine ---------------------------------------------------------------------


def test_without_a_cluster_the_engine_is_kueue_and_that_is_said():
    chosen = plans.choose_engine(None, False, None, [], True)
    assert (chosen.name, chosen.version) == (plans.KUEUE, None)
    assert "as no cluster says which" in chosen.notes[0]
    assert plans.choose_engine(plans.RESOURCE_QUOTA, False, None, [], True).notes == ()


def test_on_a_cluster_the_engine_follows_what_it_serves():
    assert plans.choose_engine(None, True, "v1beta2", [], False).name == plans.KUEUE
    assert plans.choose_engine(None, True, None, [], False).name == plans.RESOURCE_QUOTA
    with pytest.raises(UsageError, match="--cohort need Kueue"):
        plans.choose_engine(None, True, None, ["--cohort"], False)


def test_kueue_on_a_cluster_without_it_is_planned_only_in_a_dry_run():
    with pytest.raises(GpuctlError, match="this cluster has no Kueue"):
        plans.choose_engine(plans.KUEUE, True, None, [], False)
    chosen = plans.choose_engine(plans.KUEUE, True, None, [], True)
    assert chosen.notes == ("Kueue is not installed: these objects could not be created yet",)


# --- a ResourceQuota ----------------------------------------------------------------


def test_a_new_team_gets_its_namespace_then_its_quota_without_a_question():
    p = plans.plan_resource_quota("team-a", 4, {"nvidia.com/mig-1g.10gb": 2}, False, None)
    assert targets(p) == [
        ("create", "Namespace team-a"),
        ("create", f"ResourceQuota team-a/{QUOTA_NAME}"),
    ]
    assert p.question is None
    assert [o["kind"] for o in p.objects()] == ["Namespace", "ResourceQuota"]
    assert p.plan.steps[1].detail["object"]["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "4",
        "requests.nvidia.com/mig-1g.10gb": "2",
    }


def test_a_changed_quota_is_one_patch_with_its_changes_and_asks_first():
    current = {"requests.nvidia.com/gpu": "4", "requests.nvidia.com/mig-1g.10gb": "2"}
    p = plans.plan_resource_quota("team-a", 8, {}, True, current)
    assert p.quota_action == "update"
    assert targets(p) == [("patch", f"ResourceQuota team-a/{QUOTA_NAME}")]
    assert p.plan.steps[0].detail["changes"] == [
        ["requests.nvidia.com/gpu", "4", "8"],
        ["requests.nvidia.com/mig-1g.10gb", "2", None],
    ]
    assert p.question == f"Replace the hard limits of ResourceQuota team-a/{QUOTA_NAME}?"


def test_the_same_quota_by_value_plans_nothing():
    p = plans.plan_resource_quota("team-a", 4, {}, True, {"requests.nvidia.com/gpu": "4000m"})
    assert p.quota_action == "unchanged" and p.plan.empty and p.question is None


def test_a_change_reads_as_old_to_new():
    assert plans.change_text(("cohort", "ml", None)) == "cohort: ml → (removed)"
    assert plans.change_text(("cohort", None, "ml")) == "cohort: (none) → ml"


# --- Kueue ----------------------------------------------------------------------------


def test_on_an_empty_cluster_every_kueue_object_is_created_in_order():
    p = plans.plan_kueue(team(cohort="ml"), KEY, (), "v1beta2", world())
    assert targets(p) == [
        ("create", "Namespace team-a"),
        ("create", f"ResourceFlavor {FLAVOR}"),
        ("create", "ClusterQueue team-a"),
        ("create", "LocalQueue team-a/team-a"),
    ]
    assert p.question is None and [f.name for f in p.flavors] == [FLAVOR]
    cq = p.plan.steps[2].detail["object"]
    assert cq["spec"]["cohortName"] == "ml" and cq["apiVersion"] == "kueue.x-k8s.io/v1beta2"


def test_a_changed_cluster_queue_is_patched_and_asked_about_the_rest_kept():
    before = plans.plan_kueue(team(), KEY, (), "v1beta2", world())
    rf, cq, lq = (s.obj for s in before.steps[1:])
    held = world(namespace_exists=True, flavors=[rf], cluster_queue=cq, local_queue=lq)
    p = plans.plan_kueue(team(gpus=4), KEY, (), "v1beta2", held)
    assert [s.action for s in p.steps] == ["unchanged", "update", "unchanged"]
    assert targets(p) == [("patch", "ClusterQueue team-a")]
    assert p.plan.steps[0].detail["changes"] == [
        [f"{FLAVOR} nvidia.com/gpu nominalQuota", "8", "4"]
    ]
    assert p.question == "Replace the quota of ClusterQueue team-a?"
    again = plans.plan_kueue(team(), KEY, (), "v1beta2", held)
    assert again.plan.empty and not again.changes_anything


def test_a_queue_gpuctl_does_not_manage_is_refused():
    theirs = {"kind": "ClusterQueue", "metadata": {"name": "team-a"}, "spec": {}}
    with pytest.raises(GpuctlError, match="ClusterQueue team-a exists and is not managed"):
        plans.plan_kueue(team(), KEY, (), "v1beta2", world(cluster_queue=theirs))


def test_a_flavor_someone_made_for_the_same_nodes_is_reused_not_written():
    theirs = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "h100"},
        "spec": {"nodeLabels": {KEY: H100}},
    }
    p = plans.plan_kueue(team(), KEY, (), "v1beta2", world(flavors=[theirs]))
    assert p.steps[1].action == "reused" and [f.name for f in p.flavors] == ["h100"]
    assert "ResourceFlavor h100" not in [t for _, t in targets(p)]
    assert theirs not in p.objects()


def test_read_back_changes_are_those_of_the_managed_fields():
    p = plans.plan_kueue(team(), KEY, (), "v1beta2", world())
    lq = p.steps[-1].obj
    assert plans.object_changes(lq, lq) == []
    moved = {**lq, "spec": {"clusterQueue": "other"}}
    assert plans.object_changes(moved, lq) == [("clusterQueue", "other", "team-a")]
    assert plans.object_changes({}, p.steps[0].obj) == []  # a namespace: it exists or not
