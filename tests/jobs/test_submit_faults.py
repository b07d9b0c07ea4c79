"""Submit under faults: the official client talks to the API emulator through a proxy that
loses answers, returns error pages, or holds them, and a real SIGINT stops gpuctl mid-submit.
Whatever happens, the cluster ends up with the whole job or nothing, and the message says
which (or exactly what is left, with the command that removes it)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from tests import ROOT, children
from tests.jobs.test_submit import add_node
from tests.standins.faults import delay, drop_answer, race_creator, reply, trickle, wait_until
from tests.standins.kube import write_kubeconfig

EX = os.path.join(ROOT, "examples")
JOBS = r"/apis/batch/v1/namespaces/team-a/jobs"
SERVICES = r"/api/v1/namespaces/team-a/services"
NAME = "llama-pretrain"


@pytest.fixture
def cluster(kube_api):
    """Two H100 nodes the multi-node example fits on, and the clients to look at them."""
    from kubernetes import client

    core, batch = client.CoreV1Api(kube_api), client.BatchV1Api(kube_api)
    add_node(core, "n1", 8, "h100")
    add_node(core, "n2", 8, "h100")
    return core, batch


def left_in(cluster):
    core, batch = cluster
    return [j.metadata.name for j in batch.list_namespaced_job("team-a").items] + [
        s.metadata.name for s in core.list_namespaced_service("team-a").items
    ]


STATUS_FAILURE = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": "etcdserver: request timed out",
        "reason": "InternalError",
        "code": 500,
    }
)


@pytest.mark.parametrize(
    "fault, says",
    [
        (drop_answer(), "broke before its answer"),
        (
            reply(
                502, "<html><h1>502 Bad Gateway</h1></html>", {"Content-Type": "text/html"}, True
            ),
            "HTTP 502",
        ),
        (reply(200, STATUS_FAILURE, forward=True), "etcdserver: request timed out"),
        (delay(4), "timed out"),
        (trickle(every_s=2, forward=True), "timed out"),
    ],
    ids=["dropped", "gateway-html", "200-with-status", "slow", "trickled"],
)
def test_a_job_made_despite_a_lost_answer_is_read_back_and_removed(
    cli, cluster, proxied_kube, monkeypatch, fault, says
):
    monkeypatch.setenv("GPUCTL_REQUEST_TIMEOUT", "1.5")
    rule = proxied_kube.on("POST", JOBS, fault)
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert rule.fired.is_set()
    assert r.code == 1 and "Traceback" not in r.err, r
    assert says in r.err
    # the Job was created behind the lost answer: found by name and removed, with the Service
    assert proxied_kube.seen("GET", f"{JOBS}/{NAME}"), "the Job was not read back"
    assert f"the objects created before the failure were removed: Job/{NAME}, Service/{NAME}" in (
        r.err
    )
    assert wait_until(lambda: left_in(cluster) == [], 10), left_in(cluster)


def test_a_refused_create_is_not_read_back_and_nothing_else_is_touched(cli, cluster, proxied_kube):
    proxied_kube.on("POST", JOBS, reply(422, STATUS_FAILURE.replace("500", "422")))
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 1
    assert f"were removed: Service/{NAME}" in r.err and f"Job/{NAME}" not in r.err
    assert not proxied_kube.seen("GET", f"{JOBS}/{NAME}")  # a refusal is certain: nothing to check
    assert left_in(cluster) == []


def test_a_failed_rollback_says_what_is_left_and_its_command_removes_it(
    cli, cluster, kube, proxied_kube, monkeypatch, tmp_path
):
    proxied_kube.on("POST", JOBS, drop_answer())
    proxied_kube.on("DELETE", f"{JOBS}/{NAME}", reply(503, STATUS_FAILURE), nth=None)
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 1, r
    lines = r.err.strip().splitlines()
    assert "rollback incomplete: 1 object(s) left in the cluster" in lines[0]
    assert lines[1].startswith(f"  left: Job/{NAME} (deleting it failed: ")
    assert lines[1].endswith(f"; remove it with: kubectl delete job.batch {NAME} -n team-a")
    assert lines[2] == f"  hint: remove them with: gpuctl jobs delete {NAME} -n team-a --yes"
    assert left_in(cluster) == [NAME]  # the Service was removed, the Job is really left
    # the command it gives removes what is left, once the cluster answers again
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "direct", kube.url))
    r = cli(*lines[2].split("remove them with: ")[1].split()[1:])
    assert r.code == 0 and f"deleted Job/{NAME}" in r.err, r
    assert left_in(cluster) == []


def test_an_unknown_outcome_that_cannot_be_checked_is_reported_as_possibly_left(
    cli, cluster, proxied_kube
):
    proxied_kube.on("POST", JOBS, drop_answer())
    proxied_kube.on("GET", f"{JOBS}/{NAME}", drop_answer(), nth=None)  # reading back fails too
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 1
    assert f"  left: Job/{NAME} (may exist; checking failed:" in r.err
    assert "gpuctl jobs delete llama-pretrain -n team-a --yes" in r.err
    assert "were removed" not in r.err


def test_an_object_of_the_same_name_that_is_not_ours_is_never_removed(cli, cluster, proxied_kube):
    """The Job create conflicts with someone else's Job: rollback takes back only the
    Service this submit made, and the hint does not offer to delete their Job."""
    core, batch = cluster
    batch.create_namespaced_job(
        "team-a",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": NAME},
            "spec": {
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
                }
            },
        },
    )
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 1 and f"a Job named '{NAME}' already exists" in r.err
    assert "it is not gpuctl's" in r.err and "kubectl delete job" in r.err
    assert batch.read_namespaced_job(NAME, "team-a").spec.template.spec.containers[0].image == "x"
    assert core.list_namespaced_service("team-a").items == []


def test_jobs_delete_removes_a_lone_headless_service_left_by_an_earlier_failure(cli, cluster, kube):
    core, batch = cluster
    labels = {"app.kubernetes.io/managed-by": "gpuctl", "gpuctl.io/job": NAME}
    core.create_namespaced_service(
        "team-a",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME, "labels": labels},
            "spec": {"clusterIP": "None", "selector": {"gpuctl.io/job": NAME}},
        },
    )
    # someone else's Service carrying the job label but not managed by gpuctl stays
    core.create_namespaced_service(
        "team-a",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "other", "labels": {"gpuctl.io/job": NAME}},
            "spec": {"clusterIP": "None"},
        },
    )
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 1 and f"gpuctl jobs delete {NAME} -n team-a" in r.err  # the hint …
    r = cli("jobs", "delete", NAME, "-n", "team-a", "--yes")  # … works
    assert r.code == 0 and f"deleted Service/{NAME} in namespace team-a" in r.err, r
    assert [s.metadata.name for s in core.list_namespaced_service("team-a").items] == ["other"]
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 0, r
    r = cli("jobs", "delete", NAME, "-n", "team-a", "--yes")
    assert r.code == 0 and f"deleted Job/{NAME}, Service/{NAME}" in r.err
    assert left_in(cluster) == ["other"]


def test_a_delete_that_fails_midway_says_what_was_deleted_and_what_is_left(
    cli, cluster, proxied_kube
):
    assert cli("submit", os.path.join(EX, "multinode-train.yaml")).code == 0
    proxied_kube.on("DELETE", f"{SERVICES}/{NAME}", reply(503, STATUS_FAILURE))
    r = cli("jobs", "delete", NAME, "-n", "team-a", "--yes")
    assert r.code == 1, r
    assert f"; deleted Job/{NAME}; left in namespace team-a: Service/{NAME}" in r.err
    assert f"hint: run it again: gpuctl jobs delete {NAME} -n team-a" in r.err
    assert "rollback" not in r.err


def test_a_label_gpuctl_or_the_job_controller_sets_is_refused_before_anything_is_sent(
    cli, cluster, kube, tmp_path
):
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "apiVersion: gpuctl/v1\nname: hidden\nimage: x\ngpus: 1\nlabels: {job-name: x}\n"
    )
    before = len(kube.requests())
    r = cli("submit", str(spec))
    assert r.code == 2
    assert f"{spec}:5: labels: 'job-name' is set by the Kubernetes Job controller" in r.err
    assert len(kube.requests()) == before


# ---- Ctrl-C: a real SIGINT to a gpuctl process ----------------------------------------


def gpuctl_process(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return children.start(
        [sys.executable, "-m", "gpuctl", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ctrl_c_while_the_job_is_being_created_rolls_everything_back(cluster, proxied_kube):
    # the Job is made upstream, its answer held: SIGINT lands while the create is in flight
    rule = proxied_kube.on("POST", JOBS, delay(3))
    proc = gpuctl_process("submit", os.path.join(EX, "multinode-train.yaml"))
    code, out, err = children.interrupt_when(proc, rule.fired)
    assert code == 130, err
    assert err.count("\n") == 1 and err.startswith("gpuctl: interrupted; "), err
    assert f"removed: Job/{NAME}, Service/{NAME}" in err
    assert wait_until(lambda: left_in(cluster) == [], 10), left_in(cluster)


def test_ctrl_c_before_anything_is_created_changes_nothing(cluster, proxied_kube, kube):
    rule = proxied_kube.on("GET", "/api/v1/nodes", delay(30))  # the fit check hangs
    seeded = len(kube.requests())
    proc = gpuctl_process("submit", os.path.join(EX, "multinode-train.yaml"))
    code, out, err = children.interrupt_when(proc, rule.fired)
    assert (code, err) == (130, "gpuctl: interrupted\n")
    sent = [(str(q[0]).rsplit(".", 1)[-1], q[1]) for q in kube.requests()[seeded:]]
    # reads only: API discovery (is there JobSet? Kueue?), then the node list
    assert sent == [("GET", "/apis/"), ("GET", "/api/v1/nodes")]


def test_ctrl_c_while_a_command_waits_for_the_cluster_is_one_line(cluster, proxied_kube):
    rule = proxied_kube.on("GET", r"/apis/batch/v1/namespaces/default/jobs", delay(30))
    proc = gpuctl_process("jobs", "list")
    assert children.interrupt_when(proc, rule.fired) == (130, "", "gpuctl: interrupted\n")


@pytest.mark.integration
def test_a_request_that_times_out_ends_the_process_with_its_exit_code(tmp_path):
    """An API server that accepts the connection and never answers: the request's thread is
    still waiting when gpuctl exits, and its socket times out while the interpreter shuts
    down. The process must end with exit 1 and one error, not be aborted by that thread
    waking then (SIGABRT, exit 134)."""
    with socket.create_server(("127.0.0.1", 0)) as black_hole:
        url = f"http://127.0.0.1:{black_hole.getsockname()[1]}"
        env = {"KUBECONFIG": write_kubeconfig(tmp_path / "kubeconfig", url)}
        proc = gpuctl_process("jobs", "list", env_extra={**env, "GPUCTL_REQUEST_TIMEOUT": "1"})
        out, err = children.finish(proc, 60)
    assert proc.returncode == 1, err
    assert "timed out" in err and "Fatal Python error" not in err
    assert len(err.strip().splitlines()) == 2, err  # the error and its hint


def test_ctrl_c_while_following_a_submitted_job_leaves_it_running(cluster, proxied_kube, tmp_path):
    """The job was created: Ctrl-C during --wait stops the watching, not the job."""
    core, batch = cluster
    spec = tmp_path / "job.yaml"
    spec.write_text("apiVersion: gpuctl/v1\nname: long\nimage: x\ngpus: 1\ngpu_type: h100\n")
    # the watch of the Job: held, unanswered
    rule = proxied_kube.on(
        "GET", r"/apis/batch/v1/namespaces/default/jobs", delay(30, forward=False)
    )
    proc = gpuctl_process("submit", str(spec), "--wait")
    code, out, err = children.interrupt_when(proc, rule.fired)
    assert code == 130, err
    assert err.splitlines()[-2:] == [
        "gpuctl: interrupted; Job default/long keeps running",
        "  hint: gpuctl jobs delete long -n default stops it",
    ]
    assert batch.read_namespaced_job("long", "default").metadata.name == "long"


@pytest.mark.parametrize(
    "body, says",
    [
        (STATUS_FAILURE, "the API server answered with a failure: etcdserver: request timed out"),
        ('{"kind": "JobList", "items": [1, 2]}', "gave an answer that is not a Kubernetes list"),
        ('{"items": "none"}', "gave an answer that is not a Kubernetes list"),
        ("[" * 100_000 + "]" * 100_000, "did not answer with JSON"),
    ],
    ids=["200-with-status", "items-not-objects", "items-not-a-list", "deeply-nested"],
)
def test_a_200_answer_that_is_no_list_is_one_error_line(cli, cluster, proxied_kube, body, says):
    proxied_kube.on("GET", r"/apis/batch/v1/namespaces/default/jobs", reply(200, body))
    r = cli("jobs", "list")
    assert r.code == 1 and "Traceback" not in r.err, r
    assert r.err.splitlines()[0].startswith("gpuctl: error: listing jobs in namespace default: ")
    assert says in r.err and len(r.err.splitlines()) <= 2


def test_a_job_another_client_made_behind_a_lost_answer_is_never_removed(
    cli, cluster, proxied_kube
):
    """Another client creates the same Job while gpuctl's create goes unanswered: the read-back
    finds a Job without this attempt's token; only the Service this submit made is removed."""
    core, batch = cluster
    rule = proxied_kube.on(
        "POST", JOBS, race_creator(lambda obj: batch.create_namespaced_job("team-a", obj))
    )
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert rule.fired.is_set() and r.code == 1, r
    assert f"were removed: Service/{NAME}" in r.err and f"Job/{NAME}," not in r.err, r.err
    assert left_in(cluster) == [NAME]  # their Job
