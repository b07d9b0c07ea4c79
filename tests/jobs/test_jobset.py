"""Multi-node jobs as JobSets and queued jobs (pure): the objects validate against JobSet's
CRD (gpuctl/sim/crds/) or Kubernetes' own schema, keep torchrun's environment, restart as one."""

import pytest
import yaml

from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.jobs.admission import multinode
from gpuctl.jobs.core import jobset
from gpuctl.jobs.core.manifests import render
from gpuctl.jobs.core.spec import parse_job
from gpuctl.jobs.core.status import row, status_of
from tests.crd_schema import assert_valid_cr
from tests.k8s_schema import assert_valid

BASE = "apiVersion: gpuctl/v1\nname: llm\nimage: nvcr.io/nvidia/pytorch:24.05-py3\n"
TRAIN = BASE + "nodes: 4\ngpus: 8\nretries: 2\nmaster_port: 23456\n"


def spec_of(text):
    return parse_job(load_yaml(text, "job.yaml"))


def env_of(pod):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["containers"][0]["env"]}


def test_a_jobset_job_is_one_schema_valid_jobset():
    (js,) = render(spec_of(TRAIN + "multinode: jobset\nqueue: team-a\nttl_after_finished: 1h\n"))
    assert_valid_cr(js)
    assert (js["apiVersion"], js["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    (rj,) = js["spec"]["replicatedJobs"]
    job = rj["template"]["spec"]
    assert (rj["name"], rj["replicas"]) == ("workers", 1)
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", 4, 4)
    # a worker's failure fails the Job at once; JobSet restarts the whole group, `retries` times
    assert job["backoffLimit"] == 0
    assert job["template"]["spec"]["restartPolicy"] == "Never"
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 2}
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert js["spec"]["ttlSecondsAfterFinished"] == 3600
    # queued: Kueue's label, created suspended
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert js["spec"]["suspend"] is True
    # the pods carry gpuctl's labels (logs find them); the Job does not (not listed twice)
    assert job["template"]["metadata"]["labels"]["gpuctl.io/job"] == "llm"
    assert "metadata" not in rj["template"]


def test_workers_meet_at_the_first_workers_stable_dns_name():
    (js,) = render(spec_of(TRAIN + "multinode: jobset\n"))
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    env = env_of(pod)
    # <jobset>-<replicatedJob>-<job index>-<pod index>.<subdomain = the JobSet's name>
    assert env["MASTER_ADDR"] == jobset.master_address("llm") == "llm-workers-0-0.llm"
    assert env["MASTER_PORT"] == "23456" and env["NNODES"] == "4"
    assert env["NODE_RANK"] == {
        "fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        }
    }
    assert "subdomain" not in pod  # JobSet sets it and makes the headless Service
    # the same job as an Indexed Job: its own Service, worker 0 by its index
    svc, job = render(spec_of(TRAIN))
    assert (svc["kind"], job["kind"]) == ("Service", "Job")
    assert env_of(job["spec"]["template"]["spec"])["MASTER_ADDR"] == "llm-0.llm"


def test_a_queued_job_is_created_suspended_with_the_queue_label():
    objs = render(spec_of(TRAIN + "queue: team-a\n"))
    for obj in objs:
        assert_valid(obj)
    svc, job = objs
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert "kueue.x-k8s.io/queue-name" not in svc["metadata"]["labels"]
    (plain,) = render(spec_of(BASE))
    assert "suspend" not in plain["spec"]


def test_a_single_node_job_ignores_multinode():
    (job,) = render(spec_of(BASE + "multinode: jobset\n"))
    assert job["kind"] == "Job"


def test_render_makes_a_jobset_offline_only_when_asked():
    spec = spec_of(TRAIN)
    assert multinode(None, spec, None).multinode == "indexed-job"
    assert multinode(None, spec, "jobset").multinode == "jobset"
    assert multinode(None, spec_of(TRAIN + "multinode: jobset\n"), "indexed-job").multinode == (
        "indexed-job"
    )


def test_the_render_command_takes_multinode(cli, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(TRAIN)
    r = cli("render", str(path), "--multinode", "jobset")
    assert r.code == 0, r
    (js,) = list(yaml.safe_load_all(r.out))
    assert js["kind"] == "JobSet"
    assert [d["kind"] for d in yaml.safe_load_all(cli("render", str(path)).out)] == [
        "Service",
        "Job",
    ]


@pytest.mark.parametrize(
    "text, where, message",
    [
        (BASE + "kind: Pod\nqueue: a\n", "queue", "applies to kind Job only"),
        (BASE + "queue: Team_A\n", "queue", "not a valid LocalQueue name"),
        (TRAIN + "multinode: slurm\n", "multinode", "must be one of jobset, indexed-job"),
        (
            BASE + "labels: {kueue.x-k8s.io/queue-name: a}\n",
            "labels",
            "give the LocalQueue as queue:",
        ),
        (
            "apiVersion: gpuctl/v1\nname: "
            + "a" * 45
            + "\nimage: x\nnodes: 16\nmultinode: jobset\n",
            "name",
            "too long for a JobSet of 16 workers",
        ),
    ],
)
def test_bad_queue_and_multinode_fields(text, where, message):
    with pytest.raises(SpecError, match=message) as e:
        spec_of(text)
    assert e.value.field == where and e.value.file == "job.yaml" and e.value.line


def test_a_name_too_long_for_a_jobset_is_refused_when_the_cluster_picks_jobset():
    spec = spec_of("apiVersion: gpuctl/v1\nname: " + "a" * 45 + "\nimage: x\nnodes: 16\n")
    with pytest.raises(SpecError, match="job.yaml: name: too long for a JobSet"):
        multinode(None, spec, "jobset")
    assert multinode(None, spec, None).multinode == "indexed-job"


def test_jobset_status_in_rows():
    (js,) = render(spec_of(TRAIN + "multinode: jobset\nqueue: team-a\n"))
    js["metadata"]["namespace"] = "team-a"
    assert status_of(js) == "Queued"
    js["spec"]["suspend"] = False
    js["status"] = {
        "restarts": 1,
        "replicatedJobsStatus": [
            {
                "name": "workers",
                "ready": 1,
                "active": 1,
                "succeeded": 0,
                "failed": 0,
                "suspended": 0,
            }
        ],
    }
    r = row(js)
    assert (r["status"], r["workers"], r["active"], r["restarts"]) == ("Running", 4, 4, 1)
    assert (r["gpus_per_worker"], r["gpu_resource"]) == (8, "nvidia.com/gpu")
    js["status"]["conditions"] = [
        {
            "type": "Completed",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    assert status_of(js) == "Succeeded"
    suspended_job = {"kind": "Job", "metadata": {}, "spec": {"suspend": True}}
    assert status_of(suspended_job) == "Suspended"  # no queue: nothing will start it


def test_rendered_yaml_has_no_anchors(cli, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(TRAIN)
    out = cli("render", str(path), "--multinode", "jobset").out
    assert "&id" not in out and "*id" not in out
    assert (
        out.count("fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']")
        >= 3
    )


def test_every_multinode_example_is_a_valid_jobset():
    import glob
    import os

    from gpuctl.common.specfile import load_yaml_file
    from tests import ROOT

    made = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.yaml"))):
        text = open(path).read()
        if "gpuctl/v1" not in text or "kind: Cluster" in text or "kind: Template" in text:
            continue
        spec = parse_job(load_yaml_file(path))
        if spec.nodes > 1:
            *before, js = render(multinode(None, spec, "jobset"))  # a ComputeDomain first
            assert js["kind"] == "JobSet" and all(o["kind"] == "ComputeDomain" for o in before)
            for obj in (*before, js):
                assert_valid_cr(obj)
            made += 1
    assert made >= 1
