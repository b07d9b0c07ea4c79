"""`gpuctl make-room` against the API emulator (which runs the Eviction API with PDBs): the
dry run changes nothing; --yes evicts exactly the planned pods, in order."""

from __future__ import annotations

import json

import pytest

from tests.reclaim.test_room import fragmented, owners_of

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(kube, kube_api):
    return seed_cluster(kube_api)


def seed_cluster(kube_api):
    """The fragmented cluster's nodes, pods and the pods' ReplicaSets."""
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    nodes, pods = fragmented()
    for n in nodes:
        core.create_node(n, _preload_content=False)
    apps = client.AppsV1Api(kube_api)
    for (kind, ns, name), _ in owners_of(pods).items():  # each pod's ReplicaSet
        rs = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
              "spec": {"selector": {"matchLabels": {"rs": name}}, "template": TEMPLATE}}  # fmt: skip
        apps.create_namespaced_replica_set(ns, rs, _preload_content=False)
    for p in pods:
        core.create_namespaced_pod(
            "ml", {"apiVersion": "v1", "kind": "Pod", **p}, _preload_content=False
        )
    return core


TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "x"}]}}


def names(core) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod("ml").items}


def test_make_room_for_an_8_gpu_job_evicts_the_fewest_pods(cluster, cli):
    before = names(cluster)
    r = cli("make-room", "--for", "1x8", "-o", "json")
    assert r.code == 0, r
    plan = json.loads(r.out)
    assert (plan["found"], plan["fewest_proven"], plan["evictions"]) == (True, True, 2)
    assert names(cluster) == before  # a dry run
    r = cli("make-room", "--for", "1x8", "--yes")
    assert r.code == 0, r
    assert names(cluster) == before - {e.split("/")[1] for e in plan["evict"]}


def test_a_job_that_can_never_fit_gets_no_plan(cluster, cli):
    before = names(cluster)
    r = cli("make-room", "--for", "1x16", "-o", "json")
    assert r.code == 1, r
    assert json.loads(r.out)["found"] is False
    assert names(cluster) == before


def test_a_refused_eviction_stops_make_room_at_the_first_failure(cluster, cli, proxied_kube):
    from tests.standins.faults import reply

    status = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
                         "reason": "TooManyRequests",
                         "message": "Cannot evict pod as it would violate the pod's disruption budget."})  # fmt: skip
    before = names(cluster)
    proxied_kube.on("POST", r"/api/v1/namespaces/ml/pods/.*/eviction", reply(429, status))
    r = cli("make-room", "--for", "1x8", "--yes")
    assert r.code == 1, r
    assert (
        "disruption budget" in r.err
        and "evicted: nothing" in r.err
        and "not evicted: pod ml/" in r.err
    )
    assert names(cluster) == before  # refused: nothing evicted, nothing tried after it
    assert len(proxied_kube.seen("POST", r"/api/v1/namespaces/ml/pods/.*/eviction")) == 1
