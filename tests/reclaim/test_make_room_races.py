"""`gpuctl make-room --yes` against the API emulator and another client acting just before
its evictions (a fault proxy): marks on a pod or up its owner chain and pods replaced under
their names stop it; lost and failed answers are read back; the final message and JSON name
every pod evicted, on success, failure and Ctrl-C; bad options are refused before any I/O.

The fewest evictions on the fragmented cluster (tests/reclaim/test_room.py) are ml/a, then
ml/b, both on gpu-0."""

from __future__ import annotations

import json
import signal

import pytest

from tests.clirun import gpuctl_process
from tests.reclaim.test_make_room_cluster import names, seed_cluster
from tests.standins.faults import delay, drop_answer, meanwhile, reply

pytestmark = pytest.mark.integration
EVICT_A = "/api/v1/namespaces/ml/pods/a/eviction"
EVICT_B = "/api/v1/namespaces/ml/pods/b/eviction"
SERVER_ERROR = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
                           "reason": "InternalError", "message": "etcdserver: leader changed"})  # fmt: skip


def make_room(cli, *extra):
    return cli("make-room", "--for", "1x8", "--yes", "-o", "json", *extra)


def test_success_names_every_pod_evicted(cluster, cli):
    r = make_room(cli)
    assert r.code == 0, r
    assert json.loads(r.out)["evicted"] == ["ml/a", "ml/b"]


@pytest.mark.parametrize("fault", [drop_answer(), reply(500, SERVER_ERROR, forward=True)])
def test_a_lost_or_failed_answer_is_read_back_and_the_run_goes_on(
    cluster, cli, proxied_kube, fault
):
    proxied_kube.on("POST", EVICT_A, fault)  # made upstream, the answer lost or a 500
    r = make_room(cli)
    assert r.code == 0, r
    assert json.loads(r.out)["evicted"] == ["ml/a", "ml/b"]
    assert not {"a", "b"} & names(cluster)


def test_a_pod_marked_just_before_its_eviction_stays(cluster, cli, proxied_kube):
    def mark():
        cluster.patch_namespaced_pod(
            "b", "ml", {"metadata": {"annotations": {"gpuctl.io/evict": "never"}}}
        )

    proxied_kube.on("POST", EVICT_B, meanwhile(mark))
    r = make_room(cli)
    assert r.code == 1, r
    assert "pod ml/b: marked gpuctl.io/evict: never (annotation); not evicted" in r.err, r.err
    assert "evicted: ml/a; not evicted: pod ml/b" in r.err
    assert json.loads(r.out)["evicted"] == ["ml/a"]
    assert "b" in names(cluster)


def test_an_owner_marked_after_the_plan_keeps_its_pod(cluster, cli, proxied_kube):
    from kubernetes import client

    def mark_owner():  # b's ReplicaSet, while a is being evicted
        client.AppsV1Api(cluster.api_client).patch_namespaced_replica_set(
            "b-owner", "ml", {"metadata": {"labels": {"gpuctl.io/reclaim": "never"}}}
        )

    proxied_kube.on("POST", EVICT_A, meanwhile(mark_owner))
    r = make_room(cli)
    assert r.code == 1, r
    assert "its ReplicaSet ml/b-owner is marked gpuctl.io/reclaim: never (label)" in r.err, r.err
    assert json.loads(r.out)["evicted"] == ["ml/a"] and "b" in names(cluster)


def test_a_pod_replaced_under_its_name_just_before_its_eviction_stays(cluster, cli, proxied_kube):
    old = cluster.read_namespaced_pod("b", "ml")

    def replace():
        cluster.delete_namespaced_pod("b", "ml")
        again = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "b", "ownerReferences": [o.to_dict() for o in old.metadata.owner_references]},
                 "spec": cluster.api_client.sanitize_for_serialization(old.spec)}  # fmt: skip
        for ref in again["metadata"]["ownerReferences"]:  # the client's names to the API's
            ref["apiVersion"] = ref.pop("api_version")
        cluster.create_namespaced_pod("ml", again)

    proxied_kube.on("POST", EVICT_B, meanwhile(replace))
    r = make_room(cli)
    assert r.code == 1, r
    assert "Pod ml/b was replaced under the same name" in r.err, r.err
    assert cluster.read_namespaced_pod("b", "ml").metadata.uid != old.metadata.uid


def test_ctrl_c_during_an_eviction_names_the_pod(cluster, proxied_kube):
    rule = proxied_kube.on("POST", EVICT_B, delay(5))  # b goes upstream; its answer is held
    proc = gpuctl_process("make-room", "--for", "1x8", "--yes", "-o", "json")
    try:
        assert rule.fired.wait(60), "gpuctl never reached the eviction of ml/b"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted while evicting ml/b: it is gone" in err, err
    assert json.loads(out)["evicted"] == ["ml/a", "ml/b"]


@pytest.mark.parametrize(
    "args",
    [
        ("--for", "0x8"), ("--for", "2.5x8"), ("--for", "1x99999"), ("--for", "-1x8"), ("--for", "١x٨"),
        ("--resource", "nvidia.com/gpu extra", "--for", "1x8"), ("bad name!",),
        ("job", "--for", "1x8"), (),
    ],
)  # fmt: skip
def test_bad_options_are_refused_before_any_io(cli, monkeypatch, tmp_path, args):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))  # reading it would fail: exit 1
    r = cli("make-room", *args, "--dry-run")
    assert r.code == 2, r


@pytest.fixture
def cluster(kube, kube_api):
    return seed_cluster(kube_api)
