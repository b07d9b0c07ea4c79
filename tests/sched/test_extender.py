"""`gpuctl sched extender`: the verbs on a view of node and pod objects, the same choice
as the replay's extender policy, and the view kept in sync by watches against the API
emulator. The protocol over HTTP: test_extender_protocol.py."""

import json
import threading

import numpy as np
import pytest

from gpuctl.gpus.fragmentation import typical_shapes
from gpuctl.sched import extender as server_module
from gpuctl.sched.core import wire
from gpuctl.sched.core.extender import ClusterView, pod_of, slim_node, slim_pod
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


def request(pod_object, names):
    """An ExtenderArgs by node names (nodeCacheCapable), as the extender decodes it."""
    return wire.decode(json.dumps({"Pod": pod_object, "NodeNames": names}).encode())


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
    result = view.filter(request(pod("new", 1, cores=50), ["a", "b", "t4", "gone"]))
    # a: both GPUs have 20 % free; b has one whole GPU free; t4 is free
    assert result["NodeNames"] == ["b", "t4"] and result["Nodes"] is None
    assert set(result["FailedNodes"]) == {"a", "gone"}
    assert "no GPU with 50 % free" in result["FailedNodes"]["a"]
    assert view.filter(request(pod("two", 2), ["a", "b", "t4"]))["NodeNames"] == []
    selected = pod("sel", 1)
    selected["spec"]["nodeSelector"] = {LABEL: "T4"}
    result = view.filter(request(selected, ["b", "t4"]))
    # another GPU model: no preemption would make it fit
    assert result["NodeNames"] == ["t4"] and result["FailedNodes"] == {}
    assert "GPU model is not T4" in result["FailedAndUnresolvableNodes"]["b"]


def test_prioritize_ranks_the_best_ten_and_one_wins():
    view = ClusterView(LABEL)
    nodes = [node(f"n{i:02}", 4) for i in range(15)]
    view.replace(nodes, [pod("p", 1, cores=50, node_name="n03"), pod("q", 1, cores=30)])
    names = [f"n{i:02}" for i in range(15)] + ["unseen"]
    scores = view.prioritize(request(pod("new", 1, cores=50), names))
    # every candidate, in the order sent: the ten ranked 10 … 1, the others 0
    assert [s["Host"] for s in scores] == names
    values = sorted((s["Score"] for s in scores), reverse=True)
    assert values == [10, 9, 8, 7, 6, 5, 4, 3, 2, 1] + [0] * 6
    # the half-used GPU of n03 takes the half share: no new fragment
    assert max(scores, key=lambda s: s["Score"])["Host"] == "n03"


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
        scores = view.prioritize(request(obj, candidates))
        assert max(scores, key=lambda s: s["Score"])["Host"] == trace_nodes[chosen].name
        cluster.place(chosen, p, gpu)
        policy.placed(cluster, chosen)
        obj["spec"]["nodeName"] = trace_nodes[chosen].name
        obj["metadata"]["creationTimestamp"] = f"{len(placed):04}"
        placed.append(obj)
    assert len(placed) > 20


def test_a_slim_pod_and_node_answer_as_the_whole_ones():
    """What the watches' stores keep (slim_pod, slim_node) gives the answers the objects
    the API server sends give, on real-shaped nodes and running pods."""
    from tests.sched.kube_scheduler_wire import api_node, go_json, gpu_pod, running_pod

    def sent(obj):  # as it comes off the wire
        return json.loads(go_json(obj))

    nodes = [sent(api_node(stem, name)) for stem, name in (
        ("gfd-h100", "h100-a"), ("gfd-h100", "h100-b"), ("gfd-a100-80gb", "a100"),
        ("gfd-t4", "t4"),
    )]  # fmt: skip
    pods = [sent(running_pod("held-0", 7, "h100-a")), sent(running_pod("share-0", 1, "a100", 60))]
    pods[1]["spec"]["initContainers"] = [{"name": "fetch", "resources": {"limits": {"cpu": "8"}}}]
    done = sent(running_pod("done-0", 8, "h100-b"))
    done["status"]["phase"] = "Succeeded"
    late = sent(running_pod("late-0", 1, "h100-b", model="NVIDIA-H100-80GB-HBM3"))
    whole, slim = ClusterView(LABEL), ClusterView(LABEL)
    whole.replace(nodes, [*pods, done])
    slim.replace([slim_node(n) for n in nodes], [slim_pod(p) for p in (*pods, done)])
    names = [n["metadata"]["name"] for n in nodes]
    asks = [gpu_pod("one-0", 1), gpu_pod("two-0", 2), gpu_pod("half-0", 1, 50),
            gpu_pod("eight-0", 8), gpu_pod("t4-0", 1, model="Tesla-T4")]  # fmt: skip
    answers = []
    for step in ("synced", "after events"):
        for ask in asks:
            args = request(sent(ask), names)
            answer = whole.filter(args), whole.prioritize(args)
            assert (slim.filter(args), slim.prioritize(args)) == answer, (step, ask)
            answers.append(answer)
        for kind, obj in (("ADDED", late), ("DELETED", pods[0])):
            whole.pod_event(kind, obj)
            slim.pod_event(kind, slim_pod(obj))
    passed = [sorted(f["NodeNames"]) for f, _ in answers]
    assert passed[0] == sorted(names) and passed[3] == ["h100-b"] and passed[4] == ["t4"]
    assert passed[5 + 3] == ["h100-a"]  # the 7 GPUs held are free again, h100-b has one taken
    assert len({tuple(s["Score"] for s in p) for _, p in answers}) > 2


