"""MIG layout validation and placement (pure core), checked against brute force."""

import itertools
import random
from collections import Counter
from types import SimpleNamespace

import pytest

from gpuctl.gpus.geometry import find_model, models
from gpuctl.gpus.mig_layout import LayoutError, devices_of, parse_layout_text, place, uniform_layout
from gpuctl.mig.core.diff import Desired, GpuState, diff

H100 = find_model("H100-80GB")
A30 = find_model("A30")
RTX = find_model("RTX-PRO-6000")


def reason(model, layout):
    with pytest.raises(LayoutError) as e:
        place(model, layout)
    return str(e.value), e.value.hint


def test_memory_slices_explained_in_words():
    text, _ = reason(H100, {"3g.40gb": 2, "1g.10gb": 1})
    assert text.startswith("3g.40gb ×2 use all 8 memory slices; 1g.10gb ×1 needs one more")


def test_unknown_profile_lists_that_gpus_profiles():
    text, hint = reason(H100, {"3g.20gb": 1})
    assert "H100-80GB has no MIG profile '3g.20gb'" in text
    assert hint == "H100-80GB profiles: " + ", ".join(p.name for p in H100.profiles)


def test_4g_next_to_4g_rejected():
    text, _ = reason(H100, {"4g.40gb": 2})
    assert "at most 1 4g.40gb" in text and "0-3" in text


def test_two_media_extension_instances_rejected():
    assert "one set of media engines" in reason(H100, {"1g.10gb+me": 2})[0]
    # Two different +me profiles (A30 has 1g and 2g ones) share the same single media set.
    assert "one set of media engines" in reason(A30, {"1g.6gb+me": 1, "2g.12gb+me": 1})[0]


def test_me_all_only_with_no_me_profiles():
    assert place(RTX, {"1g.24gb+me.all": 1, "1g.24gb-me": 3})
    assert "only -me profiles" in reason(RTX, {"1g.24gb+me.all": 1, "1g.24gb": 1})[0]
    # ... and a second +me.all is not a -me profile either.
    assert "not 2g.48gb+me.all" in reason(RTX, {"1g.24gb+me.all": 1, "2g.48gb+me.all": 1})[0]


def test_max_instances_and_compute_slices():
    assert "at most 7 1g.10gb" in reason(H100, {"1g.10gb": 8})[0]
    assert "need 8 compute slices" in reason(H100, {"4g.40gb": 1, "2g.20gb": 2})[0]


def test_placements_are_real_and_disjoint():
    placed = place(H100, {"3g.40gb": 1, "2g.20gb": 2})
    assert [(p.profile.name, p.start) for p in placed] == [
        ("2g.20gb", 0),
        ("2g.20gb", 2),
        ("3g.40gb", 4),
    ]
    placed = place(H100, {"2g.20gb": 3, "1g.20gb": 1})
    assert ("1g.20gb", 6) in [(p.profile.name, p.start) for p in placed]


def test_uniform_layouts_and_shorthand():
    assert uniform_layout(H100, "1g.10gb") == {"1g.10gb": 7}
    assert uniform_layout(H100, "3g.40gb") == {"3g.40gb": 2}
    assert uniform_layout(A30, "2g.12gb") == {"2g.12gb": 2}
    assert parse_layout_text("3g.40gb=2, 1g.10gb") == {"3g.40gb": 2, "1g.10gb": 1}
    with pytest.raises(Exception, match="whole number"):
        parse_layout_text("3g.40gb=two")


def test_sub_compute_instance_names_refused_clearly():
    assert "not supported" in reason(H100, {"1c.3g.40gb": 1})[0]
    assert "not a MIG profile name" in reason(H100, {"3g": 1})[0]


def _brute_feasible(model, devices):
    """Every assignment of starts, no pruning: does a non-overlapping one exist?"""
    for starts in itertools.product(*[d.profile.starts for d in devices]):
        mask, ok = 0, True
        for d, s in zip(devices, starts):
            m = ((1 << d.profile.size) - 1) << s
            if mask & m:
                ok = False
                break
            mask |= m
        if ok:
            return True
    return False


def _hw_rules_ok(model, devices):
    names = Counter(d.profile.name for d in devices)
    if any(n > model.profile(k).max_instances for k, n in names.items()):
        return False
    if sum(n for k, n in names.items() if k.endswith("+me")) > 1:
        return False
    me_all = sum(n for k, n in names.items() if k.endswith("+me.all"))
    if me_all and sum(n for k, n in names.items() if not k.endswith("-me")) > 1:
        return False  # nvml.h: a +me.all instance allows only -me ones beside it
    return (
        len(devices) <= model.max_gpu_instances
        and sum(d.profile.slices for d in devices) <= model.compute_slices
    )


@pytest.mark.parametrize(
    "model", [H100, A30, RTX, find_model("A100-40GB")], ids=lambda m: m.short_name
)
def test_validation_agrees_with_brute_force(model):
    rng = random.Random(5)
    names = [p.name for p in model.profiles]
    for _ in range(300):
        layout = Counter(rng.choice(names) for _ in range(rng.randint(1, 6)))
        devices = devices_of(model, layout)
        expected = _hw_rules_ok(model, devices) and _brute_feasible(model, devices)
        try:
            placed = place(model, layout)
        except LayoutError:
            assert not expected, layout
            continue
        assert expected, layout
        assert Counter(p.profile.name for p in placed) == layout
        mask = 0
        for p in placed:
            assert p.start in p.profile.starts and not mask & p.mask
            mask |= p.mask


