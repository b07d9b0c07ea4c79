"""`gpuctl sched extender`: the verbs on a view of real node and pod objects, the same
choice as the replay's extender policy, over HTTP as kube-scheduler calls it, and kept in
sync by watches against the API emulator."""

import http.client
import json
import threading

import numpy as np
import pytest

from gpuctl.gpus.fragmentation import typical_shapes
from gpuctl.sched import extender as server_module
from gpuctl.sched.core.extender import ClusterView, pod_of
from gpuctl.whatif.core import replay as rp
from gpuctl.whatif.core.trace import Node, Pod

LABEL = "nvidia.com/gpu.product"


def node(name, gpus=8, cpu="64", model="A100"):
    return {
        "metadata": {"name": name, "labels": {LABEL: model}},
        "status": {"allocatable": {"cpu": cpu, "memory": "512Gi", "nvidia.com/gpu": str(gpus)}},
    }


def pod(name, gpus=1, cores=None, cpu="4", node_name=None, phase="Running", created="1"):
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    if cores is not None:
        limits["nvidia.com/gpucores"] = str(cores)
    return {
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": created},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu}, "limits": limits}}
            ],
        },
        "status": {"phase": phase},
    }


def test_a_pods_request_whole_gpus_a_share_and_cpu():
    assert pod_of(pod("a", 2), LABEL).gpu_request == 2000
    share = pod_of(pod("b", 1, cores=30, cpu="500m"), LABEL)
    assert (share.gpus, share.gpu_milli, share.cpu_milli) == (1, 300, 500)
    assert pod_of(pod("c", 0), LABEL).gpu_request == 0


def test_filter_checks_what_kube_scheduler_cannot_see():
    view = ClusterView(LABEL)
    view.replace(
        [node("a", 2), node("b", 2), node("t4", 1, model="T4")],
        [pod("x", 1, cores=80, node_name="a"), pod("y", 1, cores=80, node_name="a"),
         pod("z", 1, node_name="b")],
    )  # fmt: skip
    args = {"pod": pod("new", 1, cores=50), "nodenames": ["a", "b", "t4", "gone"]}
    result = view.filter(args)
    # a: both GPUs have 20 % free; b has one whole GPU free; t4 is free
    assert result["nodenames"] == ["b", "t4"]
    assert set(result["failedNodes"]) == {"a", "gone"}
    assert "no GPU with 50 % free" in result["failedNodes"]["a"]
    whole = {"pod": pod("two", 2), "nodenames": ["a", "b", "t4"]}
    assert view.filter(whole)["nodenames"] == []
    selected = pod("sel", 1)
    selected["spec"]["nodeSelector"] = {LABEL: "T4"}
    assert view.filter({"pod": selected, "nodenames": ["b", "t4"]})["nodenames"] == ["t4"]


