"""reclaim's judgement, pure: idle only when every GPU of every pod is known, fresh, whole
and quiet; grace periods warn first; the cap; what was done is not done again."""

from __future__ import annotations

import json

from gpuctl.k8s.times import timestamp
from gpuctl.reclaim.core import decide, signal
from gpuctl.reclaim.core import policy as pol
from gpuctl.reclaim.core.workloads import Workload

NOW = 1_800_000_000.0
Q = signal.queries([2 * 3600], 5)


def pod(name, gpus=1):
    return {"metadata": {"name": name, "namespace": "ml"},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Running"}}  # fmt: skip


def job(name, pods, annotations=None):
    obj = {
        "metadata": {"name": name, "namespace": "ml", "annotations": annotations or {}},
        "spec": {},
    }
    return Workload("Job", "ml", name, "batch/v1", obj, pods)


def device(uuid, newest=NOW - 10, last_busy=None, covered=120.0):
    return signal.Device((uuid, ""), "n", newest, last_busy, {2 * 3600: covered})


def readings(**by_pod):
    return signal.Readings(Q, {("ml", p): {d.key: d for d in ds} for p, ds in by_pod.items()})


def policy(action="suspend", grace=0, cap=10):
    rule = pol.PolicyRule("r", ("ml",), None, (), 2 * 3600, (action,), grace)
    return pol.Policy("p", 5, 120, cap, (), (rule,))


def judge(p, w, r):
    return decide.find(p, [w], r, NOW).rows[0]


def test_every_gpu_of_every_pod_must_be_known():
    w = job("j", [pod("a", 2)])
    row = judge(policy(), w, readings(a=[device("G0")]))  # one of its two GPUs has a series
    assert (row.status, row.action) == ("missing", None)
    row = judge(policy(), w, readings(a=[device("G0"), device("G1")]))
    assert (row.status, row.action) == ("idle", "suspend")


def test_stale_gap_and_busy_are_not_idle():
    w = job("j", [pod("a")])
    assert judge(policy(), w, readings(a=[device("G0", newest=NOW - 600)])).status == "stale"
    assert judge(policy(), w, readings(a=[device("G0", covered=60)])).status == "gap"
    assert judge(policy(), w, readings(a=[device("G0", last_busy=NOW - 1800)])).status == "busy"
    row = judge(policy(), w, readings(a=[device("G0", last_busy=NOW - 3 * 3600)]))
    assert (row.status, row.idle_since, row.idle_since_known) == ("idle", NOW - 3 * 3600, True)


def test_a_grace_period_warns_first_then_acts():
    w = job("j", [pod("a")])
    r = readings(a=[device("G0", last_busy=NOW - 3 * 3600)])
    row = judge(policy(grace=1800), w, r)
    assert row.action == "warn"
    warned = {decide.RECORD: json.dumps({"action": "warn", "at": timestamp(NOW - 600)})}
    assert judge(policy(grace=1800), job("j", [pod("a")], warned), r).status == "grace"
    warned = {decide.RECORD: json.dumps({"action": "warn", "at": timestamp(NOW - 2400)})}
    assert judge(policy(grace=1800), job("j", [pod("a")], warned), r).action == "suspend"
    # a warning from before this idle stretch does not count
    old = {decide.RECORD: json.dumps({"action": "warn", "at": timestamp(NOW - 4 * 3600)})}
    assert judge(policy(grace=1800), job("j", [pod("a")], old), r).action == "warn"


def test_what_was_done_this_stretch_is_not_done_again():
    r = readings(a=[device("G0", last_busy=NOW - 3 * 3600)])
    done = {decide.RECORD: json.dumps({"action": "report", "at": timestamp(NOW - 600)})}
    assert judge(policy("report"), job("j", [pod("a")], done), r).status == "done"
    before = {decide.RECORD: json.dumps({"action": "report", "at": timestamp(NOW - 4 * 3600)})}
    assert judge(policy("report"), job("j", [pod("a")], before), r).action == "report"


def test_the_cap_keeps_the_longest_idle():
    ws = [job(f"j{i}", [pod(f"p{i}")]) for i in range(3)]
    r = readings(**{f"p{i}": [device(f"G{i}", last_busy=NOW - (3 + i) * 3600)] for i in range(3)})
    found = decide.find(policy(cap=2), ws, r, NOW)
    assert [s.target for s in found.plan.steps] == ["Job ml/j2", "Job ml/j1"]
    assert [row.status for row in found.rows] == ["over cap", "idle", "idle"]


def test_an_action_that_does_not_apply_is_a_report_and_exemptions_hold():
    r = readings(a=[device("G0")])
    dep = Workload(
        "Deployment",
        "ml",
        "d",
        "apps/v1",
        {"metadata": {"name": "d"}, "spec": {"replicas": 2}},
        [pod("a")],
    )
    assert judge(policy("suspend"), dep, r).action == "report"
    assert judge(policy("scale-to-zero"), dep, r).action == "scale-to-zero"
    exempt = Workload("Deployment", "ml", "d", "apps/v1",
                      {"metadata": {"name": "d", "labels": {"gpuctl.io/reclaim": "never"}}}, [pod("a")])  # fmt: skip
    assert judge(policy("scale-to-zero"), exempt, r).status == "exempt"


def test_a_notebooks_pods_are_its_workload_and_only_reported():
    from gpuctl.reclaim.core.workloads import group

    sts = {"metadata": {"name": "nb", "namespace": "ml", "ownerReferences": [
        {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "name": "nb", "controller": True}]}}  # fmt: skip
    p = pod("nb-0")
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "nb", "controller": True}
    ]
    (w,) = group([p], {("StatefulSet", "ml", "nb"): sts}, [])
    assert (w.kind, w.name, w.obj, w.api_version) == ("Notebook", "nb", None, "kubeflow.org/v1")
    row = judge(policy("scale-to-zero"), w, readings(**{"nb-0": [device("G0")]}))
    assert row.action == "report"  # its controller would scale the StatefulSet back
    step = decide.find(
        policy("scale-to-zero"), [w], readings(**{"nb-0": [device("G0")]}), NOW
    ).plan.steps[0]
    assert step.detail["pods"] == ["nb-0"]  # the record goes on its pods
    p["metadata"]["annotations"] = {
        decide.RECORD: json.dumps({"action": "report", "at": timestamp(NOW - 60)})
    }
    assert judge(policy("scale-to-zero"), w, readings(**{"nb-0": [device("G0")]})).status == "done"