def test_every_model_loads_and_validates_its_full_profiles():
    for m in models():
        for p in m.profiles:
            assert place(m, {p.name: 1})


# ---------- diff: current state → steps ----------


def gi(gi_id, profile, start, ci_profile=None, cis=None):
    p = H100.profile(profile)
    ci = (
        [
            SimpleNamespace(
                ci_id=0,
                profile_id=ci_profile
                if ci_profile is not None
                else (
                    p.ci_profile_id
                    if p.ci_profile_id is not None
                    else {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}[p.slices]
                ),
            )
        ]
        if cis is None
        else cis
    )
    return SimpleNamespace(
        gi_id=gi_id, profile_id=p.profile_id, start=start, size=p.size, compute_instances=ci
    )


def proc(pid, gi_id=None, ci_id=None):
    return SimpleNamespace(
        pid=pid, name="train.py", user="alice", used_memory_mib=1234, gi_id=gi_id, ci_id=ci_id
    )


def state(instances=(), processes=(), mig=(True, True)):
    return GpuState(0, H100.nvml_name, "GPU-0", H100, mig, list(instances), list(processes))


def test_diff_keeps_matching_instances_and_destroys_the_rest():
    s = state([gi(1, "3g.40gb", 0), gi(2, "3g.40gb", 4)])
    plan = diff(s, Desired(True, {"3g.40gb": 1, "2g.20gb": 2}))
    kinds = [(st.kind, st.gi_id, st.start) for st in plan.steps]
    # One 3g stays; the other goes and two 2g take its place.
    assert len(plan.kept) == 1
    assert [k for k, *_ in kinds] == ["destroy-ci", "destroy-gi", "create", "create"]
    destroyed = kinds[1][1]
    kept_start = 0 if destroyed == 2 else 4
    assert {st.start for st in plan.steps if st.kind == "create"}.isdisjoint(
        range(kept_start, kept_start + 4)
    )


def test_diff_keeps_the_busy_instance():
    s = state([gi(1, "3g.40gb", 0), gi(2, "3g.40gb", 4)], [proc(77, gi_id=2, ci_id=0)])
    plan = diff(s, Desired(True, {"3g.40gb": 1, "2g.20gb": 2}))
    assert not plan.blocked
    assert [st.gi_id for st in plan.steps if st.kind == "destroy-gi"] == [1]


def test_diff_blocks_destroying_busy_instance_naming_the_process():
    s = state([gi(1, "7g.80gb", 0)], [proc(4242, gi_id=1, ci_id=0)])
    plan = diff(s, Desired(True, {"1g.10gb": 7}))
    assert plan.blocked and "pid 4242 train.py (user alice, 1234 MiB)" in plan.blocked[0]


def test_diff_completes_a_gpu_instance_left_without_compute_instance():
    s = state([gi(1, "3g.40gb", 0), gi(2, "3g.40gb", 4, cis=[])])
    plan = diff(s, Desired(True, {"3g.40gb": 2}))
    assert [(st.kind, st.gi_id) for st in plan.steps] == [("create-ci", 2)]


@pytest.mark.parametrize("ci_profile", [0, 7])
def test_a_whole_1g_rev2_instance_is_applied_with_either_1_slice_ci_profile(ci_profile):
    # mig-parted makes 1g.20gb with CI profile 1_SLICE (0); nvidia-smi -C with 1_SLICE_REV1 (7).
    s = state([gi(1, "1g.20gb", 0, ci_profile=ci_profile)], [proc(9, 1, 0)])
    plan = diff(s, Desired(True, {"1g.20gb": 1}))
    assert plan.steps == [] and plan.blocked == [] and s.layout() == {"1g.20gb": 1}


def test_diff_is_empty_when_applied():
    s = state([gi(1, "3g.40gb", 0), gi(2, "3g.40gb", 4)])
    assert diff(s, Desired(True, {"3g.40gb": 2})).applied


def test_diff_mode_changes():
    off = state(mig=(False, False))
    plan = diff(off, Desired(True, {"7g.80gb": 1}))
    assert [st.kind for st in plan.steps] == ["set-mig-mode", "create"]
    busy = state(mig=(False, False), processes=[proc(9)])
    assert "pid 9" in diff(busy, Desired(True, {"7g.80gb": 1})).blocked[0]
    pending = state(mig=(False, True))
    assert [st.kind for st in diff(pending, Desired(True, {})).steps] == ["reset"]
    on = state([gi(1, "7g.80gb", 0)])
    assert [st.kind for st in diff(on, Desired(False, {})).steps] == [
        "destroy-ci",
        "destroy-gi",
        "set-mig-mode",
    ]
    with pytest.raises(LayoutError, match="GPU 0 \\(H100-80GB\\)"):
        diff(on, Desired(True, {"4g.40gb": 2}))


@pytest.mark.parametrize("count", [8, 10**9, 10**30])
def test_huge_counts_refused_by_the_cap_without_building_them(count):
    # 10**30 once overflowed into a traceback; 10**9 took gigabytes before being refused.
    assert (
        f"1g.10gb ×{count}: each H100-80GB holds at most 7 1g.10gb"
        in reason(H100, {"1g.10gb": count})[0]
    )
