"""`gpuctl sched extender` as kube-scheduler talks to it, over HTTP: requests encoded as its
Go types encode them (kube_scheduler_wire.py, derived from the upstream extender/v1 types),
by node names (nodeCacheCapable: true) and with Node objects (false), the answers read back
as kube-scheduler reads them; the other spellings Go's decoder accepts; and every request no
Go extender could decode answered 400 with the reason: one log line, no traceback, never a
dropped connection."""

import http.client
import json
import socket
import threading

import pytest

from gpuctl.sched import extender as server_module
from gpuctl.sched.core.extender import ClusterView
from tests.sched.kube_scheduler_wire import (
    LABEL,
    Struct,
    api_node,
    extender_args,
    filter_read,
    go_json,
    gpu_pod,
    priorities_read,
)

pytestmark = pytest.mark.integration

# two 8-GPU H100 nodes (seven GPUs of the first held), an 8-GPU A100 node, a 1-GPU T4 node
NODES = [
    api_node("gfd-h100", "h100-a"),
    api_node("gfd-h100", "h100-b"),
    api_node("gfd-a100-80gb"),
    api_node("gfd-t4"),
]
NAMES = [n["metadata"]["name"] for n in NODES]


def bound(name, gpus, node):
    pod = gpu_pod(name, gpus)
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    return json.loads(go_json(pod))


class Served:
    def __init__(self, view, debug=False, max_body=server_module.MAX_BODY, ready=True):
        self.lines = []
        self.ext = server_module.Extender(view, server_module.Log(self.lines.append, debug))
        if ready:
            self.ext.ready.set()
        self.http = server_module.server(self.ext, "127.0.0.1", 0, max_body)
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, args=(0.02,), daemon=True).start()

    def post(self, verb, body: bytes, conn=None, **headers):
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("POST", f"/{verb}", body=body, headers=headers or JSON)
        response = conn.getresponse()
        return response.status, response.read()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


JSON = {"Content-Type": "application/json"}


def cluster_view():
    view = ClusterView(LABEL)
    view.replace([json.loads(go_json(n)) for n in NODES], [bound("held-0", 7, "h100-a")])
    return view


@pytest.fixture
def served():
    s = Served(cluster_view())
    yield s
    s.close()


def test_the_go_encoder_writes_what_json_marshal_writes():
    pod = Struct(metadata=Struct(name="p", namespace="ml"), status=Struct(phase="Pending"))
    args = Struct(Pod=pod, Nodes=None, NodeNames=["a<b", "n&1"])
    assert go_json(args) == (
        '{"Pod":{"metadata":{"name":"p","namespace":"ml"},"status":{"phase":"Pending"}},'
        '"Nodes":null,"NodeNames":["a\\u003cb","n\\u00261"]}'
    )
    # a map's keys sorted; a struct's fields as declared; DaemonEndpoint's "Port"
    node = extender_args(gpu_pod("p-0", 1), [NODES[0]], node_cache_capable=False).decode()
    assert '"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}}' in node
    assert node.index('"cpu"') < node.index('"memory"') < node.index('"nvidia.com/gpu"')
    # from the informer's cache: no kind or apiVersion
    assert '"items":[{"metadata":{"name":"h100-a"' in node and '"Pod":{"metadata"' in node


@pytest.mark.parametrize("node_cache_capable", [True, False])
def test_filter_then_prioritize_as_kube_scheduler_calls_them(served, node_cache_capable):
    pod = gpu_pod("train-0", 2)
    status, body = served.post("filter", extender_args(pod, NODES, node_cache_capable))
    passed, failed, unresolvable = filter_read(status, body, node_cache_capable, NAMES)
    assert passed == ["h100-b", "p4de-a100-80"]
    assert failed == {
        "h100-a": "gpuctl extender: fewer than 2 unallocated GPUs",
        "g4dn-t4": "gpuctl extender: fewer than 2 unallocated GPUs",
    }
    assert unresolvable == {}
    answer = json.loads(body)
    if node_cache_capable:
        assert answer["Nodes"] is None
    else:  # the Node objects as sent, not their names
        assert answer["NodeNames"] is None
        sent = json.loads(extender_args(pod, NODES, False))["Nodes"]["items"]
        assert answer["Nodes"]["items"] == [sent[1], sent[2]]
    # kube-scheduler then sends prioritize the nodes that passed every filter
    passing = [n for n in NODES if n["metadata"]["name"] in passed]
    status, body = served.post("prioritize", extender_args(pod, passing, node_cache_capable))
    scores = priorities_read(status, body, passed)
    assert list(scores) == passed and sorted(scores.values()) == [9, 10]
    assert served.lines == []


