"""The quota pre-check of `gpuctl submit` (pure)."""

import pytest

from gpuctl.jobs.core import quota_check
from gpuctl.jobs.core.manifests import placement
from gpuctl.jobs.core.spec import JobSpec
from tests.gpu_cluster import pod
from tests.node_corpus import corpus

NODES = corpus()


def offline(spec):
    """Where SPEC's workers go with no cluster read: the resource its words name."""
    return placement(spec)


def refused(spec, quotas, nodes=None):
    return quota_check.refusal(spec, placement(spec, nodes=nodes), "t", quotas, None)


def rq(ns, hard, used=None, name="q"):
    obj = {"metadata": {"name": name, "namespace": ns}, "spec": {"hard": hard}}
    if used is not None:
        obj["status"] = {"hard": hard, "used": used}
    return obj


def test_check_job_used_requested_allowed():
    quotas = [rq("t", {"requests.nvidia.com/gpu": "8"})]
    pods = [pod("p", "t", 6), pod("other-ns", "u", 8)]
    assert quota_check.check_job(quotas, pods, "t", "nvidia.com/gpu", 2) is None
    e = quota_check.check_job(quotas, pods, "t", "nvidia.com/gpu", 3)
    assert (e.used, e.requested, e.allowed, e.free, e.source) == (6, 3, 8, 2, "pods")
    # the quota's own status wins when the quota controller filled it
    quotas = [rq("t", {"requests.nvidia.com/gpu": "8"}, {"requests.nvidia.com/gpu": "8"})]
    assert not quota_check.needs_pods(quotas, "nvidia.com/gpu")
    e = quota_check.check_job(quotas, None, "t", "nvidia.com/gpu", 1)
    assert (e.used, e.source) == (8, "quota")
    # other resources are not limited by a GPU quota
    assert quota_check.check_job(quotas, [], "t", "nvidia.com/mig-1g.10gb", 5) is None
    assert (
        quota_check.check_job(
            [rq("t", {"requests.nvidia.com/mig-1g.10gb": "1"})],
            [],
            "t",
            "nvidia.com/mig-1g.10gb",
            2,
        ).allowed
        == 1
    )


def test_pods_of_the_namespace_that_have_not_finished_are_counted():
    quotas = [rq("t", {"requests.nvidia.com/gpu": "4"})]
    assert quota_check.needs_pods(quotas, "nvidia.com/gpu")
    pods = [pod("a", "t", 2), pod("done", "t", 2, "Succeeded"), pod("elsewhere", "u", 4)]
    pods.append({**pod("no-ns", "t", 1), "metadata": {"name": "no-ns"}})  # as a namespaced list
    e = quota_check.check_job(quotas, pods, "t", "nvidia.com/gpu", 2)
    assert (e.used, e.free) == (3, 1)


def test_the_refusal_names_the_job_its_workers_and_how_to_raise_the_quota():
    quotas = [rq("t", {"requests.nvidia.com/gpu": "8"}, {"requests.nvidia.com/gpu": "4"})]
    job = JobSpec("train", "img", gpus=4, nodes=2)
    e = quota_check.refusal(job, offline(job), "t", quotas, None)
    assert e.message == (
        "train would exceed the quota of namespace t: it requests 8 nvidia.com/gpu "
        "(2 workers × 4), 4 are used and quota q allows 8 (4 free); nothing was sent"
    )
    assert e.hint.startswith("raise it (gpuctl quota set t --gpus N)")
    assert refused(JobSpec("small", "img", gpus=4), quotas) is None
    assert refused(JobSpec("cpu", "img"), quotas) is None
    mig = [
        rq("t", {"requests.nvidia.com/mig-1g.10gb": "1"}, {"requests.nvidia.com/mig-1g.10gb": "1"})
    ]
    e = refused(JobSpec("slice", "img", mig="1g.10gb"), mig)
    assert "requests 1 nvidia.com/mig-1g.10gb," in e.message
    assert e.hint.startswith("raise it (gpuctl quota set t --mig PROFILE=K)")


@pytest.mark.parametrize(
    ("node", "job", "asked"),
    [
        # MIG single strategy: the slices are advertised as whole GPUs
        ("gfd-a100-mig-single", JobSpec("slice", "img", mig="1g.5gb"), "nvidia.com/gpu"),
        # time-slicing without renaming: the replicas are nvidia.com/gpu
        ("gfd-t4-shared", JobSpec("nb", "img", gpus=1, shared=True), "nvidia.com/gpu"),
        # ... and with renaming, nvidia.com/gpu.shared
        ("gfd-a10g-shared-renamed", JobSpec("nb", "img", gpus=1, shared=True),
         "nvidia.com/gpu.shared"),
    ],
)  # fmt: skip
def test_the_quota_counts_the_resource_the_workers_are_rendered_with_on_real_nodes(
    node, job, asked
):
    cluster = [NODES[node]]
    assert placement(job, nodes=cluster).resource == asked
    full = [rq("t", {f"requests.{asked}": "2"}, {f"requests.{asked}": "2"})]
    e = refused(job, full, cluster)
    assert e is not None and f"it requests 1 {asked}," in e.message
    # a quota on the resource the spec's words name does not hold these workers back
    named = offline(job).resource
    if named != asked:
        assert refused(job, full) is None  # what the check said before it read the placement
        other = [rq("t", {f"requests.{named}": "0"}, {f"requests.{named}": "0"})]
        assert refused(job, other, cluster) is None
