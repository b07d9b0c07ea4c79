"""The sandbox's controllers follow the cluster as client-go's informers do
(gpuctl.sim.controllers.Simulation.read): the six kinds a tick reads are listed once, then
each tick catches up by a watch from the resourceVersion reached; a 410 Gone lists that
kind again. Against the API emulator over HTTP; what was sent is read from its request
record."""

from __future__ import annotations

import pytest

from gpuctl.sim import cluster
from gpuctl.sim.controllers import BOOKMARK_S, CLAIMS, WATCHED, Api, Simulation
from gpuctl.sim.kueue import API, Kueue
from gpuctl.sim.sandbox import KUEUE_KINDS, seed

pytestmark = pytest.mark.integration
pytest.importorskip("kmock")

PODS, JOBS = "/api/v1/namespaces/ml/pods", "/apis/batch/v1/namespaces/ml/jobs"
KUEUE = f"/apis/{API}"


@pytest.fixture
def sim(kube):
    api = Api(kube.url)
    seed(api, cluster.node_objects(cluster.parse_nodes("2xH100-80GB")), kueue=False)
    api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    kube.bookmark_every(BOOKMARK_S)
    sim = Simulation(api, {}, kube)
    sim.step()
    kube.forget_requests()
    return sim


def _pod(name: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": "x"}]}}


def _job(name: str) -> dict:
    pod = {"containers": [{"name": "main", "image": "x"}], "restartPolicy": "Never"}
    return {"metadata": {"name": name}, "spec": {"template": {"spec": pod}}}


def _reads(kube) -> tuple[list[str], list[dict]]:
    """What the emulator was asked to read: the paths of plain GETs (lists, and gets of
    one object) and the queries of the watches."""
    asked = [(path, query) for method, path, query in kube.requests() if method == "GET"]
    lists = [path for path, query in asked if "watch" not in query]
    watches = [query for path, query in asked if "watch" in query]
    return lists, watches


def _ml(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["metadata"]["namespace"] == "ml"]


def _names(objects: list[dict]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in _ml(objects))


def test_steps_after_the_first_list_nothing_and_watch_from_where_they_were(sim, kube):
    for name in ("a", "b"):
        sim.api.create(JOBS, _job(name))
        sim.step()
    lists, watches = _reads(kube)
    assert lists == []
    # the six kinds a tick acts on and the ResourceClaims the claim controller keeps
    assert set(sim.informers) == {*WATCHED, CLAIMS}
    assert len(watches) == 2 * len(sim.informers)
    assert all(w["resourceVersion"].isdigit() for w in watches)
    assert all(w["allowWatchBookmarks"] == "true" for w in watches)
    assert all(informer.lists == 1 for informer in sim.informers.values())


def test_a_change_between_steps_is_seen_by_the_next_step(sim):
    api = sim.api
    api.create(JOBS, _job("train"))
    api.patch("/api/v1/nodes/h100-node-1", {"metadata": {"labels": {"team": "ml"}}})
    world = sim.step()
    assert _names(world.jobs) == ["train"]
    node = next(n for n in world.nodes if n["metadata"]["name"] == "h100-node-1")
    assert node["metadata"]["labels"]["team"] == "ml"
    (pod,) = _ml(sim.step().pods)  # the pod the step before made, placed by this one
    assert pod["metadata"]["name"].startswith("train-")
    assert _ml(sim.step().pods)[0]["spec"]["nodeName"]  # the step's own write, seen
    api.delete(f"{JOBS}/train")
    world = sim.step()  # the Job's deletion seen: its pod collected
    assert world.jobs == [] and _ml(world.pods) == []
    assert _ml(sim.step().pods) == []


def test_a_version_the_server_no_longer_keeps_lists_again_and_drops_the_deleted(sim, kube):
    api = sim.api
    api.create(PODS, _pod("gone"))
    assert _names(sim.step().pods) == ["gone"]
    kube.call(setattr, kube.emulator, "history", 2)  # the watch cache keeps 2 events a kind
    api.delete(f"{PODS}/gone")
    for name in ("c", "d", "e"):
        api.create(PODS, _pod(name))
    kube.forget_requests()
    assert _names(sim.step().pods) == ["c", "d", "e"]
    lists, _ = _reads(kube)
    assert lists == ["/api/v1/pods"]  # only the kind whose events were dropped
    assert sim.informers["/api/v1/pods"].lists == 2


def test_kueue_reads_its_kinds_through_the_simulations_informers(kube):
    kube.install_crds("JobSet", *KUEUE_KINDS)
    api = Api(kube.url)
    seed(api, cluster.node_objects(cluster.parse_nodes("1xH100-80GB")), kueue=True)
    kube.bookmark_every(BOOKMARK_S)
    sim = Simulation(api, {}, kube, Kueue(api))
    sim.step()
    kube.forget_requests()
    queued = _job("queued")
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "default"}
    api.create("/apis/batch/v1/namespaces/default/jobs", queued)
    sim.step()
    (workload,) = sim.step().others[f"{KUEUE}/workloads"]  # made by the step before
    assert workload["spec"]["queueName"] == "default"
    lists, _ = _reads(kube)
    assert lists == []
    assert set(Kueue.watched) < set(sim.informers)
