"""`gpuctl quota` and the quota pre-check of `gpuctl submit`, against the API emulator."""

import json

import pytest
import yaml

from gpuctl.quota.core.rules import QUOTA_NAME
from tests.gpu_cluster import mark, node, pod, seed, writes
from tests.k8s_schema import assert_valid


@pytest.fixture
def core(kube_api):
    from kubernetes import client

    return client.CoreV1Api(kube_api)


def hard_of(core, ns):
    return core.read_namespaced_resource_quota(QUOTA_NAME, ns).spec.hard


def test_set_creates_namespace_and_quota_then_is_idempotent(cli, kube, core):
    r = cli("quota", "set", "team-a", "--gpus", "4", "--mig", "1g.10gb=2", "--mig", "3g.40gb=1")
    assert r.code == 0, r
    assert core.read_namespace("team-a").metadata.labels["app.kubernetes.io/managed-by"] == "gpuctl"
    assert hard_of(core, "team-a") == {
        "requests.nvidia.com/gpu": "4",
        "requests.nvidia.com/mig-1g.10gb": "2",
        "requests.nvidia.com/mig-3g.40gb": "1",
    }
    since = mark(kube)
    r = cli("quota", "set", "team-a", "--gpus", "4", "--mig", "3g.40gb=1", "--mig", "1g.10gb=2")
    assert r.code == 0 and "unchanged" in r.err and "nothing to change" in r.err
    assert writes(kube, since) == []


def test_set_updates_and_drops_profiles_left_out(cli, kube, core):
    assert cli("quota", "set", "team-a", "--gpus", "4", "--mig", "1g.10gb=2").code == 0
    since = mark(kube)
    r = cli("quota", "set", "team-a", "--gpus", "8")
    assert r.code == 3 and "not confirmed: pass --yes" in r.err, r  # a replace asks first
    assert writes(kube, since) == []
    r = cli("quota", "set", "team-a", "--gpus", "8", "--yes")
    assert r.code == 0, r
    assert "requests.nvidia.com/gpu: 4 → 8" in r.err
    assert "requests.nvidia.com/mig-1g.10gb: 2 → (removed)" in r.err
    assert hard_of(core, "team-a") == {"requests.nvidia.com/gpu": "8"}
    assert writes(kube, since) == [
        ("PATCH", f"/api/v1/namespaces/team-a/resourcequotas/{QUOTA_NAME}")
    ]


def test_existing_namespace_is_kept(cli, kube, core, kube_api):
    seed(
        kube_api,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "ml", "labels": {"owner": "x"}},
        },
    )
    since = mark(kube)
    r = cli("quota", "set", "ml", "--gpus", "2", "-o", "yaml")
    assert r.code == 0 and "namespace ml: exists" in r.err
    assert [d["kind"] for d in yaml.safe_load_all(r.out)] == ["ResourceQuota"]
    assert writes(kube, since) == [("POST", "/api/v1/namespaces/ml/resourcequotas")]
    assert core.read_namespace("ml").metadata.labels == {"owner": "x"}


def test_dry_run_prints_schema_valid_objects_and_sends_nothing(cli, kube):
    since = mark(kube)
    r = cli(
        "quota", "set", "team-b", "--gpus", "3", "--mig", "2g.20gb=4", "--dry-run", "-o", "yaml"
    )
    assert r.code == 0, r
    docs = list(yaml.safe_load_all(r.out))
    assert [d["kind"] for d in docs] == ["Namespace", "ResourceQuota"]
    for d in docs:
        assert_valid(d)
    assert docs[1]["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "3",
        "requests.nvidia.com/mig-2g.20gb": "4",
    }
    assert "namespace team-b: create" in r.err and "dry run" in r.err
    assert writes(kube, since) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["team-a", "--gpus", "4", "--mig", "1g.11gb=1"], "not a MIG profile"),
        (["Team_A", "--gpus", "4"], "not a valid namespace name"),
        (["team-a", "--gpus", "-1"], "between 0 and"),
        (["team-a", "--gpus", "4", "--mig", "1g.10gb"], "PROFILE=COUNT"),
    ],
)
def test_bad_input_exits_2_and_sends_nothing(cli, kube, args, message):
    since = mark(kube)
    r = cli("quota", "set", *args)
    assert r.code == 2 and message in r.err, r
    assert kube.requests()[since:] == []


def test_list_shows_used_and_hard(cli, kube_api):
    seed(
        kube_api,
        pod("a1", "team-a", 2),
        pod("a2", "team-a", 1, "Succeeded"),
        pod("b1", "team-b", 1, resource="nvidia.com/mig-1g.10gb"),
    )
    assert cli("quota", "set", "team-a", "--gpus", "4").code == 0
    r = cli("quota", "list", "-o", "json")
    assert r.code == 0, r
    rows = {(q["namespace"], q["resource"]): q for q in json.loads(r.out)["quotas"]}
    assert (rows["team-a", "nvidia.com/gpu"]["used"], rows["team-a", "nvidia.com/gpu"]["hard"]) == (
        2,
        4,
    )
    assert rows["team-b", "nvidia.com/mig-1g.10gb"]["hard"] is None
    r = cli("quota", "list", "-n", "team-a")
    assert r.code == 0 and "team-a" in r.out and "team-b" not in r.out and "gpuctl-gpus" in r.out


