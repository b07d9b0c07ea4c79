"""A cluster's API objects as the replay's nodes and pods."""

from gpuctl.whatif.core.snapshot import nodes_from_api, pods_from_api
from gpuctl.whatif.core.trace import Node, Pod

KEY = "gpu-type"


def node(name, alloc, labels=None):
    return {"metadata": {"name": name, "labels": labels or {}}, "status": {"allocatable": alloc}}


def pod(name, containers, init=None, phase="Running", owner=None, **spec):
    meta = {"name": name, "namespace": "ml"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x"}]
    return {
        "metadata": meta,
        "spec": {
            "containers": [{"resources": r} for r in containers],
            "initContainers": [{"resources": r} for r in init or []],
            **spec,
        },
        "status": {"phase": phase},
    }


def test_nodes_allocatable_and_gpu_label():
    nodes = nodes_from_api(
        [
            node("g", {"cpu": "95500m", "memory": "1Ti", "nvidia.com/gpu": "8"}, {KEY: "h100"}),
            node("c", {"cpu": "4", "memory": "16Gi", "pods": "110"}),
            node("odd", {"cpu": "1.0001", "memory": "1000M", "nvidia.com/gpu": "x"}),
        ],
        KEY,
    )
    assert nodes == [
        Node("g", 95500, 1 << 20, 8, "h100"),
        Node("c", 4000, 16384, 0, ""),
        # rounded down for a node; 1000 MB is 953.67 MiB; an unreadable count is none
        Node("odd", 1000, 953, 0, ""),
    ]


def test_pod_requests_as_the_scheduler_counts_them():
    pods = pods_from_api(
        [
            pod(
                "train",
                [
                    {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "2"}},
                    {"limits": {"cpu": "500m", "memory": "100M"}},  # a limit stands for a request
                ],
                init=[{"requests": {"cpu": "4", "memory": "10Mi"}}],
            ),
            pod("done", [{"limits": {"nvidia.com/gpu": "1"}}], phase="Succeeded"),
            pod("agent", [{"requests": {"cpu": "1"}}], owner="DaemonSet"),
            pod("tiny", [{"requests": {"cpu": "1m", "memory": "1"}}], owner="ReplicaSet"),
        ],
        KEY,
    )
    assert pods == [
        # cpu: max(2 + 0.5, 4); memory: 1 GiB + 100 MB rounded up to MiB
        Pod("ml/train", 4000, 1120, 2, 1000),
        Pod("ml/tiny", 1, 1, 0, 0),
    ]


def test_pod_gpu_models_from_its_node_selector_or_required_affinity():
    def terms(*expressions_per_term):
        return {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": e} for e in expressions_per_term]
                }
            }
        }

    gpu = [{"limits": {"nvidia.com/gpu": "1"}}]
    one_of = {"key": KEY, "operator": "In", "values": ["a100", "h100"]}
    other_label = {"key": "zone", "operator": "In", "values": ["z1"]}
    pods = pods_from_api(
        [
            pod("selector", gpu, nodeSelector={KEY: "h100", "zone": "z1"}),
            pod("affinity", gpu, affinity=terms([one_of, other_label])),
            pod("narrowed", gpu, affinity=terms([one_of, {**one_of, "values": ["h100"]}])),
            pod("either-term", gpu, affinity=terms([one_of], [other_label])),
            pod("free", gpu),
        ],
        KEY,
    )
    assert [p.gpu_models for p in pods] == [
        ("h100",),
        ("a100", "h100"),
        ("h100",),
        (),  # the second term lets it run on any GPU model
        (),
    ]


def test_nodes_whose_taints_keep_pods_without_tolerations_out():
    from gpuctl.whatif.core.snapshot import closed_to_plain_pods

    def node(name, *effects):
        return {
            "metadata": {"name": name},
            "spec": {"taints": [{"key": "k", "effect": e} for e in effects]},
        }

    objects = [
        node("hard", "NoSchedule"),
        node("soft", "PreferNoSchedule"),
        node("gone", "NoExecute"),
        node("open"),
    ]
    assert closed_to_plain_pods(objects) == frozenset({"hard", "gone"})
