"""A team's quota as Kueue objects, their changes, `quota list` rows and `quota lint` (pure),
validated against Kueue's CRDs (gpuctl/sim/crds/)."""

import copy

import jsonpatch
import pytest

from gpuctl.common.errors import UsageError
from gpuctl.k8s import apis
from gpuctl.quota.core import kueue
from gpuctl.quota.core.queue_usage import ERROR, WARNING, has_errors, lint, queue_rows
from tests.crd_schema import assert_valid_cr, errors
from tests.gpu_cluster import node

H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB"
KEY = "nvidia.com/gpu.product"


def h100(name, gpus=8):
    return node(name, gpus, labels={KEY: H100})


def a100(name, mig=None):
    return node(name, 0 if mig else 8, labels={KEY: A100}, alloc=mig)


def team(**kw):
    return kueue.check(kueue.TeamQuota(**{"team": "team-a", "gpus": 8, **kw}))


@pytest.mark.parametrize("version", apis.KUEUE_VERSIONS)
def test_objects_are_valid_against_the_crds_of_both_versions(version):
    nodes = [h100("h1"), h100("h2"), a100("a1", {"nvidia.com/mig-1g.5gb": "14"})]
    q = team(mig={"nvidia.com/mig-1g.5gb": 4}, cohort="ml", borrowing_limit=4, lending_limit=2)
    flavors = kueue.flavors_for(nodes, KEY, ())
    assert [f.name for f in flavors] == ["nvidia-a100-sxm4-40gb", "nvidia-h100-80gb-hbm3"]
    cq = kueue.cluster_queue(q, flavors, version)
    for f in flavors:
        rf = f.object()
        rf["apiVersion"] = apis.kueue_api_version(version)
        assert_valid_cr(rf)
    assert_valid_cr(cq)
    assert_valid_cr(kueue.local_queue("team-a", version))
    # the cohort is named as each version names it
    assert cq["spec"][kueue.cohort_field(version)] == "ml"
    other = "cohort" if version == "v1beta2" else "cohortName"
    assert errors({**cq, "spec": {**cq["spec"], other: "ml"}})  # the other name is unknown


def test_the_cluster_queue_covers_cpu_memory_gpus_and_the_mig_profiles_given():
    nodes = [h100("h1"), h100("h2")]
    q = team(mig={"nvidia.com/mig-3g.40gb": 2}, cohort="ml", borrowing_limit=4, lending_limit=2)
    cq = kueue.cluster_queue(q, kueue.flavors_for(nodes, KEY, ()), "v1beta2")
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == [
        "cpu",
        "memory",
        "nvidia.com/gpu",
        "nvidia.com/mig-3g.40gb",
    ]
    (flavor,) = group["flavors"]
    # every flavor lists the covered resources in their order (Kueue's webhook rule)
    assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    assert flavor["resources"][0] == {"name": "cpu", "nominalQuota": "128"}  # 2 × 64 cores
    assert flavor["resources"][1] == {"name": "memory", "nominalQuota": "1Ti"}  # 2 × 512Gi
    assert flavor["resources"][2] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "8",
        "borrowingLimit": "4",
        "lendingLimit": "2",
    }
    assert cq["spec"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "team-a"}
    }
    assert cq["spec"]["preemption"] == {"reclaimWithinCohort": "Any"}  # lent quota comes back
    assert cq["spec"]["fairSharing"] == {"weight": "1"}


