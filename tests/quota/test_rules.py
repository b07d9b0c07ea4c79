"""Quota objects, their difference and usage (pure)."""

import pytest

from gpuctl.common.errors import UsageError
from gpuctl.quota.core import rules as quota
from tests.gpu_cluster import pod
from tests.k8s_schema import assert_valid


def rq(ns, hard, used=None, name="q"):
    obj = {"metadata": {"name": name, "namespace": ns}, "spec": {"hard": hard}}
    if used is not None:
        obj["status"] = {"hard": hard, "used": used}
    return obj


def test_objects_are_schema_valid_and_carry_mig_resources():
    hard = quota.hard(4, quota.parse_mig(["1g.10gb=2", "3g.40gb=1", "1g.10gb+me=1"]))
    assert hard == {
        "requests.nvidia.com/gpu": "4",
        "requests.nvidia.com/mig-1g.10gb": "2",
        "requests.nvidia.com/mig-1g.10gb.me": "1",
        "requests.nvidia.com/mig-3g.40gb": "1",
    }
    assert_valid(quota.namespace_object("team-a"))
    assert_valid(quota.quota_object("team-a", hard))


def test_mig_profile_names_come_from_the_geometry():
    from gpuctl.gpus.geometry import models

    for m in models():
        for p in m.profiles:
            assert quota.parse_mig([f"{p.name}=1"]) == {p.resource_name: 1}
    # the resource spelling is accepted too
    assert quota.parse_mig(["nvidia.com/mig-2g.20gb=3"]) == {"nvidia.com/mig-2g.20gb": 3}


@pytest.mark.parametrize(
    "values, message",
    [
        (["1g.11gb=2"], "not a MIG profile of any known GPU"),
        (["1g.10gb"], "expected PROFILE=COUNT"),
        (["=2"], "expected PROFILE=COUNT"),
        (["1g.10gb=-1"], "whole number"),
        (["1g.10gb=two"], "whole number"),
        (["1g.10gb=1", "1g.10gb=2"], "given twice"),
    ],
)
def test_bad_mig_options(values, message):
    with pytest.raises(UsageError, match=message):
        quota.parse_mig(values)


@pytest.mark.parametrize("team", ["Team", "team_a", "-a", "a" * 64, "", "a.b", "team-a\n"])
def test_bad_team_names(team):
    with pytest.raises(UsageError):
        quota.check_team(team)


def test_hard_rejects_negative_gpus():
    with pytest.raises(UsageError):
        quota.hard(-1, {})


def test_diff_compares_by_value_and_reports_removals():
    cur = {"requests.nvidia.com/gpu": "4", "requests.nvidia.com/mig-1g.10gb": "2"}
    assert (
        quota.diff(cur, {"requests.nvidia.com/gpu": "4", "requests.nvidia.com/mig-1g.10gb": "2"})
        == []
    )
    assert quota.diff({"requests.nvidia.com/gpu": "4000m"}, {"requests.nvidia.com/gpu": "4"}) == []
    # by exact value: 4500m is not 4, though both round down to it
    assert quota.diff({"requests.nvidia.com/gpu": "4500m"}, {"requests.nvidia.com/gpu": "4"}) == [
        ("requests.nvidia.com/gpu", "4500m", "4")
    ]
    assert quota.diff(cur, {"requests.nvidia.com/gpu": "8"}) == [
        ("requests.nvidia.com/gpu", "4", "8"),
        ("requests.nvidia.com/mig-1g.10gb", "2", None),
    ]
    assert quota.diff(None, {"requests.nvidia.com/gpu": "1"}) == [
        ("requests.nvidia.com/gpu", None, "1")
    ]


def test_usage_from_status_else_pods_and_namespaces_without_quota():
    pods = [
        pod("a1", "team-a", 2),
        pod("a2", "team-a", 1),
        pod("a3", "team-a", 4, "Succeeded"),
        pod("b1", "team-b", 3),
        pod("c1", "team-c", 1, resource="nvidia.com/mig-1g.10gb"),
        pod("d1", "team-d", 0),
    ]
    quotas = [
        rq("team-a", {"requests.nvidia.com/gpu": "4", "requests.cpu": "10"}),
        rq("team-b", {"requests.nvidia.com/gpu": "8"}, {"requests.nvidia.com/gpu": "5"}),
    ]
    rows = quota.usage_rows(quotas, pods)
    assert [(r["namespace"], r["resource"], r["used"], r["hard"], r["source"]) for r in rows] == [
        ("team-a", "nvidia.com/gpu", 3, 4, "pods"),
        ("team-b", "nvidia.com/gpu", 5, 8, "quota"),
        ("team-c", "nvidia.com/mig-1g.10gb", 1, None, "pods"),
    ]


@pytest.mark.parametrize("order", [1, -1])
def test_the_tightest_of_several_quotas_is_shown(order):
    quotas = [
        rq("t", {"requests.nvidia.com/gpu": "8"}, name="big"),
        rq("t", {"requests.nvidia.com/gpu": "2"}, name="small"),
    ][::order]
    [row] = quota.usage_rows(quotas, [])
    assert (row["hard"], row["quota"]) == (2, "small")


def test_held_counts_init_containers_and_skips_finished_pods():
    p = pod("init", "t")
    p["spec"]["initContainers"] = [
        {"name": "warm", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    ]
    assert quota.held([p, pod("done", "t", 4, "Succeeded"), pod("run", "t", 1)]) == {
        ("t", "nvidia.com/gpu"): 3
    }
