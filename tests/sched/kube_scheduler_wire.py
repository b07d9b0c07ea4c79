"""Requests as kube-scheduler sends them to an HTTP extender, encoded byte for byte as Go's
encoding/json encodes its types, and what kube-scheduler reads from the answers.

Derived from these sources, all under the Apache License 2.0:
- https://github.com/kubernetes/kube-scheduler at e87dbddd27a5bd4c2028727c7ccc082cfb2cdc09,
  extender/v1/types.go: ExtenderArgs {Pod *v1.Pod; Nodes *v1.NodeList; NodeNames *[]string},
  ExtenderFilterResult {Nodes; NodeNames; FailedNodes; FailedAndUnresolvableNodes; Error},
  HostPriority {Host string; Score int64}, MaxExtenderPriority = 10. No JSON tags: on the
  wire the fields are named as in Go.
- https://github.com/kubernetes/kubernetes at 02850301e61b0491a6efad7fb440dfa1b03cfc96,
  pkg/scheduler/extender.go: HTTPExtender.send (json.Marshal of the args, POST to
  urlPrefix/verb with Content-Type application/json; any status but 200 is an error, the
  body then unread), Filter and Prioritize (NodeNames when nodeCacheCapable, else Nodes with
  every candidate's Node; the result read as below).
- https://github.com/kubernetes/api at 10b39a39bcee995dfe7cd5e8e7b922be5e46f1e2,
  core/v1/types.go: the JSON names, order and omitempty of Pod, Node, NodeList and their
  parts (DaemonEndpoint's tag is "Port", upper case, for backwards compatibility).
- https://github.com/kubernetes/apimachinery at eed236ceee2c19c2753a3d93ac0631dc20750454,
  pkg/apis/meta/v1/types.go: ObjectMeta, ListMeta, OwnerReference, ManagedFieldsEntry.

Go's encoder: a struct's fields in declaration order (omitempty ones left out when empty,
here by not setting them), a map's keys sorted, nil pointers and slices as null, no spaces,
`<`, `>` and `&` written \\u003c, \\u003e, \\u0026. Objects in kube-scheduler's informer
cache have an empty TypeMeta: no kind or apiVersion. The nodes' labels, capacity and taints
are those of tests/data/nodes/ (each file cites its source); the rest of each Node (uid,
conditions, addresses, nodeInfo, images, managedFields) has the shape the API server sends.
"""

from __future__ import annotations

import hashlib
import json

from tests.node_corpus import corpus

LABEL = "nvidia.com/gpu.product"
MAX_EXTENDER_PRIORITY = 10
FILTER_RESULT = ("Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error")


class Struct(dict):
    """A Go struct value: its fields in declaration order."""