def test_flavors_select_gpu_nodes_by_type_with_the_gpu_toleration():
    nodes = [h100("h1"), a100("a1"), node("cpu-1", 0, gfd=False)]
    flavors = {f.gpu_type: f for f in kueue.flavors_for(nodes, KEY, ())}
    assert set(flavors) == {H100, A100}
    rf = flavors[H100].object()
    assert rf["spec"] == {
        "nodeLabels": {KEY: H100},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    # asked for one type: only that one; none labelled: one flavor for every GPU node
    assert [f.gpu_type for f in kueue.flavors_for(nodes, KEY, (A100,))] == [A100]
    (everything,) = kueue.flavors_for(nodes, "gpu-type", ())
    assert (everything.name, everything.gpu_type, everything.cpu) == ("nvidia-gpu", None, "128")
    assert "nodeLabels" not in everything.object()["spec"]


@pytest.mark.parametrize("types", [("h100 sxm",), ("",), ("a" * 64,), ("h100", "h100")])
def test_bad_gpu_types_are_refused(types):
    with pytest.raises(UsageError, match="--gpu-type"):
        kueue.flavors_for([], KEY, types)


def test_flavor_names_are_valid_and_distinct():
    names = kueue.flavor_names(["A100", "a100", "H100_SXM", "---", "L4", "tesla..v100", "x.-_y"])
    assert names["tesla..v100"] == "tesla-v100" and names["x.-_y"] == "x-y"
    assert names["H100_SXM"] == "h100-sxm" and names["L4"] == "l4" and names["---"] == "gpu"
    assert names["A100"] != names["a100"] and names["A100"].startswith("a100-")
    assert kueue.flavor_names(["a100", "A100"]) == {k: names[k] for k in ("a100", "A100")}
    from gpuctl.common.k8s_names import dns1123_subdomain

    assert all(dns1123_subdomain(n) for n in names.values())


def test_cpu_and_memory_quota_can_be_given_and_offline_must_be():
    q = team(cpu="16", memory="128Gi")
    (f,) = kueue.flavors_for([], KEY, ("h100",))
    cq = kueue.cluster_queue(q, [f], "v1beta2")
    assert [r["nominalQuota"] for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]][
        :2
    ] == ["16", "128Gi"]
    with pytest.raises(UsageError, match="give --cpu and --memory"):
        kueue.cluster_queue(team(), [f], "v1beta2")


def test_the_crds_own_rules_agree_with_the_checks():
    (f,) = kueue.flavors_for([h100("h1")], KEY, ())
    cq = kueue.cluster_queue(team(cohort="ml", borrowing_limit=2), [f], "v1beta2")
    del cq["spec"]["cohortName"]  # what --borrowing-limit without --cohort would make
    assert errors(cq) == ["spec: borrowingLimit must be nil when cohort is empty"]
    cq = kueue.cluster_queue(team(), [f], "v1beta2")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    assert errors(cq) == [
        "spec.resourceGroups[0]: flavors must have the same number of resources as the "
        "coveredResources"
    ]


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"borrowing_limit": 2}, "--borrowing-limit needs --cohort"),
        ({"lending_limit": 2}, "--lending-limit needs --cohort"),
        ({"cohort": "ml", "lending_limit": 9}, "more than the team's 8 GPUs"),
        ({"cohort": "ml", "borrowing_limit": -1}, "between 0 and"),
        ({"cohort": "ML!"}, "not a valid name"),
        ({"weight": "heavy"}, "--weight 'heavy' is not a quantity"),
        ({"weight": "-1"}, "--weight"),
        ({"cpu": "1.5.2"}, "--cpu"),
        ({"memory": " 1Gi"}, "--memory"),
    ],
)
def test_what_kueue_would_refuse_is_refused_first(kw, message):
    with pytest.raises(UsageError, match=message):
        team(**kw)


