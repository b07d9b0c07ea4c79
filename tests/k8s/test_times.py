"""API times as kubectl shows them."""

from gpuctl.k8s.times import age, seconds


def test_age_is_the_largest_whole_unit_as_kubectl_shows_it():
    created = "2026-01-01T00:00:00Z"
    start = seconds(created)
    assert start is not None
    assert [age(created, start + s) for s in (0, 59, 60, 3599, 3600, 86399, 86400 * 3)] == [
        "0s", "59s", "1m", "59m", "1h", "23h", "3d",
    ]  # fmt: skip
    assert age(created, start - 5) == "0s"  # a clock behind the server's
    assert age(None, start) == age("yesterday", start) == "-"
