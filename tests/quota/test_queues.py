"""`gpuctl quota set|list|lint` with the Kueue engine, against the API emulator serving
Kueue's CRDs (gpuctl/sim/crds/). Kueue's controller does not run here: where a test needs what
it would write (a ClusterQueue's usage), the test writes that status in the CRD's shape."""

import json

import pytest
import yaml

from tests.crd_schema import assert_valid_cr
from tests.gpu_cluster import mark, node, seed, set_status, writes

KUEUE = ("ClusterQueue", "LocalQueue", "ResourceFlavor")
KEY = "nvidia.com/gpu.product"  # GPU Feature Discovery's label, set by tests.gpu_cluster.node
H100 = "nvidia-h100-80gb-hbm3"  # the flavor gpuctl names after NVIDIA-H100-80GB-HBM3
V = "/apis/kueue.x-k8s.io/v1beta2"


@pytest.fixture
def custom(kube_api):
    from kubernetes import client

    return client.CustomObjectsApi(kube_api)


@pytest.fixture
def cluster(kube, kube_api):
    kube.install_crds(*KUEUE)
    seed(kube_api, node("gpu-1"), node("gpu-2"))  # 2 × 8 H100
    return kube


def read(custom, kind, name, namespace=None):
    plural = kind.lower() + "s"
    if namespace:
        return custom.get_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", namespace, plural, name
        )
    return custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, name)


def quota_set(cli, team, *args):
    return cli("quota", "set", team, "--gpu-label-key", KEY, *args)


def test_set_creates_flavor_cluster_queue_and_local_queue_then_is_idempotent(cli, cluster, custom):
    r = quota_set(
        cli, "team-a", "--gpus", "8", "--mig", "1g.10gb=2", "--cohort", "ml", "--lending-limit", "4"
    )
    assert r.code == 0, r
    rf = read(custom, "ResourceFlavor", H100)
    cq = read(custom, "ClusterQueue", "team-a")
    lq = read(custom, "LocalQueue", "team-a", "team-a")
    for obj in (rf, cq, lq):
        assert_valid_cr(obj)
    assert rf["spec"]["nodeLabels"] == {KEY: "NVIDIA-H100-80GB-HBM3"}
    assert rf["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert cq["spec"]["cohortName"] == "ml"
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == [
        "cpu",
        "memory",
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
    ]
    assert group["flavors"][0]["name"] == H100
    assert group["flavors"][0]["resources"][2] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "8",
        "lendingLimit": "4",
    }
    assert lq["spec"] == {"clusterQueue": "team-a"}
    assert "ClusterQueue team-a: create" in r.err and "LocalQueue team-a/team-a: create" in r.err
    # a second team in the cohort shares the flavor
    since = mark(cluster)
    r = quota_set(cli, "team-b", "--gpus", "8", "--cohort", "ml", "--borrowing-limit", "4")
    assert r.code == 0, r
    assert f"ResourceFlavor {H100}: unchanged" in r.err
    assert writes(cluster, since) == [
        ("POST", "/api/v1/namespaces"),
        ("POST", f"{V}/clusterqueues"),
        ("POST", f"{V}/namespaces/team-b/localqueues"),
    ]
    since = mark(cluster)
    r = quota_set(
        cli, "team-a", "--gpus", "8", "--mig", "1g.10gb=2", "--cohort", "ml", "--lending-limit", "4"
    )
    assert r.code == 0 and "nothing to change" in r.err, r
    assert writes(cluster, since) == []


