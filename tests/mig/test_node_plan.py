"""The plan of `gpuctl mig configure`: on a node, the steps of each GPU in the order the
executor carries them out, each with its why; on a cluster, one label patch per node with
the value it replaces. Pure."""

from gpuctl.mig.core.diff import Desired, diff
from gpuctl.mig.core.node_plan import NodePlan, plan_step
from gpuctl.mig.core.operator import LabelPlan, NodeTarget
from tests.mig.test_layout import H100, gi, proc, state


def node_plan(s, desired):
    return NodePlan((diff(s, desired),), {s.index: desired})


def executed(plan):
    """The executor's steps: (text, why, the GPU's own numbering)."""
    return [
        (f"{st.action} {st.target}", st.why, (st.detail["step"], st.detail["of"]))
        for p in plan.gpus
        for i, c in enumerate(p.steps)
        for st in [plan_step(c, i, len(p.steps))]
    ]


def test_a_gpu_without_mig_is_enabled_then_its_instances_made_in_slice_order():
    plan = node_plan(state(mig=(False, False)), Desired(True, {"3g.40gb": 1, "2g.20gb": 2}))
    assert executed(plan) == [
        ("enable MIG mode on GPU 0", "the layout needs MIG on", (1, 4)),
        ("create 2g.20gb at slices 0-1 on GPU 0", "the layout wants it", (2, 4)),
        ("create 2g.20gb at slices 2-3 on GPU 0", "the layout wants it", (3, 4)),
        ("create 3g.40gb at slices 4-7 on GPU 0", "the layout wants it", (4, 4)),
    ]


def test_changing_a_layout_destroys_what_has_no_room_before_creating():
    plan = node_plan(state([gi(1, "7g.80gb", 0)]), Desired(True, {"3g.40gb": 2}))
    gone = "no room for it in the layout"
    assert executed(plan) == [
        ("destroy compute instance 0 of 7g.80gb (GI 1, slices 0-7) on GPU 0", gone, (1, 4)),
        ("destroy 7g.80gb (GI 1, slices 0-7) on GPU 0", gone, (2, 4)),
        ("create 3g.40gb at slices 0-3 on GPU 0", "the layout wants it", (3, 4)),
        ("create 3g.40gb at slices 4-7 on GPU 0", "the layout wants it", (4, 4)),
    ]


def test_turning_mig_off_destroys_then_disables_and_a_pending_mode_needs_a_reset():
    off = node_plan(state([gi(1, "7g.80gb", 0)]), Desired(False, {}))
    assert [(text, why) for text, why, _ in executed(off)] == [
        (
            "destroy compute instance 0 of 7g.80gb (GI 1, slices 0-7) on GPU 0",
            "MIG goes off on this GPU",
        ),
        ("destroy 7g.80gb (GI 1, slices 0-7) on GPU 0", "MIG goes off on this GPU"),
        ("disable MIG mode on GPU 0", "the config turns MIG off"),
    ]
    pending = node_plan(state(mig=(False, True)), Desired(True, {}))
    assert executed(pending) == [
        (
            "reset GPU 0 to apply the pending MIG enable",
            "a MIG mode change takes effect after a GPU reset",
            (1, 1),
        )
    ]


def test_the_plan_as_text_and_data():
    s = state([gi(1, "3g.40gb", 0), gi(2, "3g.40gb", 4)], [proc(7, gi_id=2, ci_id=0)])
    plan = node_plan(s, Desired(True, {"3g.40gb": 1, "2g.20gb": 2}, source="--layout x"))
    assert plan.lines() == [
        "GPU 0 (H100-80GB): 3g.40gb=1,2g.20gb=2  [--layout x]",
        "  keep    3g.40gb (GI 2, slices 4-7)",
        "  destroy compute instance 0 of 3g.40gb (GI 1, slices 0-3)",
        "  destroy 3g.40gb (GI 1, slices 0-3)",
        "  create 2g.20gb at slices 0-1",
        "  create 2g.20gb at slices 2-3",
    ]
    data = plan.to_dict(dry_run=True)
    assert data["dryRun"] is True and data["gpus"][0]["steps"] == [
        line.strip() for line in plan.lines()[2:]
    ]
    assert not plan.empty and not plan.untouched and plan.blocked == []


def test_a_plan_that_touches_no_gpu_is_untouched_and_applied():
    s = state()
    plan = NodePlan((diff(s, None),), {0: None}, from_file=True)
    assert plan.untouched and plan.empty
    assert plan.lines() == ["GPU 0 (H100-80GB): matched by no entry: left as is"]
    assert plan.to_dict(False) == {"gpus": [], "dryRun": False}


def target(name, config, state="success", pods=()):
    return NodeTarget(name, config, state, H100, 8, list(pods))


def test_label_plan_patches_only_the_nodes_that_change_keeping_the_old_value():
    plan = LabelPlan(
        (
            target("gpu-a", "all-disabled"),
            target("gpu-b", "all-1g.10gb"),
            target("gpu-c", None, None, ["ml/train"]),
        ),
        "all-1g.10gb",
        ("a note",),
    )
    assert [t.name for t in plan.pending] == ["gpu-a", "gpu-c"]
    assert [(s.text(), s.detail["from"], s.detail["to"]) for s in plan.steps] == [
        (
            "label node gpu-a: nvidia.com/mig.config: all-disabled -> all-1g.10gb",
            "all-disabled",
            "all-1g.10gb",
        ),
        ("label node gpu-c: nvidia.com/mig.config: (none) -> all-1g.10gb", None, "all-1g.10gb"),
    ]
    assert plan.lines() == [
        "note: a note",
        "node gpu-a: nvidia.com/mig.config: all-disabled -> all-1g.10gb (state: success)",
        "node gpu-b: nvidia.com/mig.config: already set (state: success)",
        "node gpu-c: nvidia.com/mig.config: (none) -> all-1g.10gb (state: none)",
        "  WARNING: pods using GPUs there will lose them: ml/train",
    ]
    assert plan.to_dict(True)["nodes"][2] == {
        "node": "gpu-c",
        "from": None,
        "to": "all-1g.10gb",
        "state": None,
        "gpuPods": ["ml/train"],
    }
