"""`gpuctl mig rebalance` (with and without --drain) and `mig configure --node` touch only what
the run set: another client's cordon or nvidia.com/mig.config, made just before gpuctl's own
write (a fault proxy in front of the API emulator lets it land first) or while gpuctl waits,
stops that node's change with the reason and is never undone. Every eviction is accounted
for: a lost or failed answer is read back, and the message and JSON name every pod evicted
on success, failure and Ctrl-C. Bad options are refused before any I/O."""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest

from tests.clirun import gpuctl_process
from tests.clirun import run_gpuctl as run
from tests.mig.test_rebalance import (
    DRAIN,
    NS,
    MigManager,
    cordoned,
    node_of,
    pods_left,
    seed_cluster,
    seed_full,
)
from tests.standins.faults import delay, drop_answer, meanwhile, reply

pytestmark = pytest.mark.integration
EVICT_JOB_A = "/api/v1/namespaces/ml/pods/job-a/eviction"
REBALANCE = "gpuctl.io/mig-rebalance"
SERVER_ERROR = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
                           "reason": "InternalError", "message": "etcdserver: leader changed"})  # fmt: skip


@pytest.fixture
def cluster(kube, kube_api):
    return seed_cluster(kube_api)


@pytest.fixture
def full(kube, kube_api):
    return seed_full(kube_api)


def first_change(capsys, *args) -> str:
    code, out, err = run(capsys, "mig", "rebalance", *args, "--dry-run", "-o", "json", "-n", NS)
    assert code == 0, err
    return json.loads(out)["nodes"][0]["node"]


def patch_node(api, name, body):
    from kubernetes import client

    return lambda: client.CoreV1Api(api).patch_node(name, body)


def config_of(api, name):
    return node_of(api, name).metadata.labels["nvidia.com/mig.config"]


def rebalance(capsys, *args):
    return run(capsys, "mig", "rebalance", *args, "--yes", "-n", NS, "--timeout", "5")


def check_their_cordon_stays(api, capsys, proxied_kube, *args):
    node = first_change(capsys, *args)
    theirs = patch_node(api, node, {"spec": {"unschedulable": True}})
    proxied_kube.on("PATCH", f"/api/v1/nodes/{node}", meanwhile(theirs))
    code, out, err = rebalance(capsys, *args)
    assert code == 1, err
    assert f"node {node}: spec.unschedulable is true, not unset: another client changed it" in err
    assert cordoned(api, node)  # theirs: kept
    assert REBALANCE not in (node_of(api, node).metadata.annotations or {})
    assert config_of(api, node) == "all-1g.5gb"


def test_another_admins_cordon_made_just_before_gpuctls_stays(cluster, capsys, proxied_kube):
    check_their_cordon_stays(cluster, capsys, proxied_kube)


def test_another_admins_cordon_stays_with_drain_too(full, capsys, proxied_kube):
    check_their_cordon_stays(full, capsys, proxied_kube, *DRAIN)
    assert "job-a" in pods_left(full)  # nothing evicted


def test_another_clients_config_set_just_before_gpuctls_stays(cluster, capsys, proxied_kube):
    node = first_change(capsys)
    theirs = patch_node(
        cluster, node, {"metadata": {"labels": {"nvidia.com/mig.config": "all-3g.20gb"}}}
    )
    proxied_kube.on("PATCH", f"/api/v1/nodes/{node}", meanwhile(theirs), nth=2)  # the label's
    code, out, err = rebalance(capsys)
    assert code == 1, err
    assert (
        f'node {node}: nvidia.com/mig.config is "all-3g.20gb", not "all-1g.5gb": another client '
        "changed it" in err
    ), err
    assert config_of(cluster, node) == "all-3g.20gb"  # theirs: never undone
    assert not cordoned(cluster, node)  # gpuctl's own cordon: put back
    assert REBALANCE not in (node_of(cluster, node).metadata.annotations or {})


def test_another_clients_config_while_gpuctl_waits_stops_that_node(cluster, capsys):
    hold = threading.Event()
    manager = MigManager(cluster, hold=hold)  # stays at pending until released
    node = first_change(capsys)
    theirs = patch_node(
        cluster, node, {"metadata": {"labels": {"nvidia.com/mig.config": "all-disabled"}}}
    )

    def meddle():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            labels = node_of(cluster, node).metadata.labels
            if labels.get("nvidia.com/mig.config.state") == "pending":
                theirs()
                return
            time.sleep(0.05)

    other = threading.Thread(target=meddle)
    other.start()
    try:
        code, out, err = rebalance(capsys)
    finally:
        hold.set()
        other.join(30)
        manager.close()
    assert code == 1, err
    assert f"node {node}: another client set nvidia.com/mig.config=all-disabled" in err, err
    assert "left cordoned: another client set nvidia.com/mig.config=all-disabled" in err
    assert config_of(cluster, node) == "all-disabled"  # theirs: never undone