def test_prioritize_ranks_the_best_ten_and_one_wins():
    view = ClusterView(LABEL)
    nodes = [node(f"n{i:02}", 4) for i in range(15)]
    view.replace(nodes, [pod("p", 1, cores=50, node_name="n03"), pod("q", 1, cores=30)])
    names = [f"n{i:02}" for i in range(15)]
    scores = view.prioritize({"pod": pod("new", 1, cores=50), "nodenames": names})
    # only the ten ranked nodes are listed: kube-scheduler scores the others 0
    assert {s["host"] for s in scores} < set(names)
    values = sorted((s["score"] for s in scores), reverse=True)
    assert values == [10, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    # the half-used GPU of n03 takes the half share: no new fragment
    assert max(scores, key=lambda s: s["score"])["host"] == "n03"


def test_the_extender_chooses_what_the_replay_of_it_chooses():
    """One implementation: ClusterView on API objects and the replay's extender policy on
    the same cluster make the same choice, pod after pod."""
    rng = np.random.default_rng(1)
    trace_nodes = [
        Node(f"n{i}", 32000 + 16000 * (i % 3), 10**6, 2 + 2 * (i % 4), "A") for i in range(12)
    ]
    trace_pods = []
    for i in range(60):
        gpus = int(rng.choice([0, 1, 1, 1, 2]))
        share = int(rng.choice([250, 500, 1000])) if gpus == 1 else (1000 if gpus else 0)
        trace_pods.append(Pod(f"p{i:02}", 1000 * int(rng.integers(1, 8)), 1, gpus, share))
    shapes = typical_shapes(trace_pods)
    cluster = rp.Cluster(trace_nodes)
    policy = rp.Extender(cluster, shapes)
    objects = [node(n.name, n.gpus, str(n.cpu_milli // 1000), "A") for n in trace_nodes]
    placed = []
    for p in trace_pods:
        if not p.gpus:
            continue
        fits = cluster.fits(p)
        if not fits.any():
            continue
        chosen, gpu = policy.choose(cluster, p, fits)
        obj = pod(
            p.name, p.gpus, p.gpu_milli // 10 if p.gpu_milli < 1000 else None, f"{p.cpu_milli}m"
        )
        view = ClusterView(LABEL)
        view.replace(objects, placed)
        view.shapes = shapes
        view._placement = None  # the replay's shapes, not those of the pods bound so far
        candidates = [trace_nodes[i].name for i in np.flatnonzero(fits)]
        scores = view.prioritize({"pod": obj, "nodenames": candidates})
        assert max(scores, key=lambda s: s["score"])["host"] == trace_nodes[chosen].name
        cluster.place(chosen, p, gpu)
        policy.placed(cluster, chosen)
        obj["spec"]["nodeName"] = trace_nodes[chosen].name
        obj["metadata"]["creationTimestamp"] = f"{len(placed):04}"
        placed.append(obj)
    assert len(placed) > 20


@pytest.fixture
def served():
    view = ClusterView(LABEL)
    view.replace([node("a", 2), node("b", 8)], [pod("x", 1, node_name="a")])
    ext = server_module.Extender(view)
    http_server = server_module.server(ext, "127.0.0.1", 0)
    thread = threading.Thread(target=http_server.serve_forever, daemon=True)
    thread.start()
    yield ext, http_server.server_address[1]
    http_server.shutdown()
    http_server.server_close()


def call(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    return response.status, answer


@pytest.mark.integration
def test_over_http_as_kube_scheduler_calls_it(served):
    ext, port = served
    assert call(port, "GET", "/healthz") == (503, {"ready": False})
    args = {"pod": pod("new", 2), "nodenames": ["a", "b"]}
    status, answer = call(port, "POST", "/filter", args)
    assert status == 200 and "not synced" in answer["error"]
    ext.ready.set()
    assert call(port, "GET", "/healthz") == (200, {"ready": True})
    status, answer = call(port, "POST", "/filter", args)
    assert status == 200 and answer["nodenames"] == ["b"] and answer["error"] == ""
    status, answer = call(
        port, "POST", "/prioritize", {"pod": pod("new", 1), "nodenames": ["a", "b"]}
    )
    assert status == 200 and sorted(answer, key=lambda h: h["host"]) == [
        {"host": "a", "score": 10},  # the one free GPU of a: no whole node broken
        {"host": "b", "score": 9},
    ]
    assert call(port, "POST", "/bind", args)[0] == 404


@pytest.mark.integration
def test_watches_keep_the_view_in_sync(kube, kube_api):
    from gpuctl.adapters.kube import Kube
    from tests.gpu_cluster import seed

    def api_node(name, gpus):
        return {"apiVersion": "v1", "kind": "Node", **node(name, gpus)}

    def api_pod(name, gpus, node_name):
        return {"apiVersion": "v1", "kind": "Pod", **pod(name, gpus, node_name=node_name)}

    seed(kube_api, api_node("a", 2), api_pod("x", 2, "a"))
    ext = server_module.Extender(ClusterView(LABEL))
    stop = threading.Event()
    thread = threading.Thread(
        target=server_module.keep_in_sync, args=(ext, Kube, stop, 2), daemon=True
    )
    thread.start()
    assert ext.ready.wait(10)
    args = {"pod": pod("new", 1), "nodenames": ["a", "b"]}
    with ext.lock:
        assert ext.view.filter(args)["nodenames"] == []
    seed(kube_api, api_node("b", 4))

    def answer():
        with ext.lock:
            return ext.view.filter(args)["nodenames"]

    assert _eventually(lambda: answer() == ["b"])
    from kubernetes import client

    client.CoreV1Api(kube_api).delete_namespaced_pod("x", "ml")
    assert _eventually(lambda: answer() == ["a", "b"])
    stop.set()


def _eventually(check, seconds=10.0):
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False