def test_the_pod_store_keeps_a_seventh_of_a_real_pod():
    import msgspec

    from gpuctl.k8s.informer import Informer
    from tests.sched.kube_scheduler_wire import go_json, running_pod

    listed = [json.loads(go_json(running_pod(f"train-{i}", 1, "h100-a"))) for i in range(3)]

    def store_bytes(transform):
        informer = Informer(lambda: (listed, "7"), lambda version: iter(()), transform=transform)
        informer.relist()
        return len(msgspec.json.encode(informer.store))

    whole, slim = store_bytes(None), store_bytes(slim_pod)
    assert whole > 4000 * 3 and slim * 7 < whole, (whole, slim)


def test_the_view_made_at_once_is_the_view_kept_pod_by_pod():
    nodes = [node("a", 4), node("b", 8, model="H100"), node("c", 1, cpu="8")]
    bound = [
        pod(f"p{i}", gpus, cores, node_name=n, created=f"{i:02}")
        for i, (gpus, cores, n) in enumerate(
            [(1, 30, "a"), (2, None, "a"), (1, 50, "a"), (1, 80, "a"), (4, None, "b"),
             (0, None, "c"), (1, 20, "b"), (1, None, "c"), (3, None, "b")]
        )
    ]  # fmt: skip
    at_once, by_pod = ClusterView(LABEL), ClusterView(LABEL)
    at_once.replace(nodes, bound)
    by_pod.replace(nodes, [{**p, "spec": {**p["spec"], "nodeName": None}} for p in bound])
    assert by_pod.shapes == at_once.shapes and not by_pod.pods
    _ = by_pod.placement
    for p in bound:
        by_pod.pod_event("ADDED", p)
    one, other = at_once.placement, by_pod.placement
    assert at_once.gpu_of == by_pod.gpu_of and len(at_once.gpu_of) == len(bound)
    for field in ("gpu_free", "cpu_free", "counted", "free_there", "before"):
        assert np.array_equal(getattr(one, field), getattr(other, field)), field
    # a: 30 % on GPU 0, two whole GPUs, 50 % where it fits with the least free (GPU 0), 80 %
    assert one.gpu_free.tolist()[0][:4] == [200, 0, 0, 200]


def test_a_rebuild_holds_no_request_and_loses_no_event():
    """The view made again (each time a pod watch ends) is built outside the lock; what
    the watches tell meanwhile is served at once and kept in the new view."""
    ext = server_module.Extender(ClusterView(LABEL), server_module.Log(print))
    nodes = [node("a", 2), node("b", 2)]
    two = request(pod("new", 2), ["a", "b"])
    with ext.lock:
        ext.replace(nodes, [pod("x", 2, node_name="a")])
    served = []

    def pods_read_while_built():
        yield pod("x", 2, node_name="a")
        assert ext.lock.acquire(blocking=False)  # a request now is not held
        try:
            served.append(ext.view.filter(two)["NodeNames"])
            ext.pod_event("DELETED", pod("x", 2, node_name="a"))
            ext.pod_event("ADDED", pod("y", 2, node_name="b"))
            served.append(ext.view.filter(two)["NodeNames"])
        finally:
            ext.lock.release()

    before = ext.view
    ext.rebuild(lambda: nodes, pods_read_while_built)
    assert served == [["b"], ["a"]]
    assert ext.view is not before and sorted(ext.view.pods) == ["ml/y"]
    assert ext.view.filter(two)["NodeNames"] == ["a"]