@pytest.mark.parametrize("fault", [drop_answer(), reply(500, SERVER_ERROR, forward=True)])
def test_an_eviction_whose_answer_is_lost_or_failed_is_counted_when_the_pod_is_gone(
    full, capsys, proxied_kube, fault
):
    proxied_kube.on("POST", EVICT_JOB_A, fault)
    manager = MigManager(full)
    try:
        code, out, err = run(
            capsys, "mig", "rebalance", *DRAIN, "--yes", "-n", NS, "--timeout", "20", "-o", "json"
        )
    finally:
        manager.close()
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["rebalanced"], doc["evicted"], doc["evicting"]) == (["a"], ["ml/job-a"], None)
    assert "job-a" not in pods_left(full) and not cordoned(full, "a")


def test_success_says_every_pod_evicted(full, capsys):
    manager = MigManager(full)
    try:
        code, out, err = run(
            capsys, "mig", "rebalance", *DRAIN, "--yes", "-n", NS, "--timeout", "20"
        )
    finally:
        manager.close()
    assert code == 0, err
    assert "rebalanced: a; evicted: ml/job-a" in err


def test_ctrl_c_during_an_eviction_names_the_pod(full, proxied_kube):
    rule = proxied_kube.on("POST", EVICT_JOB_A, delay(5))  # made upstream; the answer held
    proc = gpuctl_process("mig", "rebalance", *DRAIN, "--yes", "-n", NS, "-o", "json")
    try:
        assert rule.fired.wait(60), "gpuctl never reached the eviction of ml/job-a"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted while evicting ml/job-a: it is gone" in err, err
    assert "left: node a (evicted ml/job-a: their controllers recreate them)" in err
    doc = json.loads(out)
    assert (doc["evicted"], doc["rebalanced"]) == (["ml/job-a"], [])
    assert not cordoned(full, "a")  # its label never set: gpuctl's cordon put back


@pytest.mark.parametrize(
    "args",
    [
        ("mig", "rebalance", "--timeout", "nan"),
        ("mig", "rebalance", "--timeout", "inf"),
        ("mig", "rebalance", "--timeout", "-5"),
        ("mig", "rebalance", "--drain", "--drain-namespace", "ml team"),
        ("mig", "rebalance", "--drain", "--drain-namespace", "ML"),
        ("mig", "rebalance", "--demand", "zz=3"),
        ("mig", "rebalance", "--demand", "1g.10gb=99999999999999999999"),
        ("mig", "rebalance", "--configmap", "Bad Name"),
        ("mig", "configure", "-c", "all-1g.5gb", "--node", "gpu-1", "--timeout", "nan"),
        ("mig", "configure", "-c", "all-1g.5gb", "--node", "gpu 1"),
        ("mig", "configure", "-c", "bad name", "--node", "gpu-1"),
        ("mig", "configure", "-c", "all-1g.5gb", "-l", "a in ("),
    ],
)
def test_bad_options_are_refused_before_any_io(capsys, monkeypatch, tmp_path, args):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))  # reading it would fail: exit 1
    code, out, err = run(capsys, *args, "--dry-run")
    assert code == 2, err


def test_configure_leaves_another_clients_config_alone(cluster, capsys, proxied_kube):
    theirs = patch_node(
        cluster, "idle", {"metadata": {"labels": {"nvidia.com/mig.config": "all-3g.20gb"}}}
    )
    proxied_kube.on("PATCH", "/api/v1/nodes/idle", meanwhile(theirs))
    code, out, err = run(capsys, "mig", "configure", "-c", "all-disabled", "--node", "whole,idle",
                         "-n", NS, "--yes", "--timeout", "5")  # fmt: skip
    assert code == 1, err
    assert 'node idle: nvidia.com/mig.config is "all-3g.20gb", not "all-1g.5gb"' in err, err
    assert config_of(cluster, "idle") == "all-3g.20gb"  # theirs: never undone


@pytest.mark.parametrize(
    "owner",
    [
        ("CronJob", {"annotations": {"gpuctl.io/evict": "never"}}),  # the Job's CronJob
        ("CronJob", None),  # one gpuctl could not read (gone, or RBAC)
    ],
)
def test_a_mark_up_the_chain_or_an_owner_not_read_keeps_a_pod_out_of_the_drain(full, capsys, owner):
    """job-a's Job `train` is a CronJob's: the never rule reads it too."""
    from kubernetes import client

    kind, meta = owner
    batch = client.BatchV1Api(full)
    ref = {
        "apiVersion": "batch/v1",
        "kind": kind,
        "name": "nightly",
        "uid": "u-nightly",
        "controller": True,
    }
    batch.patch_namespaced_job("train", "ml", {"metadata": {"ownerReferences": [ref]}})
    if meta is not None:
        template = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}
        cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", **meta},
                "spec": {"schedule": "0 * * * *", "jobTemplate": template}}  # fmt: skip
        batch.create_namespaced_cron_job("ml", cron)
    code, out, err = run(capsys, "mig", "rebalance", *DRAIN, "--dry-run", "-o", "json", "-n", NS)
    assert code == 0, err
    data = json.loads(out)
    assert data["nodes"] == []  # job-a was the only pod the drain could evict
    why = data["notEvictable"]["ml/job-a"]
    if meta is None:
        assert (
            why
            == "its CronJob ml/nightly could not be read: whether it is marked never is not known"
        )
    else:
        assert why == "its CronJob ml/nightly is marked gpuctl.io/evict: never (annotation)"
