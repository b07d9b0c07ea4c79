"""reclaim's judgement, pure: idle only when every GPU of every pod is known, fresh, whole
and quiet; grace periods warn first; the cap; what was done is not done again."""

from __future__ import annotations

import json

from gpuctl.dcgm import holders
from gpuctl.k8s.times import timestamp
from gpuctl.reclaim.core import decide, signal
from gpuctl.reclaim.core import policy as pol
from gpuctl.reclaim.core.workloads import Workload, group

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


def device(uuid, newest=NOW - 10, last_busy=None, covered=120.0, measured=None, finite=None):
    """A device as Prometheus's answers describe it; its busy signal, by default, a finite
    number at every step it has a sample."""
    measured = covered if measured is None else measured
    finite = measured if finite is None else finite
    w = 2 * 3600
    return signal.Device(
        (uuid, ""), "n", newest, last_busy, {w: covered}, {w: measured}, {w: finite}
    )


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
    owners = {("Deployment", "ml", "d"): {"kind": "Deployment", "metadata": {
        "name": "d", "namespace": "ml", "uid": "uid-d", "labels": {"gpuctl.io/reclaim": "never"}}}}  # fmt: skip
    (exempt,) = group([owned(pod("a"), "Deployment", "d")], owners, [])
    row = judge(policy("scale-to-zero"), exempt, r)
    assert row.status == "exempt" and "marked gpuctl.io/reclaim: never (label)" in row.why


def owned(p, kind, name, api_version="apps/v1"):
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
         "controller": True}
    ]  # fmt: skip
    return p


def test_a_notebooks_pods_are_its_workload_and_left_alone_its_marks_unknown():
    sts = owned(
        {"metadata": {"name": "nb", "namespace": "ml"}}, "Notebook", "nb", "kubeflow.org/v1"
    )
    p = owned(pod("nb-0"), "StatefulSet", "nb")
    (w,) = group([p], {("StatefulSet", "ml", "nb"): sts}, [])
    assert (w.kind, w.name, w.obj, w.api_version) == ("Notebook", "nb", None, "kubeflow.org/v1")
    found = decide.find(policy("scale-to-zero"), [w], readings(**{"nb-0": [device("G0")]}), NOW)
    (row,) = found.rows
    assert row.status == "exempt" and found.plan.empty
    assert (
        row.why == "its Notebook ml/nb could not be read: whether it is marked never is not known"
    )


def test_a_kind_gpuctl_does_not_write_is_reported_on_its_pods():
    p = owned(pod("rs-0"), "ReplicaSet", "rs")  # a ReplicaSet of no Deployment
    rs = {"kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "ml", "uid": "uid-rs"}}
    (w,) = group([p], {("ReplicaSet", "ml", "rs"): rs}, [])
    assert (w.kind, w.obj) == ("ReplicaSet", None)
    r = readings(**{"rs-0": [device("G0")]})
    (step,) = decide.find(policy("scale-to-zero"), [w], r, NOW).plan.steps
    assert (step.action, step.detail["pods"]) == ("report", ["rs-0"])  # the record on its pods
    p["metadata"]["annotations"] = {
        decide.RECORD: json.dumps({"action": "report", "at": timestamp(NOW - 60)})
    }
    assert judge(policy("scale-to-zero"), w, r).status == "done"


def test_a_signal_missing_or_not_finite_at_some_step_is_unknown_and_the_plan_says_so():
    w = job("j", [pod("a")])
    cases = {
        "its busy signal is NaN or ±Inf at 3 step(s)": device("G0", finite=117.0),
        "a busy signal (": device("G0", measured=0.0),  # e.g. a MIG device without GR_ACTIVE
        "Prometheus answered nan": None,
    }
    for said, d in cases.items():
        if d is None:  # a NaN in an answer itself, as signal.read records it
            d = device("G0")
            d.unknown.append("Prometheus answered nan for the last time it was busy")
        found = decide.find(policy(), [w], readings(a=[d]), NOW)
        (row,) = found.rows
        assert (row.status, row.action) == ("unknown", None) and said in row.why, row.why
        assert found.plan.empty
        assert found.plan.notes == (
            f"not acted on, its data unknown: Job ml/j: unknown: {row.why}",
        )


def test_a_partial_answer_leaves_every_workload_unknown():
    r = readings(a=[device("G0")], b=[device("G1")])
    r.warnings.append("remote_read: error sending request: connection refused")
    found = decide.find(policy(), [job("j", [pod("a")]), job("k", [pod("b")])], r, NOW)
    assert [(row.status, row.action) for row in found.rows] == [("unknown", None)] * 2
    assert "Prometheus's answer is partial: remote_read" in found.rows[0].why
    assert found.plan.empty and len(found.plan.notes) == 2


def test_answers_that_are_no_number_leave_their_device_unknown():
    nan, inf = float("nan"), float("inf")
    labels = {"UUID": "G0", "namespace": "ml", "pod": "a", "Hostname": "n"}
    for at in range(len(Q.all())):  # newest, last busy, then the counts per window
        answers = [
            [(labels, NOW - 10)],
            [],
            [(labels, 120.0)],
            [(labels, 120.0)],
            [(labels, 120.0)],
        ]
        answers[at] = [(labels, nan if at % 2 else inf)]
        r = signal.read(Q, answers, holders.exporter([], []))
        (d,) = r.devices(("ml", "a"))
        assert d.unknown and d.unknown[0].startswith("Prometheus answered"), at
        assert judge(policy(), job("j", [pod("a")]), r).status == "unknown", at