def test_changes_compare_quantities_by_value_and_ignore_kueue_defaults():
    nodes = [h100("h1")]
    want = kueue.cluster_queue(team(cohort="ml"), kueue.flavors_for(nodes, KEY, ()), "v1beta2")
    have = copy.deepcopy(want)
    # what an API server with Kueue's defaults would return
    have["spec"]["preemption"].update(
        withinClusterQueue="Never", borrowWithinCohort={"policy": "Never"}
    )
    have["spec"].update(queueingStrategy="BestEffortFIFO", stopPolicy="None")
    have["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = str(
        512 * 2**30
    )
    assert kueue.cluster_queue_changes(have["spec"], want["spec"]) == []
    have["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "4"
    del have["spec"]["cohortName"]
    assert kueue.cluster_queue_changes(have["spec"], want["spec"]) == [
        ("cohort", None, "ml"),
        ("nvidia-h100-80gb-hbm3 nvidia.com/gpu nominalQuota", "4", "8"),
    ]


def test_the_patch_replaces_managed_fields_and_keeps_the_rest():
    nodes = [h100("h1")]
    old = kueue.cluster_queue(team(cohort="ml"), kueue.flavors_for(nodes, KEY, ()), "v1beta2")
    old["spec"]["stopPolicy"] = "Hold"  # set by an admin: not gpuctl's
    new = kueue.cluster_queue(team(gpus=2), kueue.flavors_for(nodes, KEY, ()), "v1beta2")
    patched = jsonpatch.apply_patch(old, kueue.spec_patch("ClusterQueue", old, new["spec"]))
    assert "cohortName" not in patched["spec"] and patched["spec"]["stopPolicy"] == "Hold"
    assert patched["spec"]["resourceGroups"] == new["spec"]["resourceGroups"]
    assert patched["spec"]["preemption"] == old["spec"]["preemption"]  # no cohort: left alone
    undo = kueue.spec_patch("ClusterQueue", patched, old["spec"], undo=True)
    assert jsonpatch.apply_patch(patched, undo) == old


def test_existing_flavors_for_the_same_nodes_are_reused():
    (f,) = kueue.flavors_for([h100("h1")], KEY, ())
    theirs = {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {KEY: H100}}}
    other = {"metadata": {"name": "spot"}, "spec": {"nodeLabels": {KEY: H100, "spot": "1"}}}
    assert kueue.reuse_flavor([other, theirs], f) == "h100"
    assert kueue.reuse_flavor([other], f) is None


# --- quota list ---------------------------------------------------------------------


def cq(name, cohort=None, gpus=8, used=0, borrowed=0, lending=None, pending=0, admitted=0):
    gpu = {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}
    if lending is not None:
        gpu["lendingLimit"] = str(lending)
    spec = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "h100", "resources": [gpu]}],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    usage = [
        {
            "name": "h100",
            "resources": [
                {"name": "nvidia.com/gpu", "total": str(used), "borrowed": str(borrowed)}
            ],
        }
    ]
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {
            "flavorsReservation": usage,
            "flavorsUsage": usage,
            "pendingWorkloads": pending,
            "reservingWorkloads": admitted,
            "admittedWorkloads": admitted,
        },
    }
    assert_valid_cr(obj)
    return obj


def by_queue(rows):
    return {r.cluster_queue: r for r in rows}


def test_borrowed_quota_is_shown_as_lent_by_the_idle_queues_of_the_cohort():
    rows = by_queue(
        queue_rows(
            [
                cq("team-a", "ml", gpus=8, used=0),  # idle: lends
                cq("team-b", "ml", gpus=8, used=12, borrowed=4, pending=1, admitted=3),
                cq("team-c", "ml", gpus=4, used=4),  # busy: lends nothing
                cq("solo", None, gpus=4, used=1),
            ]
        )
    )
    a, b, c, solo = rows["team-a"], rows["team-b"], rows["team-c"], rows["solo"]
    assert (b.nominal, b.in_use, b.borrowed, b.lent) == ("8", "12", "4", "0")
    assert (b.pending, b.admitted) == (1, 3)
    assert (a.in_use, a.borrowed, a.lent) == ("0", "0", "4")
    assert (c.lent, solo.lent, solo.cohort) == ("0", "0", None)


def test_lent_quota_is_shared_by_idle_quota_and_capped_by_lending_limits():
    rows = by_queue(
        queue_rows(
            [
                cq("a", "ml", gpus=8, used=2, lending=2),  # may lend 2 of its 6 idle
                cq("b", "ml", gpus=8, used=2),  # 6 idle
                cq("c", "ml", gpus=2, used=6, borrowed=4),
            ]
        )
    )
    assert (rows["a"].lent, rows["b"].lent) == ("1", "3")  # 4 borrowed, in 2 : 6
    assert rows["a"].lending_limit == "2" and rows["b"].lending_limit is None


