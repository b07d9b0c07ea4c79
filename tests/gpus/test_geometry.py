"""The MIG geometry rules the planner and the simulator share."""

import pytest

from gpuctl.gpus.geometry import CI_PROFILE_BY_SLICES, CI_PROFILE_SLICES, media_conflict


@pytest.mark.parametrize(
    "names,conflict",
    [
        (["1g.10gb+me", "1g.10gb", "3g.40gb"], None),
        (["1g.10gb+me", "1g.10gb+me"], ("+me", ["1g.10gb+me", "1g.10gb+me"])),
        (["1g.6gb+me", "2g.12gb+me"], ("+me", ["1g.6gb+me", "2g.12gb+me"])),
        (["1g.24gb+me.all", "1g.24gb-me", "1g.24gb-me"], None),
        (["1g.24gb+me.all", "1g.24gb", "1g.24gb-me"], ("+me.all", ["1g.24gb"])),
        (["1g.24gb+me.all", "2g.48gb+me.all"], ("+me.all", ["2g.48gb+me.all"])),
    ],
)
def test_media_engines_one_set_per_gpu(names, conflict):
    assert media_conflict(names) == conflict


def test_compute_instance_profiles_map_both_ways():
    assert all(CI_PROFILE_SLICES[c] == s for s, c in CI_PROFILE_BY_SLICES.items())
    assert CI_PROFILE_SLICES[7] == 1  # 1_SLICE_REV1