def test_lending_and_borrowing_show_in_quota_list(cli, cluster, custom, kube_api):
    assert quota_set(cli, "team-a", "--gpus", "8", "--cohort", "ml").code == 0
    assert (
        quota_set(cli, "team-b", "--gpus", "8", "--cohort", "ml", "--borrowing-limit", "4").code
        == 0
    )
    # What Kueue writes when team-b's 12-GPU job is admitted while team-a is idle: 8 of
    # its own quota and 4 borrowed from the cohort.
    usage = lambda total, borrowed: [  # noqa: E731
        {
            "name": H100,
            "resources": [
                {"name": "cpu", "total": "0", "borrowed": "0"},
                {"name": "memory", "total": "0", "borrowed": "0"},
                {"name": "nvidia.com/gpu", "total": str(total), "borrowed": str(borrowed)},
            ],
        }
    ]
    for team, total, borrowed, admitted in (("team-a", 0, 0, 0), ("team-b", 12, 4, 1)):
        status = {
            "flavorsReservation": usage(total, borrowed),
            "flavorsUsage": usage(total, borrowed),
            "pendingWorkloads": 2 if team == "team-b" else 0,
            "reservingWorkloads": admitted,
            "admittedWorkloads": admitted,
        }
        set_status(kube_api, read(custom, "ClusterQueue", team), status)
        assert_valid_cr(read(custom, "ClusterQueue", team))
    r = cli("quota", "list", "-o", "json")
    assert r.code == 0, r
    rows = {(q["cluster_queue"], q["resource"]): q for q in json.loads(r.out)["clusterQueues"]}
    a, b = rows[("team-a", "nvidia.com/gpu")], rows[("team-b", "nvidia.com/gpu")]
    assert (a["nominal"], a["in_use"], a["borrowed"], a["lent"]) == ("8", "0", "0", "4")
    assert (b["nominal"], b["in_use"], b["borrowed"], b["lent"]) == ("8", "12", "4", "0")
    assert (b["borrowing_limit"], b["pending"], b["admitted"], b["cohort"]) == ("4", 2, 1, "ml")
    table = cli("quota", "list").out.splitlines()
    at = table.index("ClusterQueue team-b  cohort ml  workloads: 2 pending, 1 admitted")
    assert table[at + 1].split() == [
        *("FLAVOR", "RESOURCE", "NOMINAL", "IN", "USE", "BORROWED", "LENT"),
        *("MAX", "BORROW", "MAX", "LEND"),
    ]
    gpu_row = next(x for x in table[at:] if "nvidia.com/gpu" in x)
    assert gpu_row.split() == [H100, "nvidia.com/gpu", "8", "12", "4", "0", "4", "-"]


def test_an_update_patches_only_what_changed(cli, cluster, custom):
    assert quota_set(cli, "team-a", "--gpus", "8", "--cohort", "ml", "--mig", "1g.10gb=2").code == 0
    since = mark(cluster)
    r = quota_set(cli, "team-a", "--gpus", "4")
    assert r.code == 3 and "not confirmed: pass --yes" in r.err, r  # a replace asks first
    assert writes(cluster, since) == []
    r = quota_set(cli, "team-a", "--gpus", "4", "--yes")
    assert r.code == 0, r
    assert "ClusterQueue team-a: update" in r.err
    assert f"  {H100} nvidia.com/gpu nominalQuota: 8 → 4" in r.err
    assert "  cohort: ml → (removed)" in r.err
    assert f"  {H100} nvidia.com/mig-1g.10gb nominalQuota: 2 → (removed)" in r.err
    assert writes(cluster, since) == [("PATCH", f"{V}/clusterqueues/team-a")]
    cq = read(custom, "ClusterQueue", "team-a")
    assert "cohortName" not in cq["spec"]
    assert cq["spec"]["resourceGroups"][0]["coveredResources"] == [
        "cpu",
        "memory",
        "nvidia.com/gpu",
    ]


def test_the_engine_is_kueue_when_the_cluster_has_it(cli, kube, kube_api, custom):
    seed(kube_api, node("gpu-1"))
    r = quota_set(cli, "team-a", "--gpus", "2")
    assert r.code == 0 and "ResourceQuota team-a/gpuctl-gpus: create" in r.err, r
    r = quota_set(cli, "team-b", "--gpus", "2", "--cohort", "ml")
    assert r.code == 2 and "--cohort need Kueue, which this cluster does not have" in r.err, r
    r = quota_set(cli, "team-b", "--gpus", "2", "--engine", "kueue")
    assert r.code == 1 and "this cluster has no Kueue" in r.err, r
    kube.install_crds(*KUEUE)
    r = quota_set(cli, "team-b", "--gpus", "2")
    assert r.code == 0 and "engine: kueue (kueue.x-k8s.io/v1beta2)" in r.err, r
    assert read(custom, "ClusterQueue", "team-b")["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpuctl"
    }
    r = quota_set(cli, "team-c", "--gpus", "2", "--engine", "resourcequota", "--weight", "2")
    assert r.code == 2 and "--weight: for --engine kueue only" in r.err