def go_json(value) -> str:
    """VALUE as Go's json.Marshal writes it (Struct: fields in order; dict: a map)."""
    if isinstance(value, Struct):
        members = list(value.items())
    elif isinstance(value, dict):
        members = sorted(value.items())
    else:
        members = None
    if members is not None:
        return "{" + ",".join(f"{go_json(k)}:{go_json(v)}" for k, v in members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        for c, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
            text = text.replace(c, escaped)
        return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return json.dumps(value)  # null, true, false, integers


def _uid(name: str) -> str:
    h = hashlib.sha256(name.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def api_node(stem: str, name: str | None = None) -> Struct:
    """The node of tests/data/nodes/STEM.yaml as kube-scheduler holds it (renamed NAME)."""
    source = corpus()[stem]
    name = name or source["metadata"]["name"]
    labels = {**source["metadata"]["labels"], "kubernetes.io/hostname": name}
    taints = (source.get("spec") or {}).get("taints") or []
    return node_object(name, labels, source["status"], tuple(Struct(t) for t in taints))


def node_object(name: str, labels: dict, status: dict, taints: tuple[Struct, ...] = ()) -> Struct:
    """A v1.Node as the API server sends it, with these labels, capacity and allocatable
    (STATUS) and taints."""
    ready = Struct(
        type="Ready",
        status="True",
        lastHeartbeatTime="2026-07-20T09:41:07Z",
        lastTransitionTime="2026-07-01T12:00:31Z",
        reason="KubeletReady",
        message="kubelet is posting ready status",
    )
    spec = Struct(podCIDR="10.244.3.0/24", podCIDRs=["10.244.3.0/24"])
    spec["providerID"] = f"aws:///us-east-1a/i-{_uid(name)[:17].replace('-', '')}"
    if taints:
        spec["taints"] = list(taints)
    return Struct(
        metadata=Struct(
            name=name,
            uid=_uid(name),
            resourceVersion="48213377",
            creationTimestamp="2026-07-01T11:58:02Z",
            labels=labels,
            annotations={
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            managedFields=[
                Struct(
                    manager="kubelet",
                    operation="Update",
                    apiVersion="v1",
                    time="2026-07-20T09:41:07Z",
                    fieldsType="FieldsV1",
                    fieldsV1={"f:status": {"f:allocatable": {"f:nvidia.com/gpu": {}}}},
                    subresource="status",
                )
            ],
        ),
        spec=spec,
        status=Struct(
            capacity=status["capacity"],
            allocatable=status["allocatable"],
            conditions=[ready],
            addresses=[
                Struct(type="InternalIP", address="10.0.3.17"),
                Struct(type="Hostname", address=name),
            ],
            daemonEndpoints=Struct(kubeletEndpoint=Struct(Port=10250)),
            nodeInfo=Struct(
                machineID="ec2d3ab5e3b4f2a9c7d1e0f8a6b5c4d3",
                systemUUID="ec2d3ab5-e3b4-f2a9-c7d1-e0f8a6b5c4d3",
                bootID="5f0c6a2e-8d41-4b6f-9c3e-2a7d1b8e4f60",
                kernelVersion="5.15.0-1063-aws",
                osImage="Ubuntu 22.04.4 LTS",
                containerRuntimeVersion="containerd://1.7.13",
                kubeletVersion="v1.30.2",
                kubeProxyVersion="v1.30.2",
                operatingSystem="linux",
                architecture="amd64",
            ),
            images=[
                Struct(
                    names=[
                        "nvcr.io/nvidia/k8s-device-plugin@sha256:"
                        "0585da349f3cdca29747834e39ada56aed5e23ba363908fc526474d25aa61a75",
                        "nvcr.io/nvidia/k8s-device-plugin:v0.15.0",
                    ],
                    sizeBytes=120328422,
                )
            ],
        ),
    )


def gpu_pod(
    name: str, gpus: int, cores: int | None = None, model: str | None = None, cpu: str = "4"
) -> Struct:
    """A pending pod of a Job as kube-scheduler's queue holds it (the API server's defaults
    filled in: requests equal to the limits of an extended resource, the scheduler's name,
    the tolerations every pod gets)."""
    limits = {"cpu": cpu, "memory": "32Gi", "nvidia.com/gpu": str(gpus)}
    if cores is not None:
        limits["nvidia.com/gpucores"] = str(cores)
    spec = Struct(
        volumes=[Struct(name="dshm", emptyDir=Struct(medium="Memory"))],
        containers=[
            Struct(
                name="train",
                image="nvcr.io/nvidia/pytorch:24.05-py3",
                command=["torchrun", "train.py"],
                resources=Struct(limits=limits, requests=dict(limits)),
                terminationMessagePath="/dev/termination-log",
                terminationMessagePolicy="File",
                imagePullPolicy="IfNotPresent",
            )
        ],
        restartPolicy="Never",
        terminationGracePeriodSeconds=30,
        dnsPolicy="ClusterFirst",
    )
    if model:
        spec["nodeSelector"] = {LABEL: model}
    spec.update(
        serviceAccountName="default",
        serviceAccount="default",
        securityContext=Struct(),
        schedulerName="gpuctl-fgd",
        tolerations=[
            Struct(key=key, operator="Exists", effect="NoExecute", tolerationSeconds=300)
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ],
        priority=0,
        enableServiceLinks=True,
        preemptionPolicy="PreemptLowerPriority",
    )
    return Struct(
        metadata=Struct(
            name=name,
            generateName=name.rsplit("-", 1)[0] + "-",
            namespace="ml",
            uid=_uid(name),
            resourceVersion="48213420",
            creationTimestamp="2026-07-20T09:41:09Z",
            labels={"batch.kubernetes.io/job-name": "train", "job-name": "train"},
            ownerReferences=[
                Struct(
                    apiVersion="batch/v1",
                    kind="Job",
                    name="train",
                    uid=_uid("train"),
                    controller=True,
                    blockOwnerDeletion=True,
                )
            ],
        ),
        spec=spec,
        status=Struct(phase="Pending", qosClass="Guaranteed"),
    )


def extender_args(pod: Struct, nodes: list[Struct], node_cache_capable: bool) -> bytes:
    """The body of kube-scheduler's filter or prioritize call (HTTPExtender.Filter and
    .Prioritize): the candidates by name when nodeCacheCapable, else as a NodeList."""
    names = [n["metadata"]["name"] for n in nodes]
    node_list = Struct(metadata=Struct(), items=nodes)  # ListMeta: a struct, never omitted
    args = Struct(
        Pod=pod,
        Nodes=None if node_cache_capable else node_list,
        NodeNames=names if node_cache_capable else None,
    )
    return go_json(args).encode()


def filter_read(status: int, body: bytes, node_cache_capable: bool, sent: list[str]):
    """What HTTPExtender.Filter makes of an answer: (the names of the nodes that pass,
    FailedNodes, FailedAndUnresolvableNodes); AssertionError where kube-scheduler would
    fail the scheduling cycle. Also checks that the answer uses the upstream field names."""
    assert status == 200, f"kube-scheduler: failed filter with extender, code {status}"
    result = json.loads(body)
    assert set(result) <= set(FILTER_RESULT), result.keys()
    assert not result.get("Error"), result["Error"]
    if node_cache_capable and result.get("NodeNames") is not None:
        passed = result["NodeNames"]
    elif result.get("Nodes") is not None:
        passed = [_go_get(_go_get(n, "metadata"), "name") for n in result["Nodes"]["items"]]
    else:
        passed = []  # nothing passes: every candidate filtered out
    stray = set(passed) - set(sent)
    assert not stray, f"the extender claims filtered nodes it was not sent: {stray}"
    return passed, result.get("FailedNodes") or {}, result.get("FailedAndUnresolvableNodes") or {}


def _go_get(obj: dict, field: str):
    """OBJ's FIELD as Go's decoder finds it: that exact key, else one equal ignoring case."""
    if field in obj:
        return obj[field]
    return next((v for k, v in obj.items() if k.casefold() == field.casefold()), None)


def priorities_read(status: int, body: bytes, sent: list[str]) -> dict[str, int]:
    """What prioritizeNodes adds up from an answer: host → score."""
    assert status == 200, f"kube-scheduler: failed prioritize with extender, code {status}"
    scores = {}
    for entry in json.loads(body):
        assert set(entry) == {"Host", "Score"}, entry
        assert isinstance(entry["Score"], int) and not isinstance(entry["Score"], bool)
        assert 0 <= entry["Score"] <= MAX_EXTENDER_PRIORITY, entry
        assert entry["Host"] in sent, entry
        scores[entry["Host"]] = entry["Score"]
    return scores


def running_pod(
    name: str, gpus: int, node: str, cores: int | None = None, model: str | None = None
) -> Struct:
    """gpu_pod NAME bound to NODE and running, as the API server sends it to a watch: the
    service account token's projected volume and its mount (the ServiceAccount admission
    plugin's), the environment, the managedFields of the Job controller, the scheduler's
    binding and the kubelet's status (ObjectMeta.ManagedFields, one entry per manager and
    subresource), and the kubelet's status with conditions and container statuses."""
    pod = gpu_pod(name, gpus, cores, model)
    pod["metadata"]["managedFields"] = [
        Struct(
            manager="kube-controller-manager",
            operation="Update",
            apiVersion="v1",
            time="2026-07-20T09:41:09Z",
            fieldsType="FieldsV1",
            fieldsV1={
                "f:metadata": {
                    "f:generateName": {},
                    "f:labels": {".": {}, "f:batch.kubernetes.io/job-name": {}},
                    "f:ownerReferences": {".": {}, f'k:{{"uid":"{_uid("train")}"}}': {}},
                },
                "f:spec": {
                    'f:containers': {'k:{"name":"train"}': {
                        ".": {}, "f:command": {}, "f:env": {}, "f:image": {},
                        "f:imagePullPolicy": {}, "f:name": {},
                        "f:resources": {".": {}, "f:limits": {}, "f:requests": {}},
                        "f:volumeMounts": {},
                    }},
                    "f:restartPolicy": {}, "f:schedulerName": {}, "f:volumes": {},
                },
            },
        ),
        Struct(
            manager="kubelet",
            operation="Update",
            apiVersion="v1",
            time="2026-07-20T09:41:31Z",
            fieldsType="FieldsV1",
            fieldsV1={
                "f:status": {
                    "f:conditions": {f'k:{{"type":"{t}"}}': {
                        ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {},
                        "f:status": {}, "f:type": {},
                    } for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers",
                                "Ready")},
                    "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {},
                    "f:phase": {}, "f:podIP": {}, "f:podIPs": {}, "f:startTime": {},
                }
            },
            subresource="status",
        ),
    ]  # fmt: skip
    spec = pod["spec"]
    spec["volumes"].append(
        Struct(
            name="kube-api-access-7x2kq",
            projected=Struct(
                sources=[
                    {"serviceAccountToken": Struct(expirationSeconds=3607, path="token")},
                    {"configMap": Struct(name="kube-root-ca.crt", items=[
                        Struct(key="ca.crt", path="ca.crt")])},
                    {"downwardAPI": Struct(items=[Struct(path="namespace", fieldRef=Struct(
                        apiVersion="v1", fieldPath="metadata.namespace"))])},
                ],
                defaultMode=420,
            ),
        )
    )  # fmt: skip
    container = spec["containers"][0]
    container["env"] = [
        Struct(name="NCCL_DEBUG", value="WARN"),
        Struct(name="PYTORCH_CUDA_ALLOC_CONF", value="expandable_segments:True"),
        Struct(name="POD_NAME", valueFrom=Struct(fieldRef=Struct(
            apiVersion="v1", fieldPath="metadata.name"))),
    ]  # fmt: skip
    container["volumeMounts"] = [
        Struct(name="dshm", mountPath="/dev/shm"),
        Struct(
            name="kube-api-access-7x2kq",
            readOnly=True,
            mountPath="/var/run/secrets/kubernetes.io/serviceaccount",
        ),
    ]
    spec["nodeName"] = node
    started = "2026-07-20T09:41:12Z"
    pod["status"] = Struct(
        phase="Running",
        conditions=[
            Struct(type=t, status="True", lastProbeTime=None, lastTransitionTime=started)
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                      "PodScheduled")
        ],
        hostIP="10.0.3.17",
        hostIPs=[Struct(ip="10.0.3.17")],
        podIP="10.244.3.41",
        podIPs=[Struct(ip="10.244.3.41")],
        startTime=started,
        containerStatuses=[
            Struct(
                name="train",
                state=Struct(running=Struct(startedAt="2026-07-20T09:41:30Z")),
                lastState=Struct(),
                ready=True,
                restartCount=0,
                image="nvcr.io/nvidia/pytorch:24.05-py3",
                imageID="nvcr.io/nvidia/pytorch@sha256:"
                "7ae1b8fe2d9d2ac26c5b5e4fc5e81e11dc6b9b9b6e8bd4e0b1f5d0b8a4c1e3f2",
                containerID="containerd://"
                "4f1c2d9e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e",
                started=True,
            )
        ],
        qosClass="Guaranteed",
    )  # fmt: skip
    return pod
