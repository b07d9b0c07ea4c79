"""The API emulator (tests/standins/kube.py) read by a real kubectl: what every Kubernetes
test trusts must be what a real API server sends, and kubectl is the strictest common
reader of it (list kinds, discovery, Status errors, watch streams, client-side apply)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from gpuctl.adapters import kube as adapter
from tests.gpu_cluster import node, pod, seed
from tests.standins.kube import KUBECTL


def one_of_each(kinds: dict) -> list[dict]:
    """One object of every kind gpuctl reads and writes (the namespace ml first)."""
    pod_template: dict = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    specs: dict[str, dict] = {
        "ConfigMap": {"data": {"a": "1"}},
        "Secret": {"data": {"t": "eA=="}},
        "PersistentVolumeClaim": {
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            }
        },
        "ResourceQuota": {"spec": {"hard": {"requests.nvidia.com/gpu": "8"}}},
        "Service": {"spec": {"ports": [{"port": 80}]}},
        "Job": {"spec": pod_template},
        "CronJob": {"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": pod_template}}},
        "DaemonSet": {"spec": {"selector": {"matchLabels": {"a": "b"}}, **pod_template}},
        "Deployment": {"spec": {"selector": {"matchLabels": {"a": "b"}}, **pod_template}},
        "StatefulSet": {"spec": {"selector": {"matchLabels": {"a": "b"}}, **pod_template}},
        "ReplicaSet": {"spec": {"selector": {"matchLabels": {"a": "b"}}, **pod_template}},
        "HorizontalPodAutoscaler": {
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "maxReplicas": 2,
            }
        },
        "PodDisruptionBudget": {"spec": {"maxUnavailable": 1}},
        "Event": {"involvedObject": {"kind": "Pod", "name": "p1", "namespace": "ml"}},
        "ScaledObject": {
            "spec": {
                "scaleTargetRef": {"name": "d"},
                "triggers": [{"type": "cpu", "metadata": {"value": "50"}}],
            }
        },
        "TriggerAuthentication": {
            "spec": {"secretTargetRef": [{"parameter": "bearerToken", "name": "s", "key": "t"}]}
        },
        "ResourceFlavor": {"spec": {}},
        "Topology": {"spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}},
        "ClusterQueue": {"spec": {"namespaceSelector": {}}},
        "LocalQueue": {"spec": {"clusterQueue": "team-a"}},
        "Workload": {
            "spec": {"queueName": "a", "podSets": [{"name": "main", "count": 1, **pod_template}]}
        },
        "JobSet": {"spec": {"replicatedJobs": [{"name": "w", "template": {"spec": pod_template}}]}},
        "ComputeDomain": {"spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "c"}}}},
        "DeviceClass": {"spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}},
        "ResourceSlice": {
            "spec": {
                "driver": "gpu.nvidia.com", "nodeName": "gpu-1",
                "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}],
            }
        },
        "ResourceClaim": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
        "ResourceClaimTemplate": {"spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}},
    }  # fmt: skip
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
        node("gpu-1"),
        pod("p1", "ml", 1, node_name="gpu-1"),
    ]
    for kind, (api_version, namespaced) in kinds.items():
        if kind in specs:
            meta = {"name": f"a-{kind.lower()}", **({"namespace": "ml"} if namespaced else {})}
            objects.append(
                {"apiVersion": api_version, "kind": kind, "metadata": meta, **specs[kind]}
            )
    return objects


def test_kubectl_gets_every_kind_gpuctl_reads(kube, kube_api, kubectl):
    kinds = {k: (v, namespaced) for k, (v, _, namespaced) in adapter.KINDS.items()}
    kube.install_crds(
        "ResourceFlavor",
        "Topology",
        "ClusterQueue",
        "LocalQueue",
        "Workload",
        "JobSet",
        "ScaledObject",
        "TriggerAuthentication",
        "ComputeDomain",
    )
    objects = one_of_each(kinds)
    seed(kube_api, *objects[:3])  # through the official client
    created = kubectl(  # the rest as kubectl apply sends them: JSON, one request each
        "apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects[3:])
    ).stdout
    assert created.count(" created") == len(objects) - 3, created
    assert {o["kind"] for o in objects} == set(kinds)

    resources = []
    for kind, (api_version, _) in kinds.items():
        group, _, version = api_version.rpartition("/")
        # by version too (autoscaling serves v1 and v2): the emulator keeps each version's
        # objects apart
        resources.append(f"{kind.lower()}.{version}.{group}" if group else kind.lower())
    answer = json.loads(kubectl("get", ",".join(resources), "-A", "-o", "json").stdout)
    assert answer["kind"] == "List"
    assert sorted(i["kind"] for i in answer["items"]) == sorted(kinds)
    for item in answer["items"]:
        assert item["apiVersion"] == kinds[item["kind"]][0]
        meta = item["metadata"]
        assert meta["uid"] and meta["creationTimestamp"].endswith("Z"), item["kind"]
        assert int(meta["resourceVersion"]) > 0, item["kind"]
    table = kubectl("get", ",".join(resources), "-A").stdout  # kubectl's table of plain lists
    for o in objects:
        assert o["metadata"]["name"] in table, (o["kind"], table)


def test_the_emulator_answers_lists_and_errors_as_a_server_does(kube, kube_api):
    """The raw answers, as the official client receives them."""
    import urllib3

    seed(kube_api, node("gpu-1"), pod("p1", "ml", 1))
    http = urllib3.PoolManager()
    nodes = json.loads(http.request("GET", kube.url + "/api/v1/nodes").data)
    assert (nodes["kind"], nodes["apiVersion"]) == ("NodeList", "v1")
    assert int(nodes["metadata"]["resourceVersion"]) >= 3  # after both creates
    assert "kind" not in nodes["items"][0]  # a real server's list items carry no kind
    core = json.loads(http.request("GET", kube.url + "/api/v1").data)
    assert core["groupVersion"] == "v1"
    missing = http.request("GET", kube.url + "/api/v1/namespaces/ml/pods/nope")
    assert missing.status == 404
    assert json.loads(missing.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }


def test_kubectl_apply_configures_and_delete_removes(kube, kubectl):
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "default"},
        "data": {"a": "1"},
    }
    assert "configmap/cfg created" in kubectl("apply", "-f", "-", stdin=json.dumps(cm)).stdout
    first = json.loads(kubectl("get", "configmap", "cfg", "-o", "json").stdout)
    changed = {**cm, "data": {"a": "2"}}
    out = kubectl("apply", "-f", "-", stdin=json.dumps(changed)).stdout
    assert "configmap/cfg configured" in out
    now = json.loads(kubectl("get", "configmap", "cfg", "-o", "json").stdout)
    assert now["data"] == {"a": "2"}
    assert now["metadata"]["uid"] == first["metadata"]["uid"]
    assert int(now["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert "kubectl.kubernetes.io/last-applied-configuration" in now["metadata"]["annotations"]

    again = kubectl("create", "-f", "-", stdin=json.dumps(cm), ok=False)
    assert again.returncode == 1
    assert 'Error from server (AlreadyExists): error when creating "STDIN": configmaps "cfg" ' in (
        again.stderr
    )
    stale = kubectl(
        "patch",
        "configmap",
        "cfg",
        "--type=merge",
        "-p",
        json.dumps({"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]}}),
        ok=False,
    )
    assert "Error from server (Conflict)" in stale.stderr and "has been modified" in stale.stderr

    assert 'configmap "cfg" deleted' in kubectl("delete", "configmap", "cfg").stdout
    gone = kubectl("get", "configmap", "cfg", ok=False)
    assert gone.returncode == 1
    assert 'Error from server (NotFound): configmaps "cfg" not found' in gone.stderr


def test_kubectl_watch_sees_what_happens_after_its_list(kube, kube_api, kubectl):
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before"}, "data": {}}
    core.create_namespaced_config_map("default", cm)
    watch = subprocess.Popen(
        [KUBECTL, "get", "configmaps", "-w", "--output-watch-events"],
        env=kubectl.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline().split() == ["EVENT", "NAME", "AGE"]
        assert watch.stdout.readline().split()[:2] == ["ADDED", "before"]  # the list
        time.sleep(0.5)  # kubectl's watch request goes out after its list
        core.create_namespaced_config_map("default", {**cm, "metadata": {"name": "after"}})
        core.patch_namespaced_config_map("after", "default", {"data": {"a": "1"}})
        core.delete_namespaced_config_map("after", "default")
        lines = [watch.stdout.readline().split()[:2] for _ in range(3)]
    finally:
        watch.kill()
        watch.wait(10)
    # not ADDED before again: a watch from the list's resourceVersion sends only what is newer
    assert lines == [["ADDED", "after"], ["MODIFIED", "after"], ["DELETED", "after"]]


def test_a_watch_ends_after_its_timeout(kube, kube_api):
    from kubernetes import client, watch

    seed(kube_api, node("gpu-1"))
    started = time.monotonic()
    events = list(watch.Watch().stream(client.CoreV1Api(kube_api).list_node, timeout_seconds=1))
    assert [e["object"].metadata.name for e in events] == ["gpu-1"]
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("selector", "kept"),
    [
        ({}, True),  # policy/v1: an empty selector selects every pod of its namespace
        (None, False),  # a null one selects none
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, True),
        ({"matchLabels": {"app": "web"}}, False),
    ],
)
def test_the_eviction_api_keeps_the_pods_a_budget_selects(kube, kube_api, selector, kept):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    seed(kube_api, pod("p1", "ml", 1))
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "b", "namespace": "ml"},
              "spec": {"maxUnavailable": 0, **({"selector": selector} if selector is not None else {})},
              "status": {"disruptionsAllowed": 0}}  # fmt: skip
    client.PolicyV1Api(kube_api).create_namespaced_pod_disruption_budget(
        "ml", budget, _preload_content=False
    ).release_conn()
    core = client.CoreV1Api(kube_api)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1"}}
    if kept:
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod_eviction("p1", "ml", eviction, _preload_content=False)
        assert refused.value.status == 429
        assert [p.metadata.name for p in core.list_namespaced_pod("ml").items] == ["p1"]
    else:
        core.create_namespaced_pod_eviction("p1", "ml", eviction, _preload_content=False)
        assert core.list_namespaced_pod("ml").items == []


def test_a_json_patch_whose_test_fails_changes_nothing(kube, kube_api, kubectl):
    """Applied whole or not at all, refused with the body a real server sends for it
    (apiserver handlers/patch.go: NewGenericServerResponse(422, …)): kubectl says so."""
    seed(kube_api, node("gpu-1"))
    before = json.loads(kubectl("get", "node", "gpu-1", "-o", "json").stdout)
    ops = [
        {"op": "add", "path": "/metadata/labels/team", "value": "a"},
        {"op": "test", "path": "/metadata/uid", "value": "someone-else"},
    ]
    r = kubectl("patch", "node", "gpu-1", "--type=json", "-p", json.dumps(ops), ok=False)
    assert r.returncode == 1
    assert "the server rejected our request due to an error in our request" in r.stderr
    after = json.loads(kubectl("get", "node", "gpu-1", "-o", "json").stdout)
    assert after == before
    ops[1]["value"] = before["metadata"]["uid"]
    kubectl("patch", "node", "gpu-1", "--type=json", "-p", json.dumps(ops))
    labels = json.loads(kubectl("get", "node", "gpu-1", "-o", "json").stdout)["metadata"]["labels"]
    assert labels == {**before["metadata"]["labels"], "team": "a"}


@pytest.mark.parametrize("field", ["uid", "resourceVersion"])
def test_an_evictions_preconditions_must_hold(kube, kube_api, field):
    """deleteOptions.preconditions, checked as the API server's delete checks them: 409."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    seed(kube_api, pod("p1", "ml", 1))
    core = client.CoreV1Api(kube_api)
    now = core.read_namespaced_pod("p1", "ml").metadata
    held = {"uid": now.uid, "resourceVersion": now.resource_version}
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1"},
                "deleteOptions": {"preconditions": {**held, field: "another"}}}  # fmt: skip
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("p1", "ml", eviction, _preload_content=False)
    assert refused.value.status == 409
    assert "Precondition failed" in json.loads(refused.value.body)["message"]
    assert [p.metadata.name for p in core.list_namespaced_pod("ml").items] == ["p1"]
    eviction["deleteOptions"]["preconditions"] = held
    core.create_namespaced_pod_eviction("p1", "ml", eviction, _preload_content=False)
    assert core.list_namespaced_pod("ml").items == []
