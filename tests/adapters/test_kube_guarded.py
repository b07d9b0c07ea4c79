"""Guarded writes through the official client against the API emulator, with a fault proxy
that lets another client act just before gpuctl's request lands, or loses its answer: a
field another client changed is never overwritten nor undone; an eviction whose answer is
lost or failed is read back (gone: evicted; there: not); a pod replaced under its name is
not evicted."""

from __future__ import annotations

import json

import pytest

from gpuctl.adapters.kube import Kube, NoAnswer
from gpuctl.adapters.kube_guarded import Changed, Evictions, Target, change_fields, restore_fields
from tests.gpu_cluster import node, pod, seed
from tests.standins.faults import drop_answer, meanwhile, reply

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kube_client")]
CONFIG = ("metadata", "labels", "nvidia.com/mig.config")
CORDON = ("spec", "unschedulable")
NODE = Target("Node", "gpu-1")
EVICTION = "/api/v1/namespaces/ml/pods/p1/eviction"
SERVER_ERROR = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
                           "reason": "InternalError", "message": "etcdserver: request timed out"})  # fmt: skip


def core(kube_api):
    from kubernetes import client

    return client.CoreV1Api(kube_api)


@pytest.fixture
def cluster(kube, kube_api):
    gpu = node("gpu-1", labels={"nvidia.com/mig.config": "all-disabled"})
    seed(kube_api, gpu, pod("p1", "ml", 1))
    return core(kube_api)


def labels(api) -> dict:
    return api.read_node("gpu-1").metadata.labels


def test_fields_are_set_only_while_what_was_read_holds(cluster, proxied_kube):
    def theirs():
        cluster.patch_node("gpu-1", {"metadata": {"labels": {"nvidia.com/mig.config": "theirs"}}})

    with Kube() as kube:
        change_fields(kube, NODE, {CONFIG: "all-disabled"}, {CONFIG: "all-1g.10gb"})
        assert labels(cluster)["nvidia.com/mig.config"] == "all-1g.10gb"
        proxied_kube.on("PATCH", "/api/v1/nodes/gpu-1", meanwhile(theirs))
        with pytest.raises(Changed) as e:  # refused by its test op, then read again
            change_fields(kube, NODE, {CONFIG: "all-1g.10gb"}, {CONFIG: "all-2g.20gb"})
    assert str(e.value) == (
        'node gpu-1: nvidia.com/mig.config is "theirs", not "all-1g.10gb": another client '
        "changed it; left as it is"
    )
    assert labels(cluster)["nvidia.com/mig.config"] == "theirs"


def test_a_cordon_made_just_before_gpuctls_stops_it(cluster, proxied_kube):
    def cordon():
        cluster.patch_node("gpu-1", {"spec": {"unschedulable": True}})

    proxied_kube.on("PATCH", "/api/v1/nodes/gpu-1", meanwhile(cordon))
    with Kube() as kube, pytest.raises(Changed) as e:  # unset is held by resourceVersion
        change_fields(kube, NODE, {CORDON: None}, {CORDON: True, CONFIG: "x"})
    assert "spec.unschedulable is true, not unset" in str(e.value)
    assert labels(cluster)["nvidia.com/mig.config"] == "all-disabled"


def test_only_what_still_holds_gpuctls_value_is_put_back(cluster):
    ours, before = {CONFIG: "all-1g.10gb"}, {CONFIG: "all-disabled"}
    with Kube() as kube:
        assert restore_fields(kube, NODE, ours, before) is None  # never set: nothing to undo
        change_fields(kube, NODE, before, ours)
        cluster.patch_node("gpu-1", {"metadata": {"labels": {"nvidia.com/mig.config": "theirs"}}})
        left = restore_fields(kube, NODE, ours, before)
        assert (
            left
            == 'nvidia.com/mig.config is "theirs", not "all-1g.10gb": another client\'s, left as it is'
        )
        assert labels(cluster)["nvidia.com/mig.config"] == "theirs"
        cluster.patch_node(
            "gpu-1", {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}}
        )
        assert restore_fields(kube, NODE, ours, before) == ""
    assert labels(cluster)["nvidia.com/mig.config"] == "all-disabled"


@pytest.mark.parametrize("fault", [drop_answer(), reply(500, SERVER_ERROR, forward=True)])
def test_an_eviction_whose_answer_is_lost_or_failed_is_read_back(cluster, proxied_kube, fault):
    proxied_kube.on("POST", EVICTION, fault)
    ledger = Evictions()
    with Kube() as kube:
        uid = cluster.read_namespaced_pod("p1", "ml").metadata.uid
        assert ledger.evict(kube, "ml", "p1", uid)  # made upstream: gone
    assert ledger.done == ["ml/p1"] and ledger.under_way is None
    assert cluster.list_namespaced_pod("ml").items == []


def test_an_eviction_that_did_not_happen_is_not_counted(cluster, proxied_kube):
    proxied_kube.on("POST", EVICTION, reply(500, SERVER_ERROR))  # never reached the server
    ledger = Evictions()
    with Kube() as kube, pytest.raises(NoAnswer):
        ledger.evict(kube, "ml", "p1", None)
    assert ledger.done == [] and ledger.under_way is None
    assert [p.metadata.name for p in cluster.list_namespaced_pod("ml").items] == ["p1"]


def test_a_pod_replaced_or_marked_just_before_its_eviction_stays(cluster, proxied_kube):
    from gpuctl.k8s.marks import marked

    old = cluster.read_namespaced_pod("p1", "ml").metadata.uid

    def replace():
        cluster.delete_namespaced_pod("p1", "ml")
        seed(cluster.api_client, pod("p1", "ml", 1))

    proxied_kube.on("POST", EVICTION, meanwhile(replace))
    ledger = Evictions()
    with Kube() as kube, pytest.raises(Changed) as e:
        ledger.evict(kube, "ml", "p1", old)
    assert "Pod ml/p1 was replaced under the same name" in str(e.value)
    assert cluster.read_namespaced_pod("p1", "ml").metadata.uid != old

    def mark():
        cluster.patch_namespaced_pod(
            "p1", "ml", {"metadata": {"labels": {"gpuctl.io/evict": "never"}}}
        )

    proxied_kube.clear()
    proxied_kube.on("POST", EVICTION, meanwhile(mark))
    with Kube() as kube, pytest.raises(Changed) as e:
        ledger.evict(kube, "ml", "p1", None, marked)  # held by its resourceVersion: 409
    assert "pod ml/p1: gpuctl.io/evict: never (label); not evicted" in str(e.value)
    assert ledger.done == [] and cluster.read_namespaced_pod("p1", "ml")


def test_a_change_refused_as_it_is_is_that_refusal_not_a_race(kube, kube_api):
    """A 422 for the change itself (the CRD's schema) is not a test op that failed: the
    object did not change in between, so the refusal is said as the server said it."""
    from gpuctl.adapters.kube import Invalid
    from tests.kueue_workloads import workload_for

    kube.install_crds("Workload")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}  # fmt: skip
    wl = workload_for(job)
    seed(kube_api, wl)
    target = Target("Workload", wl["metadata"]["name"], "ml", wl["apiVersion"])
    with Kube() as k, pytest.raises(Invalid):
        change_fields(k, target, {}, {("spec", "active"): "not a boolean"})