def write_job(tmp_path, text):
    p = tmp_path / "job.yaml"
    p.write_text("apiVersion: gpuctl/v1\nimage: nvcr.io/nvidia/pytorch:24.05-py3\n" + text)
    return str(p)


def test_submit_refuses_a_job_over_quota_and_sends_nothing(cli, kube, kube_api, core, tmp_path):
    seed(kube_api, node("gpu-1", 8), node("gpu-2", 8), pod("running", "team-a", 3))
    assert cli("quota", "set", "team-a", "--gpus", "6").code == 0
    since = mark(kube)
    r = cli("submit", write_job(tmp_path, "name: big\nnamespace: team-a\ngpus: 2\nnodes: 2\n"))
    assert r.code == 1, r
    assert (
        "it requests 4 nvidia.com/gpu (2 workers × 2), 3 are used and quota gpuctl-gpus "
        "allows 6 (3 free)"
    ) in r.err
    assert "gpuctl quota set team-a" in r.err
    assert writes(kube, since) == []
    # running pods are counted (the emulator ignores the selector; gpuctl filters again):
    # the namespace's among the cluster's that the fit check read
    assert any(
        p == "/api/v1/pods" and "status.phase!=Succeeded" in q.get("fieldSelector", "")
        for _, p, q in kube.requests()[since:]
    )
    # the dry run is refused the same way
    r = cli(
        "submit",
        write_job(tmp_path, "name: big\nnamespace: team-a\ngpus: 4\n"),
        "--dry-run",
        "client",
    )
    assert r.code == 1 and "would exceed the quota" in r.err
    # within the quota it goes through
    r = cli("submit", write_job(tmp_path, "name: small\nnamespace: team-a\ngpus: 3\n"))
    assert r.code == 0, r
    from kubernetes import client

    job = client.BatchV1Api(kube_api).read_namespaced_job("small", "team-a")
    assert job.metadata.name == "small"


def test_submit_counts_mig_quota_and_ignores_finished_pods(cli, kube, kube_api, tmp_path):
    from kubernetes import client

    seed(
        kube_api,
        node("mig-1", 0, alloc={"nvidia.com/mig-1g.10gb": "7"}),
        pod("done", "team-m", 1, "Failed", resource="nvidia.com/mig-1g.10gb"),
        pod("live", "team-m", 1, resource="nvidia.com/mig-1g.10gb"),
    )
    assert cli("quota", "set", "team-m", "--gpus", "0", "--mig", "1g.10gb=2").code == 0
    r = cli("submit", write_job(tmp_path, "name: one\nnamespace: team-m\nmig: 1g.10gb\n"))
    assert r.code == 0, r
    client.BatchV1Api(kube_api).read_namespaced_job("one", "team-m")
    # the quota's status (as the quota controller keeps it) is used when present
    client.CoreV1Api(kube_api).patch_namespaced_resource_quota_status(
        QUOTA_NAME,
        "team-m",
        {
            "status": {
                "hard": {"requests.nvidia.com/mig-1g.10gb": "2"},
                "used": {"requests.nvidia.com/mig-1g.10gb": "2"},
            }
        },
    )
    r = cli("submit", write_job(tmp_path, "name: two\nnamespace: team-m\nmig: 1g.10gb\n"))
    assert r.code == 1 and "it requests 1 nvidia.com/mig-1g.10gb, 2 are used" in r.err


def test_submit_counts_a_mig_job_on_single_strategy_nodes_against_the_gpu_quota(
    cli, kube, kube_api, tmp_path
):
    """On a real MIG-single node (tests/data/nodes) a `mig: 1g.5gb` worker asks for
    nvidia.com/gpu, so the whole-GPU quota is the one it must fit."""
    from tests.node_corpus import corpus

    mig_node = corpus()["gfd-a100-mig-single"]
    running = pod("live", "team-s", 2, node_name=mig_node["metadata"]["name"])
    seed(kube_api, mig_node, running)
    assert cli("quota", "set", "team-s", "--gpus", "2").code == 0
    since = mark(kube)
    r = cli("submit", write_job(tmp_path, "name: slice\nnamespace: team-s\nmig: 1g.5gb\n"))
    assert r.code == 1, r
    assert "it requests 1 nvidia.com/gpu, 2 are used and quota gpuctl-gpus allows 2" in r.err
    assert writes(kube, since) == []


def test_submit_without_quota_is_not_limited(cli, kube_api, tmp_path):
    seed(kube_api, node("gpu-1", 8))
    r = cli("submit", write_job(tmp_path, "name: free\ngpus: 8\n"))
    assert r.code == 0, r


def test_list_refuses_a_bad_namespace_before_any_request(cli, kube):
    r = cli("quota", "list", "-n", "Team_A")
    assert r.code == 2 and "not a valid namespace name" in r.err
    assert kube.requests() == []