def test_a_gpu_model_the_pod_does_not_accept_fails_unresolvably(served):
    pod = gpu_pod("train-0", 1, model="NVIDIA-A100-SXM4-80GB")
    status, body = served.post("filter", extender_args(pod, NODES, True))
    passed, failed, unresolvable = filter_read(status, body, True, NAMES)
    assert passed == ["p4de-a100-80"] and failed == {}
    assert set(unresolvable) == {"h100-a", "h100-b", "g4dn-t4"}
    assert "GPU model is not NVIDIA-A100-SXM4-80GB" in unresolvable["g4dn-t4"]


def renamed(obj, rename):
    """OBJ with its keys renamed by RENAME (key → key), at every level."""
    if isinstance(obj, dict):
        return {rename(k): renamed(v, rename) for k, v in obj.items()}
    if isinstance(obj, list):
        return [renamed(v, rename) for v in obj]
    return obj


FIELDS = {"Pod", "Nodes", "NodeNames", "metadata", "name", "spec", "containers", "resources"}


@pytest.mark.parametrize(
    "rename",
    [
        str.lower,  # {"pod", "nodenames"}: gpuctl's own dialect until now
        str.upper,
        lambda k: {"NodeNames": "nodeNames", "Pod": "pOD"}.get(k, k),
        lambda k: {"NodeNames": "NodeNameſ", "Nodes": "NODEſ"}.get(k, k),  # ſ folds to s
    ],
)
@pytest.mark.parametrize("node_cache_capable", [True, False])
def test_field_names_match_as_go_matches_them(served, rename, node_cache_capable):
    """Go's decoder takes a key for a field ignoring case (Unicode folding), at every
    level: the answer is the same, in the upstream names."""
    args = json.loads(extender_args(gpu_pod("train-0", 2), NODES, node_cache_capable))
    body = json.dumps(renamed(args, lambda k: rename(k) if k in FIELDS else k)).encode()
    passed, failed, _ = filter_read(*served.post("filter", body), node_cache_capable, NAMES)
    assert passed == ["h100-b", "p4de-a100-80"] and set(failed) == {"h100-a", "g4dn-t4"}
    scores = priorities_read(*served.post("prioritize", body), NAMES)
    assert list(scores) == NAMES


