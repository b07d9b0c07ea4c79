"""`gpuctl jobs why` in words (pure): Kueue Workload conditions, queue position, pods, fit
inputs. Workloads are built as Kueue builds them and checked against its CRD."""

import pytest

from gpuctl.common.specfile import load_yaml
from gpuctl.jobs.core import why
from gpuctl.jobs.core.manifests import render
from gpuctl.jobs.core.spec import parse_job
from tests.crd_schema import assert_valid_cr
from tests.kueue_workloads import admitted, condition, pending, workload_for

SPEC = """apiVersion: gpuctl/v1
name: llm
namespace: team-a
image: x
nodes: 4
gpus: 8
gpu_type: [h100, h200]
queue: team-a
multinode: jobset
tolerations: [{key: spot, operator: Exists}]
"""


@pytest.fixture
def jobset():
    (js,) = render(parse_job(load_yaml(SPEC, "job.yaml")), "gpu-type")
    return js


def with_status(workload, status):
    out = {**workload, "status": status}
    assert_valid_cr(out)
    return out


def test_the_workload_is_the_one_the_job_owns(jobset):
    wl = workload_for(jobset)
    other = workload_for({**jobset, "metadata": {**jobset["metadata"], "name": "other"}})
    assert why.workload_of(jobset, [other, wl]) is wl
    # a Workload left from an earlier job of the same name (another uid) is not it
    earlier = {**jobset, "metadata": {**jobset["metadata"], "uid": "1111"}}
    assert why.workload_of(earlier, [wl]) is None
    assert why.workload_of({**jobset, "kind": "Job"}, [wl]) is None


def test_waiting_for_quota(jobset):
    wl = with_status(workload_for(jobset), pending("couldn't assign flavors to pod set workers: x"))
    assert why.workload_in_words(wl, "team-a") == [
        "waiting for quota in ClusterQueue team-a (Pending): couldn't assign flavors to pod set "
        "workers: x"
    ]
    assert why.workload_in_words(workload_for(jobset), None) == [
        "quota: not considered yet (no QuotaReserved condition): is its LocalQueue's "
        "ClusterQueue active?"
    ]


def test_admitted_then_waiting_for_pods_ready(jobset):
    wl = workload_for(jobset)
    status = admitted(wl, "team-a", "h100", "nvidia.com/gpu")
    status["conditions"].append(
        condition("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded")
    )
    assert why.workload_in_words(with_status(wl, status), None) == [
        "quota reserved in ClusterQueue team-a (flavors: nvidia.com/gpu → h100)",
        "admitted: Kueue let its pods start",
        "waiting for all pods to be ready (WaitForStart): Not all pods are ready or succeeded; "
        "with waitForPodsReady, Kueue evicts and requeues it if they are not ready in time",
    ]
    status["conditions"][-1] = condition(
        "PodsReady", "True", "Started", "All pods reached readiness"
    )
    assert why.workload_in_words(with_status(wl, status), None)[-1] == "all pods ready"


def test_reserved_but_waiting_for_admission_checks(jobset):
    wl = workload_for(jobset)
    status = admitted(wl, "team-a", "h100", "nvidia.com/gpu")
    status["conditions"][1] = condition(
        "Admitted",
        "False",
        "UnsatisfiedAdmissionChecks",
        "The workload has not all admission checks",
    )
    status["admissionChecks"] = [
        {
            "name": "capacity",
            "state": "Pending",
            "message": "",
            "lastTransitionTime": "2026-11-30T12:00:00Z",
        }
    ]
    assert why.workload_in_words(with_status(wl, status), None)[1] == (
        "not admitted yet (UnsatisfiedAdmissionChecks): The workload has not all admission "
        "checks (admission checks: capacity Pending)"
    )


def test_evicted_for_pods_not_ready_and_requeued(jobset):
    wl = workload_for(jobset)
    status = pending("couldn't assign flavors")
    status["conditions"] += [
        condition(
            "Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout default/llm"
        ),
        condition("Requeued", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout"),
    ]
    status["requeueState"] = {"count": 2, "requeueAt": "2026-11-30T12:05:00Z"}
    assert why.workload_in_words(with_status(wl, status), "team-a")[:2] == [
        "evicted: its pods were not all ready in time (waitForPodsReady.timeout) "
        "(PodsReadyTimeout): Exceeded the PodsReady timeout default/llm",
        "requeued 2 time(s); next try at 2026-11-30T12:05:00Z",
    ]


def test_finished_and_deactivated(jobset):
    wl = workload_for(jobset)
    done = with_status(
        wl, {"conditions": [condition("Finished", "True", "Succeeded", "Job finished")]}
    )
    assert why.workload_in_words(done, None) == ["finished (Succeeded): Job finished"]
    off = {**wl, "spec": {**wl["spec"], "active": False}}
    assert why.workload_in_words(off, None)[0].startswith("deactivated (spec.active is false)")


def test_position_from_the_visibility_api():
    summary = {
        "items": [
            {
                "metadata": {"name": "a"},
                "localQueueName": "q",
                "positionInLocalQueue": 0,
                "positionInClusterQueue": 3,
            }
        ]
    }
    assert why.position_in_words(summary, "a") == (
        "position: 0 workload(s) ahead in LocalQueue q, 3 ahead in its ClusterQueue"
    )
    assert why.position_in_words(summary, "b") is None


def test_pods_say_why_they_wait():
    pods = [
        {
            "metadata": {"name": "llm-workers-0-1"},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
                    }
                ],
            },
        },
        {
            "metadata": {"name": "llm-workers-0-0"},
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": "main",
                        "state": {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": "pull access denied",
                            }
                        },
                    }
                ],
            },
        },
    ]
    assert why.pods_in_words(pods) == [
        "pod llm-workers-0-0: container main waiting (ImagePullBackOff): pull access denied",
        "pod llm-workers-0-1: not scheduled (Unschedulable): 0/2 nodes are available: 2 "
        "Insufficient nvidia.com/gpu.",
    ]


def test_fit_inputs_are_read_from_the_live_object(jobset):
    where, workers, tolerations = why.fit_inputs(jobset)
    assert (where.resource, where.per_worker, workers) == ("nvidia.com/gpu", 8, 4)
    # the affinity the job was created with, whatever its key: the nodes it may use
    assert where.terms == (({"key": "gpu-type", "operator": "In", "values": ["h100", "h200"]},),)
    assert {"key": "spot", "operator": "Exists"} in tolerations