def test_a_list_during_a_rebuild_wins():
    ext = server_module.Extender(ClusterView(LABEL), server_module.Log(print))
    nodes = [node("a", 2)]
    with ext.lock:
        ext.replace(nodes, [])

    def pods_read_while_built():
        yield pod("old", 2, node_name="a")
        with ext.lock:  # a 410 Gone: the pods listed again
            ext.replace(nodes, [pod("listed", 1, node_name="a")])

    before = ext.view
    ext.rebuild(lambda: nodes, pods_read_while_built)
    assert ext.view is before and sorted(ext.view.pods) == ["ml/listed"]


@pytest.mark.integration
def test_watches_keep_the_view_in_sync(kube, kube_api):
    from gpuctl.adapters.kube import Kube
    from tests.gpu_cluster import seed

    def api_node(name, gpus):
        return {"apiVersion": "v1", "kind": "Node", **node(name, gpus)}

    def api_pod(name, gpus, node_name):
        return {"apiVersion": "v1", "kind": "Pod", **pod(name, gpus, node_name=node_name)}

    seed(kube_api, api_node("a", 2), api_pod("x", 2, "a"))
    ext, stop, _ = _in_sync(Kube, 2)
    assert ext.ready.wait(10)
    args = request(pod("new", 1), ["a", "b"])
    with ext.lock:
        assert ext.view.filter(args)["NodeNames"] == []
    seed(kube_api, api_node("b", 4))

    def answer():
        with ext.lock:
            return ext.view.filter(args)["NodeNames"]

    assert _eventually(lambda: answer() == ["b"])
    from kubernetes import client

    client.CoreV1Api(kube_api).delete_namespaced_pod("x", "ml")
    assert _eventually(lambda: answer() == ["a", "b"])
    stop.set()


@pytest.mark.integration
def test_the_view_resumes_its_watches_and_lists_again_only_on_410(kube, kube_api):
    import time

    from kubernetes import client

    from gpuctl.adapters.kube import Kube
    from tests.gpu_cluster import seed

    core = client.CoreV1Api(kube_api)
    seed(kube_api, {"apiVersion": "v1", "kind": "Node", **node("a", 8)})
    for name in ("x", "y"):
        seed(kube_api, {"apiVersion": "v1", "kind": "Pod", **pod(name, 2, node_name="a")})
    ext, stop, thread = _in_sync(Kube, 2)
    assert ext.ready.wait(10)
    args = request(pod("new", 6), ["a"])

    def fits():
        with ext.lock:
            return ext.view.filter(args)["NodeNames"] == ["a"]

    def pod_lists():
        return [q for _, p, q in kube.requests() if p == "/api/v1/pods" and "watch" not in q]

    assert not fits()
    time.sleep(3)  # watches of 2 s end and resume: no list
    assert len(pod_lists()) == 1
    core.delete_namespaced_pod("x", "ml")
    assert _eventually(fits)
    # Held, the view takes no event: the pod watch stops at its bookmark (1 s before its
    # end) and the server ends it; what changes then is not kept (history 0), so its
    # next watch, from the bookmark's version, is answered 410: the pods are listed again.
    with ext.lock:
        time.sleep(5)  # past the end of a watch that was starting when the lock was taken
        kube.call(setattr, kube.emulator, "history", 0)
        seed(kube_api, {"apiVersion": "v1", "kind": "Pod", **pod("w", 6, node_name="a")})
        core.delete_namespaced_pod("y", "ml")

    def bound():
        with ext.lock:
            return sorted(ext.view.pods)

    assert _eventually(lambda: bound() == ["ml/w"])
    assert len(pod_lists()) == 2
    assert not fits()
    stop.set()
    thread.join(10)


def _in_sync(connect, *watch_s, log=lambda line: None):
    """An extender kept in sync with the cluster CONNECT reaches, by a thread of its own."""
    ext = server_module.Extender(ClusterView(LABEL), server_module.Log(log))
    stop = threading.Event()
    thread = threading.Thread(
        target=server_module.keep_in_sync, args=(ext, connect, stop, *watch_s), daemon=True
    )
    thread.start()
    return ext, stop, thread


def _eventually(check, seconds=10.0):
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_a_cluster_it_cannot_read_is_said_once_not_retried_silently():
    from gpuctl.common.errors import BackendError

    lines, attempts = [], []

    def connect():
        attempts.append(1)
        raise BackendError("cannot reach the Kubernetes API server at https://10.0.0.1:6443")

    ext, stop, thread = _in_sync(connect, log=lines.append)
    assert _eventually(lambda: len(attempts) >= 3, seconds=10)
    stop.set()
    thread.join(10)
    assert not ext.ready.is_set()
    assert lines == [
        "cannot read the cluster (retrying every 1 s): cannot reach the Kubernetes API server "
        "at https://10.0.0.1:6443"
    ]