def test_null_unknown_and_repeated_fields_as_go_reads_them(served):
    pod = json.loads(go_json(gpu_pod("train-0", 2)))
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2  # a number
    pod["spec"]["nodeName"] = None
    cases = [
        # unknown keys ignored; null NodeNames: the nodes are in Nodes
        ({"Pod": pod, "Extra": {"x": 1}, "NodeNames": None, "Nodes": {"items": [NODES[1]]}},
         ["h100-b"]),
        # a null name is Go's zero string: a node not seen
        ({"Pod": pod, "NodeNames": ["h100-b", None]}, ["h100-b"]),
        # two keys for one field: the last wins
        ({"Pod": pod, "NodeNames": ["g4dn-t4"], "nodenames": ["p4de-a100-80"]},
         ["p4de-a100-80"]),
    ]  # fmt: skip
    for args, expected in cases:
        status, body = served.post("filter", json.dumps(args).encode())
        assert status == 200 and json.loads(body)["Error"] == "", body
        answer = json.loads(body)
        passed = answer["NodeNames"] or [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
        assert passed == expected, args
    assert json.loads(body)["FailedNodes"] == {}
    status, body = served.post("filter", json.dumps(cases[1][0]).encode())
    assert json.loads(body)["FailedNodes"] == {
        "": "gpuctl extender: node not (yet) seen by its watch"
    }


@pytest.mark.parametrize("debug", [True, False])
def test_a_pod_asking_for_no_gpu_passes_every_candidate_and_says_so(debug):
    served = Served(cluster_view(), debug=debug)
    pod = gpu_pod("web-0", 0)
    del pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    names = NAMES + ["new-node"]
    args = json.loads(extender_args(pod, NODES, True))
    args["NodeNames"] = names
    body = json.dumps(args).encode()
    assert filter_read(*served.post("filter", body), True, names)[0] == names
    assert set(priorities_read(*served.post("prioritize", body), names).values()) == {0}
    expected = [
        f"{verb}: pod ml/web-0 asks for no GPU: all 5 candidates pass, unscored (the "
        "extender's managedResources should keep it away)"
        for verb in ("filter", "prioritize")
    ]
    assert served.lines == (expected if debug else [])
    served.close()


POD = json.loads(go_json(gpu_pod("train-0", 1)))


def with_pod(**changes):
    pod = json.loads(json.dumps(POD))
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    for path, value in changes.items():
        if path == "limits":
            container["resources"]["limits"] = value
        elif path == "selector":
            spec["nodeSelector"] = value
        else:
            spec[path] = value
    return json.dumps({"Pod": pod, "NodeNames": NAMES}).encode()


BAD_BODIES = [
    (json.dumps({"Pod": POD, "NodeNames": "h100-b"}), "NodeNames: expected a list, got a string"),
    (json.dumps({"Pod": POD, "NodeNames": [1]}), "NodeNames[0]: expected a string, got a number"),
    (json.dumps({"Pod": POD, "NodeNames": {"h100-b": 1}}), "NodeNames: expected a list"),
    (json.dumps({"Pod": POD, "Nodes": []}), "Nodes: expected an object (a v1.NodeList), got a list"),
    (json.dumps({"Pod": POD, "Nodes": 7}), "Nodes: expected an object (a v1.NodeList), got a number"),
    (json.dumps({"Pod": POD, "Nodes": {"items": "h100-b"}}), "Nodes.items: expected a list"),
    (json.dumps({"Pod": POD, "Nodes": {"items": [1]}}), "Nodes.items[0]: expected an object"),
    (json.dumps({"Pod": POD, "Nodes": {"items": [{"metadata": {"name": 5}}]}}),
     "Nodes.items[0].metadata.name: expected a string, got a number"),
    (json.dumps({"Pod": "train-0", "NodeNames": NAMES}), "Pod: expected an object, got a string"),
    (with_pod(containers={}), "Pod.spec.containers: expected a list, got an object"),
    (with_pod(limits={"nvidia.com/gpu": "two"}),
     "Pod.spec.containers[0].resources.limits[nvidia.com/gpu]: 'two' is not a quantity"),
    (with_pod(limits={"nvidia.com/gpu": True}), "expected a quantity, got a boolean"),
    (with_pod(selector={LABEL: 1}), "Pod.spec.nodeSelector[nvidia.com/gpu.product]: expected a string"),
    (with_pod(nodeName=["h100-b"]), "Pod.spec.nodeName: expected a string, got a list"),
    ("42", "the body is a number, not an ExtenderArgs object"),
    ('["h100-b"]', "the body is a list"),
    ("null", "no Pod in the ExtenderArgs (the body is null)"),
    ("{}", "no Pod in the ExtenderArgs (an empty object)"),
    ('{"Foo": 1, "podName": "x"}', 'no Pod in the ExtenderArgs (keys: "Foo", "podName")'),
    (json.dumps({"pod": POD}), 'no candidates: neither NodeNames nor Nodes (keys: "pod")'),
    ("[" * 100_000, "the body is JSON nested too deeply"),
    ('{"Pod": NaN}', "the body is not JSON: NaN is not a JSON number"),
    ('{"Pod": {}, "NodeNames": []} {}', "the body is not JSON: Extra data"),
    ("", "the body is not JSON"),
    (b'{"Pod": {}, "NodeNames": ["\xff"]}', "the body is not UTF-8 (byte 27)"),
]  # fmt: skip


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize("body, reason", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_a_body_no_go_extender_decodes_is_refused_with_the_reason(
    served, capfd, verb, body, reason
):
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    data = body if isinstance(body, bytes) else body.encode()
    status, answer = served.post(verb, data, conn)
    assert status == 400 and reason in json.loads(answer)["Error"], answer
    assert len(served.lines) == 1 and ": 400 " in served.lines[0], served.lines
    assert reason in served.lines[0]
    # the connection stays open for kube-scheduler's next call
    status, answer = served.post(verb, extender_args(gpu_pod("p-1", 1), NODES, True), conn)
    assert status == 200
    assert "Traceback" not in capfd.readouterr().err


def raw(port, request: bytes, half_close=False) -> bytes:
    """What the server answers REQUEST on a connection of its own, up to its close."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


ARGS = extender_args(gpu_pod("p-1", 1), NODES, True)


def post(headers: str, body: bytes = ARGS) -> bytes:
    return f"POST /filter HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + body


@pytest.mark.parametrize(
    "request_bytes, code, reason",
    [
        (post("Content-Type: application/json\r\n"), 400, "Content-Length None"),
        (post("Content-Length: abc\r\n"), 400, "Content-Length 'abc'"),
        (post("Content-Length: -5\r\n"), 400, "Content-Length '-5'"),
        (post("Transfer-Encoding: chunked\r\n", b"5\r\nhello\r\n0\r\n\r\n"), 400, "chunked"),
        (post(f"Content-Length: {len(ARGS)}\r\nContent-Type: text/plain\r\n"), 400,
         "Content-Type 'text/plain': send application/json"),
        (post(f"Content-Length: {len(ARGS) + 10}\r\n"), 400,
         f"the body ended after {len(ARGS):,} of {len(ARGS) + 10:,} bytes"),
        (post(f"Content-Length: {len(ARGS)}\r\n").replace(b"/filter", b"/bind"), 404, "no verb /bind"),
        (b"GET /filter HTTP/1.1\r\nHost: x\r\n\r\n", 405, "/filter takes POST"),
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 404, "no /metrics"),
    ],
)  # fmt: skip
def test_what_http_carries_badly_is_answered_too(served, capfd, request_bytes, code, reason):
    answer = raw(served.port, request_bytes, half_close=True)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {code} ".encode()), answer
    assert reason in json.loads(body)["Error"]
    assert len(served.lines) == 1 and reason in served.lines[0], served.lines
    assert "Traceback" not in capfd.readouterr().err


def test_an_oversize_body_is_refused_and_the_answer_arrives(capfd):
    served = Served(cluster_view(), max_body=1000)
    answer = raw(served.port, post(f"Content-Length: {len(ARGS)}\r\n"))
    assert b"HTTP/1.1 400 " in answer and b"Connection: close" in answer, answer
    assert f"a body of {len(ARGS):,} bytes: the limit is 1,000".encode() in answer
    # what http.server itself refuses (a header line past 64 KiB): its answer, and one line
    too_long = b"POST /filter HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n"
    assert raw(served.port, too_long).startswith(b"HTTP/1.1 431 Line too long")
    assert len(served.lines) == 2, served.lines
    assert "Traceback" not in capfd.readouterr().err
    served.close()


def test_before_the_first_resync_kube_scheduler_is_told_to_try_again():
    served = Served(cluster_view(), ready=False)
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    conn.request("GET", "/healthz")
    response = conn.getresponse()
    assert (response.status, json.loads(response.read())) == (503, {"ready": False})
    status, body = served.post("filter", ARGS)
    assert status == 200 and json.loads(body)["Error"] == server_module.NOT_SYNCED
    # a HostPriorityList cannot carry an error: kube-scheduler leaves the scores out
    assert served.post("prioritize", ARGS)[0] == 503
    served.ext.ready.set()
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
    served.close()


class Faulty(ClusterView):
    def prioritize(self, request):
        return {}["no such key"]


@pytest.mark.parametrize("debug", [False, True])
def test_a_fault_of_its_own_is_a_500_in_one_line(capfd, debug):
    served = Served(Faulty(LABEL), debug=debug)
    served.ext.view.replace([json.loads(go_json(n)) for n in NODES], [])
    status, body = served.post("prioritize", ARGS)
    assert status == 500 and "unexpected KeyError" in json.loads(body)["Error"]
    assert any(
        "500 unexpected KeyError: 'no such key' (a bug in gpuctl)" in line for line in served.lines
    )
    assert len(served.lines) == (2 if debug else 1)  # --debug: the traceback too
    assert "Traceback" not in capfd.readouterr().err
    served.close()