# --- quota lint ---------------------------------------------------------------------


def flavor(name, labels=None):
    return {"metadata": {"name": name}, "spec": {"nodeLabels": labels or {}}}


def test_lint_flags_quota_that_can_never_be_satisfied():
    nodes = [h100("h1"), h100("h2"), a100("a1", {"nvidia.com/mig-1g.5gb": "14"})]
    flavors = [flavor("h100", {KEY: H100}), flavor("a100", {KEY: A100}), flavor("l4", {KEY: "L4"})]
    queues = [cq("team-a", gpus=18), cq("team-b", gpus=8)]
    rows, findings = lint(queues, flavors, nodes)
    assert [(r.flavor, r.resource, r.nominal, r.allocatable, r.queues) for r in rows] == [
        ("h100", "nvidia.com/gpu", "26", "16", 2)
    ]
    assert [f.message for f in findings if f.level == ERROR] == [
        "ClusterQueue team-a: nominal 18 nvidia.com/gpu on flavor h100, but its nodes have 16: "
        "it can never be satisfied",  # team-b's 8 fit alone
        "nominal quotas on flavor h100 add up to 26 nvidia.com/gpu (team-a, team-b), its nodes "
        "have 16: 10 can never be satisfied at once",
    ]
    assert has_errors(findings)
    # the A100 node's GPUs are in no queue's quota
    assert [f.message for f in findings if f.level == WARNING and "a1" in f.message]


def test_lint_flags_missing_flavors_and_flavors_without_nodes_or_the_profile():
    nodes = [h100("h1")]
    queues = [cq("team-a", gpus=4)]
    no_flavor = lint(queues, [], nodes)[1]
    assert [f.message for f in no_flavor if f.level == ERROR] == [
        "ClusterQueue team-a has quota on flavor h100, which does not exist: Kueue admits nothing against it"
    ]
    no_nodes = lint(queues, [flavor("h100", {KEY: "H200"})], nodes)[1]
    assert any("flavor h100 selects no GPU node" in f.message for f in no_nodes)
    mig = copy.deepcopy(cq("team-a", gpus=0))
    res = mig["spec"]["resourceGroups"][0]
    res["coveredResources"].append("nvidia.com/mig-1g.10gb")
    res["flavors"][0]["resources"].append({"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "2"})
    missing_profile = lint([mig], [flavor("h100", {KEY: H100})], nodes)[1]
    assert [f.message for f in missing_profile if f.level == ERROR] == [
        "no node of flavor h100 has nvidia.com/mig-1g.10gb allocatable: the quota of team-a on "
        "it can never be used"
    ]


def test_lint_is_clean_when_quotas_add_up_to_the_nodes():
    rows, findings = lint(
        [cq("team-a", gpus=8), cq("team-b", gpus=8)],
        [flavor("h100", {KEY: H100})],
        [h100("h1"), h100("h2")],
    )
    assert findings == [] and rows[0].nominal == rows[0].allocatable == "16"


def test_lint_warns_where_a_flavor_s_nvidia_gpu_counts_slices_or_replicas():
    from tests.node_corpus import corpus

    real = corpus()
    nodes = [real["gfd-t4"], real["gfd-t4-shared"], real["gfd-a100-mig-single"]]
    # cq() quotas the flavor named h100: here it selects the T4 nodes by instance type
    flavors = [flavor("h100", {"node.kubernetes.io/instance-type": "g4dn.xlarge"})]
    _, findings = lint([cq("team-a", gpus=9)], flavors, nodes)
    assert [f.message for f in findings if f.level == WARNING][:1] == [
        "flavor h100: nvidia.com/gpu on g4dn-t4-shared counts MIG slices or time-shared "
        "replicas, not whole GPUs"
    ]
