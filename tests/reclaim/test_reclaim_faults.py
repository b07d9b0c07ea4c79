"""`gpuctl reclaim --yes` when the cluster fails mid-run (a fault proxy in front of the API
emulator): a 403, a lost answer, a 409, and a real Ctrl-C. The run stops at the failure and
says what was done and what not; re-running finishes the rest and repeats nothing; what the
run had not reached must not have changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests import children
from tests.reclaim.test_reclaim_cluster import run, snapshot
from tests.standins.faults import delay, drop_answer, meanwhile, reply

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOYMENT = "/apis/apps/v1/namespaces/research/deployments/notebook"
STALLED = "/apis/batch/v1/namespaces/ml/jobs/stalled"
WORKLOAD = r"/apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads/.*"
FORBIDDEN = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
                        "reason": "Forbidden", "message": "jobs.batch \"stalled\" is forbidden"})  # fmt: skip
CONFLICT = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409,
                       "reason": "Conflict", "message": "the object has been modified"})  # fmt: skip


# the plan's order: longest idle first (Job ml/finished, 3 h), then most GPUs (JobSet
# ml/gang), then Deployment research/notebook, Job ml/queued (its Workload), Job ml/stalled


def test_a_403_stops_the_run_and_says_what_was_done(cli, prom, policy, kube_api, proxied_kube):
    before = snapshot(kube_api)
    proxied_kube.on("PATCH", STALLED, reply(403, FORBIDDEN))
    r = run(cli, prom, policy)
    assert r.code == 1, r
    assert (
        "not allowed" in r.err
        and "done: suspend Job ml/finished, suspend JobSet ml/gang, scale-to-zero Deployment research/notebook"
        in r.err
    )
    assert "not done: suspend Job ml/stalled" in r.err
    after = snapshot(kube_api)
    assert after[("Job", "ml", "stalled")] == before[("Job", "ml", "stalled")]  # refused: unchanged
    assert after[("Deployment", "research", "notebook")]["spec"]["replicas"] == 0
    proxied_kube.clear()
    again = run(cli, prom, policy)  # the rest, nothing twice
    assert again.code == 0, again
    final = snapshot(kube_api)
    assert final[("Job", "ml", "stalled")]["spec"]["suspend"] is True
    assert (
        final[("Deployment", "research", "notebook")]
        == after[("Deployment", "research", "notebook")]
    )


def test_a_lost_answer_stops_the_run_and_a_rerun_does_not_record_zero_replicas(
    cli, prom, policy, kube_api, proxied_kube
):
    before = snapshot(kube_api)
    proxied_kube.on("PATCH", DEPLOYMENT, drop_answer())  # made upstream, the answer lost
    r = run(cli, prom, policy)
    assert r.code == 1, r
    assert "not done: scale-to-zero Deployment research/notebook" in r.err
    after = snapshot(kube_api)
    for key in [("Job", "ml", "stalled"), ("Job", "ml", "queued")]:  # not reached: unchanged
        assert after[key] == before[key], key
    proxied_kube.clear()
    again = run(cli, prom, policy, "-o", "json")
    assert again.code == 0, again
    rows = {(w["namespace"], w["name"]): w for w in json.loads(again.out)["workloads"]}
    assert rows[("research", "notebook")]["status"] == "done"  # the pod still runs: not again
    notebook = snapshot(kube_api)[("Deployment", "research", "notebook")]
    assert notebook["metadata"]["annotations"]["gpuctl.io/reclaim-replicas"] == "1"  # not "0"


def test_a_409_is_read_again_and_one_that_persists_stops_the_run(
    cli, prom, policy, kube_api, proxied_kube
):
    """A write refused for its resourceVersion (409) is checked again on a fresh read and
    retried; an object that keeps changing stops the run, the rest not reached."""
    before = snapshot(kube_api)
    proxied_kube.on("PATCH", WORKLOAD, reply(409, CONFLICT), nth=None)
    r = run(cli, prom, policy)
    assert r.code == 1, r
    assert "kept changing while gpuctl tried to change it" in r.err
    assert "not done: suspend Job ml/queued, suspend Job ml/stalled" in r.err
    assert len(proxied_kube.seen("PATCH", WORKLOAD)) == 3
    after = snapshot(kube_api)
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {
        ("Job", "ml", "finished"), ("JobSet", "ml", "gang"), ("Deployment", "research", "notebook")
    }  # fmt: skip


def test_a_deployment_scaled_after_the_read_is_not_scaled_to_zero_nor_recorded(
    cli, prom, policy, kube_api, proxied_kube
):
    """Its replica count changes between gpuctl's read and its patch: the patch carries the
    resourceVersion read, so the API server refuses it (409) and no stale count is kept."""
    from kubernetes import client

    apps = client.AppsV1Api(kube_api)

    def scale_up():
        apps.patch_namespaced_deployment_scale("notebook", "research", {"spec": {"replicas": 3}})

    proxied_kube.on("PATCH", DEPLOYMENT, meanwhile(scale_up))
    r = run(cli, prom, policy)
    assert r.code == 1, r
    assert (
        "Deployment research/notebook: scaled to 3 replicas since gpuctl read it: not scaled "
        "to zero from 1, nothing recorded on it" in r.err
    ), r.err
    assert "not done: scale-to-zero Deployment research/notebook" in r.err
    notebook = snapshot(kube_api)[("Deployment", "research", "notebook")]
    assert notebook["spec"]["replicas"] == 3
    assert not {"gpuctl.io/reclaim", "gpuctl.io/reclaim-replicas"} & set(
        notebook["metadata"].get("annotations") or {}
    )


def test_ctrl_c_mid_run_says_what_was_done(prom, policy, kube_api, proxied_kube):
    before = snapshot(kube_api)
    rule = proxied_kube.on("PATCH", WORKLOAD, delay(5, forward=False))
    proc = children.start(
        [sys.executable, "-m", "gpuctl", "reclaim", "--policy", policy, "--prometheus", prom.url, "--yes"],
        cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    code, out, err = children.interrupt_when(proc, rule.fired)
    assert code == 130, err
    assert (
        "interrupted; done: suspend Job ml/finished, suspend JobSet ml/gang, scale-to-zero Deployment research/notebook"
        in err
    )
    after = snapshot(kube_api)
    assert after[("Job", "ml", "stalled")] == before[("Job", "ml", "stalled")]  # never reached