def test_a_cluster_with_only_v1beta1_gets_v1beta1_objects(cli, kube, kube_api, custom):
    kube.install_crds(*KUEUE, served=("v1beta1",))
    seed(kube_api, node("gpu-1"))
    r = quota_set(cli, "team-a", "--gpus", "2", "--cohort", "ml")
    assert r.code == 0 and "engine: kueue (kueue.x-k8s.io/v1beta1)" in r.err, r
    cq = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", "team-a")
    assert cq["spec"]["cohort"] == "ml" and "cohortName" not in cq["spec"]
    assert quota_set(cli, "team-a", "--gpus", "2", "--cohort", "ml").err.endswith(
        "nothing to change\n"
    )


def test_queues_gpuctl_does_not_manage_are_left_alone(cli, cluster, kube_api):
    seed(
        kube_api,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "team-a"},
            "spec": {"namespaceSelector": {}},
        },
    )
    since = mark(cluster)
    r = quota_set(cli, "team-a", "--gpus", "2")
    assert r.code == 1 and "ClusterQueue team-a exists and is not managed by gpuctl" in r.err, r
    assert writes(cluster, since) == []


@pytest.mark.parametrize("name", ["h100", H100])
def test_an_existing_flavor_for_the_same_nodes_is_used_as_it_is(
    cli, cluster, custom, kube_api, name
):
    theirs = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {KEY: "NVIDIA-H100-80GB-HBM3"}},
    }
    seed(kube_api, theirs)
    since = mark(cluster)
    r = quota_set(cli, "team-a", "--gpus", "8")
    assert r.code == 0 and f"ResourceFlavor {name}: reused" in r.err, r
    assert f"{V}/resourceflavors" not in [p for _, p in writes(cluster, since)]
    cq = read(custom, "ClusterQueue", "team-a")
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] == name
    assert read(custom, "ResourceFlavor", name)["spec"] == theirs["spec"]


def test_a_failure_undoes_what_was_created(cli, cluster, custom):
    cluster.call(lambda: cluster.emulator[f"post {V}/namespaces/team-a/localqueues"] << 500)
    since = mark(cluster)
    r = quota_set(cli, "team-a", "--gpus", "2")
    assert r.code == 1 and "the changes made before the failure were undone" in r.err, r
    made = writes(cluster, since)
    assert made[:4] == [
        ("POST", "/api/v1/namespaces"),
        ("POST", f"{V}/resourceflavors"),
        ("POST", f"{V}/clusterqueues"),
        ("POST", f"{V}/namespaces/team-a/localqueues"),
    ]
    # an HTTP 500 is an answer lost: the LocalQueue may have been made (the emulator did
    # store it), so it is undone with the rest
    assert made[4:] == [
        ("DELETE", f"{V}/namespaces/team-a/localqueues/team-a"),
        ("DELETE", f"{V}/clusterqueues/team-a"),
        ("DELETE", f"{V}/resourceflavors/{H100}"),
        ("DELETE", "/api/v1/namespaces/team-a"),
    ]
    assert (
        custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]
        == []
    )


def test_a_refused_step_is_not_undone_the_ones_before_are(cli, cluster):
    cluster.call(lambda: cluster.emulator[f"post {V}/namespaces/team-a/localqueues"] << 403)
    since = mark(cluster)
    r = quota_set(cli, "team-a", "--gpus", "2")
    assert r.code == 1 and "not allowed by the cluster" in r.err and "undone" in r.err, r
    assert [w for w in writes(cluster, since) if w[0] == "DELETE"] == [
        ("DELETE", f"{V}/clusterqueues/team-a"),
        ("DELETE", f"{V}/resourceflavors/{H100}"),
        ("DELETE", "/api/v1/namespaces/team-a"),
    ]


