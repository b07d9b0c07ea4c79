"""The fit check, on nodes and pods as the API returns them."""

from gpuctl.k8s import fit
from gpuctl.k8s.placement import Placement

GPU = "nvidia.com/gpu"
TOLERATE_GPU = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]


def node(name, gpus=8, taints=None, unschedulable=False):
    return {
        "metadata": {"name": name, "labels": {"gpu-type": "h100"}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": {GPU: str(gpus)}},
    }


def check(nodes, tolerations=TOLERATE_GPU):
    return fit.check_fit(nodes, [], Placement(GPU, 8), 1, tolerations)


def test_a_toleration_for_another_effect_does_not_tolerate_the_taint():
    taint = {"key": "dedicated", "value": "infer", "effect": "NoExecute"}
    no_schedule_only = TOLERATE_GPU + [
        {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}
    ]
    report = check([node("n", taints=[taint])], no_schedule_only)
    assert not report.can_ever_fit
    assert report.nodes[0].reason == "taint dedicated=infer:NoExecute not tolerated"
    any_effect = TOLERATE_GPU + [{"key": "dedicated", "operator": "Exists"}]
    assert check([node("n", taints=[taint])], any_effect).can_ever_fit


def test_a_cordoned_node_never_fits():
    report = check([node("n", unschedulable=True), node("m", gpus=4)])
    assert not report.can_ever_fit
    assert [n.reason for n in report.nodes] == ["cordoned", f"4 {GPU}, a worker needs 8"]
