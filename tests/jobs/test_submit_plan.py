"""Planning `gpuctl submit` and `gpuctl jobs delete` (pure): the namespace placed once, the
objects to create with why, the fit verdict, what a delete removes and what a failed one
says."""

from __future__ import annotations

from gpuctl.common.specfile import load_yaml
from gpuctl.jobs.core import submit
from gpuctl.jobs.core.delete import plan_delete
from gpuctl.jobs.core.manifests import placement, render
from gpuctl.jobs.core.spec import parse_job
from gpuctl.k8s.fit import FitReport, NodeFit


def spec(text: str):
    return parse_job(load_yaml("apiVersion: gpuctl/v1\nimage: x\n" + text, "job.yaml"))


def node(name: str, now: int, ever: int) -> NodeFit:
    return NodeFit(name, "h100", 8, 8 * now, now, ever, "")


def fit(workers: int, *nodes: NodeFit) -> FitReport:
    return FitReport("nvidia.com/gpu", 8, workers, nodes, wanted="H100-80GB")


def plan_for(job, namespace: str = "team-a") -> submit.SubmitPlan:
    objects = submit.place(render(job), namespace)
    return submit.SubmitPlan(job, namespace, objects, placement(job))


def test_the_namespace_is_the_option_else_the_specs_else_the_connections():
    job = spec("name: a\nnamespace: ml\n")
    assert submit.namespace_for("team-a", job, "default") == "team-a"
    assert submit.namespace_for(None, job, "default") == "ml"
    assert submit.namespace_for(None, spec("name: a\n"), "default") == "default"


def test_every_object_is_placed_in_the_namespace_and_created_in_render_order():
    job = spec("name: llm\nnodes: 2\ngpus: 8\nmultinode: indexed-job\n")
    p = plan_for(job).plan
    assert [s.target for s in p.steps] == ["Service team-a/llm", "Job team-a/llm"]
    assert all(s.detail["object"]["metadata"]["namespace"] == "team-a" for s in p.steps)
    assert p.steps[0].why == "headless: the workers find each other by name"
    assert p.steps[1].why == "the job's 2 workers, one indexed pod each"
    assert p.lines()[0] == "submit llm to namespace team-a:"


def test_placing_leaves_the_rendered_manifests_as_they_were():
    manifests = render(spec("name: a\n"))
    placed = submit.place(manifests, "team-a")
    assert "namespace" not in manifests[0]["metadata"]
    assert placed[0]["metadata"]["namespace"] == "team-a"


def test_a_queued_job_says_it_waits_for_kueue():
    job = spec("name: llm\ngpus: 1\nqueue: batch\n")
    (step,) = plan_for(job).plan.steps
    assert step.why == "the job, suspended until Kueue admits it from LocalQueue batch"


def test_a_job_that_can_never_fit_is_stopped_with_the_reason():
    job = spec("name: big\nnodes: 3\ngpus: 8\ngpu_type: h100\n")
    planned = submit.with_fit(plan_for(job), fit(3, node("n1", 1, 1), node("n2", 0, 1)))
    assert planned.error is not None
    assert planned.error.message == (
        "big can never fit this cluster: needs 3 × 8 nvidia.com/gpu; nodes with H100-80GB "
        "have room for 2 workers at most"
    )
    assert planned.shows_fit and not planned.waits_for_room


def test_a_job_that_fits_later_waits_for_room_and_is_sent():
    job = spec("name: big\nnodes: 2\ngpus: 8\n")
    planned = submit.with_fit(plan_for(job), fit(2, node("n1", 1, 1), node("n2", 0, 1)))
    assert planned.error is None and planned.waits_for_room


def test_a_job_that_fits_now_shows_no_fit_table():
    planned = submit.with_fit(plan_for(spec("name: a\ngpus: 8\n")), fit(1, node("n1", 1, 1)))
    assert planned.error is None and not planned.shows_fit


def test_the_plans_notes_are_the_queue_note_an_unchecked_fit_and_the_warnings():
    import dataclasses

    planned = dataclasses.replace(
        plan_for(spec("name: a\n")),
        queue_note="not queued",
        fit_skipped="listing nodes: forbidden",
        warnings=("claim is ReadWriteOnce",),
    )
    assert planned.plan.notes == (
        "not queued",
        "no fit check: listing nodes: forbidden",
        # no nodes read: the placement says what it assumed
        "GPUs as the device plugin's nvidia.com/gpu (no cluster read; --allocation dra asks "
        "through DRA ResourceClaims)",
        "claim is ReadWriteOnce",
    )


def test_the_names_and_kind_are_those_of_the_objects():
    planned = plan_for(spec("name: llm\nnodes: 2\ngpus: 8\nmultinode: indexed-job\n"))
    assert planned.names == "Service/llm, Job/llm" and planned.kind == "Job"


def obj(kind: str, name: str = "llm") -> dict:
    return {"kind": kind, "metadata": {"name": name}}


def test_deleting_a_job_removes_it_with_its_pods_and_its_service():
    d = plan_delete("llm", "team-a", [obj("Job"), obj("Service")])
    assert d.targets == ["Job/llm", "Service/llm"]
    assert d.in_words() == "Job/llm, Service/llm and the Job's pods in namespace team-a"
    assert [s.why for s in d.plan.steps] == [
        "the job; its pods go with it",
        "the headless Service of its workers",
    ]
    assert all(s.action == "delete" for s in d.plan.steps)


def test_a_service_alone_was_left_by_an_earlier_failure():
    d = plan_delete("llm", "team-a", [obj("Service")])
    assert d.in_words() == "Service/llm in namespace team-a"
    assert d.plan.steps[0].why == "the headless Service left by an earlier failure"


def test_a_bare_pod_has_no_pods_of_its_own():
    assert plan_delete("p", "ml", [obj("Pod", "p")]).in_words() == "Pod/p in namespace ml"


def test_a_delete_that_stopped_says_what_was_deleted_and_what_is_left():
    d = plan_delete("llm", "team-a", [obj("Job"), obj("Service")])
    assert d.unfinished(["Job/llm"], ["Service/llm"]) == (
        "; deleted Job/llm; left in namespace team-a: Service/llm",
        "run it again: gpuctl jobs delete llm -n team-a",
    )
    assert d.unfinished([], ["Job/llm", "Service/llm"])[0] == (
        "; left in namespace team-a: Job/llm, Service/llm"
    )