def test_a_failed_update_is_rolled_back(cli, cluster, custom):
    assert quota_set(cli, "team-a", "--gpus", "8", "--cohort", "ml").code == 0
    before = read(custom, "ClusterQueue", "team-a")
    custom.delete_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "team-a", "localqueues", "team-a"
    )
    cluster.call(lambda: cluster.emulator[f"post {V}/namespaces/team-a/localqueues"] << 500)
    since = mark(cluster)
    r = quota_set(cli, "team-a", "--gpus", "4", "--yes")
    assert r.code == 1 and "the changes made before the failure were undone" in r.err, r
    assert writes(cluster, since) == [
        ("PATCH", f"{V}/clusterqueues/team-a"),
        ("POST", f"{V}/namespaces/team-a/localqueues"),
        ("DELETE", f"{V}/namespaces/team-a/localqueues/team-a"),  # its answer was lost
        ("PATCH", f"{V}/clusterqueues/team-a"),
    ]
    assert read(custom, "ClusterQueue", "team-a")["spec"] == before["spec"]
    assert (
        custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team-a", "localqueues")[
            "items"
        ]
        == []
    )


def test_offline_dry_run_prints_valid_objects(cli):
    r = cli(
        "quota",
        "set",
        "team-a",
        "--gpus",
        "4",
        "--engine",
        "kueue",
        "--dry-run",
        "-o",
        "yaml",
        "--gpu-type",
        "NVIDIA-H100-80GB-HBM3",
        "--cpu",
        "96",
        "--memory",
        "1Ti",
        "--cohort",
        "ml",
    )
    assert r.code == 0, r
    assert "no cluster" in r.err and "dry run: nothing was changed" in r.err
    docs = list(yaml.safe_load_all(r.out))
    assert [d["kind"] for d in docs] == [
        "Namespace",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
    ]
    for d in docs[1:]:
        assert_valid_cr(d)
    r = cli("quota", "set", "team-a", "--gpus", "4", "--engine", "kueue", "--dry-run")
    assert r.code == 2 and "give --cpu and --memory" in r.err


def test_lint_exits_1_on_quota_that_can_never_be_satisfied(cli, cluster):
    assert quota_set(cli, "team-a", "--gpus", "8").code == 0
    assert quota_set(cli, "team-b", "--gpus", "8").code == 0
    r = cli("quota", "lint")
    assert r.code == 0, r
    assert r.out.split("\n")[1].split() == [H100, "nvidia.com/gpu", "16", "16", "2"]
    assert "ok: every nominal quota fits" in r.out
    assert quota_set(cli, "team-c", "--gpus", "12").code == 0
    r = cli("quota", "lint", "-o", "json")
    assert r.code == 1, r
    found = json.loads(r.out)
    assert found["ok"] is False
    assert [f["message"] for f in found["findings"]] == [
        f"nominal quotas on flavor {H100} add up to 28 nvidia.com/gpu (team-a, team-b, team-c), "
        "its nodes have 16: 12 can never be satisfied at once"
    ]


def test_a_rollback_leaves_an_object_another_client_made_behind_a_lost_answer(
    cli, cluster, custom, proxied_kube
):
    """Between the plan and the create, another client makes ClusterQueue team-a; gpuctl's
    create of it gets no answer. The rollback reads it back: not this attempt's (no token),
    so it stays; what this attempt made goes."""
    from tests.standins.faults import Action

    theirs = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": {"namespaceSelector": {}},
    }

    def race(handler, _answer) -> None:
        custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", theirs)
        handler.drop()

    rule = proxied_kube.on("POST", f"{V}/clusterqueues", Action(False, race))
    r = quota_set(cli, "team-a", "--gpus", "2")
    assert rule.fired.is_set() and r.code == 1, r
    assert read(custom, "ClusterQueue", "team-a")["spec"] == {"namespaceSelector": {}}
    assert "ClusterQueue/team-a" not in r.err.split("undone:")[-1]
    assert f"ResourceFlavor/{H100}" in r.err and "Namespace/team-a" in r.err
