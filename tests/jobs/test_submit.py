"""submit / jobs against the Kubernetes API emulator, over HTTP, through the official client."""

import os
import threading
import time

import pytest

from tests import ROOT
from tests.gpu_cluster import mark, writes

EX = os.path.join(ROOT, "examples")


def add_node(core, name, gpus=8, gpu_type="a100", extra=None, taints=None):
    alloc = {"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": str(gpus), **(extra or {})}
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpu-type": gpu_type} if gpu_type else {}},
        "spec": {"taints": taints} if taints else {},
        "status": {"allocatable": alloc, "capacity": alloc},
    }
    core.create_node(body)


def add_pod(
    core, name, node, gpus, namespace="default", phase="Running", resource="nvidia.com/gpu"
):
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "nodeName": node,
                "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {resource: str(gpus)}}}
                ],
            },
            "status": {"phase": phase},
        },
    )


@pytest.fixture
def api(kube_api):
    from kubernetes import client

    return client.CoreV1Api(kube_api), client.BatchV1Api(kube_api)


def write(tmp_path, text, name="job.yaml"):
    p = tmp_path / name
    p.write_text("apiVersion: gpuctl/v1\n" + text)
    return str(p)


def test_submit_creates_pod_with_the_rendered_spec(cli, api, kube):
    core, _ = api
    add_node(core, "gpu-a", 8, "a100")
    r = cli("submit", os.path.join(EX, "seed-pod.yaml"))
    assert r.code == 0, r
    pod = core.read_namespaced_pod("gpu-pod", "default")
    assert pod.spec.containers[0].resources.limits == {"nvidia.com/gpu": "2"}
    assert pod.metadata.labels["app.kubernetes.io/managed-by"] == "gpuctl"
    assert "Pod/gpu-pod created in namespace default" in r.err


def test_submit_refuses_a_job_that_can_never_fit_and_sends_nothing(cli, api, kube, tmp_path):
    core, batch = api
    add_node(core, "gpu-a", 8, "a100")
    add_node(core, "gpu-h", 4, "h100")
    add_node(
        core, "cpu-only", gpu_type=None, gpus=0
    )  # no nvidia.com/gpu → not listed? still GPU key 0
    since = mark(kube)
    r = cli("submit", write(tmp_path, "name: big\nimage: x\ngpus: 8\ngpu_type: h100\n"))
    assert r.code == 1
    assert "can never fit" in r.err
    assert "not H100-80GB" in r.err  # the per-node table says why
    assert "4 nvidia.com/gpu, a worker needs 8" in r.err
    assert batch.list_namespaced_job("default").items == []
    assert writes(kube, since) == []


def test_submit_refuses_unknown_mig_resource_on_cluster(cli, api, tmp_path):
    core, batch = api
    add_node(core, "gpu-a", 8, "a100", extra={"nvidia.com/mig-1g.10gb": "7"})
    r = cli("submit", write(tmp_path, "name: m\nimage: x\nmig: 3g.40gb\n"))
    assert r.code == 1 and "no nvidia.com/mig-3g.40gb" in r.err
    r = cli("submit", write(tmp_path, "name: m\nimage: x\nmig: 1g.10gb\n"))
    assert r.code == 0, r
    job = batch.read_namespaced_job("m", "default")
    assert job.spec.template.spec.containers[0].resources.limits == {"nvidia.com/mig-1g.10gb": "1"}


def test_submit_queues_when_busy_now(cli, api, tmp_path):
    core, batch = api
    add_node(core, "gpu-a", 8, "a100")
    add_pod(core, "hog", "gpu-a", 6)
    add_pod(core, "finished", "gpu-a", 8, phase="Succeeded")  # done pods hold nothing
    r = cli("submit", write(tmp_path, "name: q\nimage: x\ngpus: 4\n"))
    assert r.code == 0, r
    assert "No room right now: q waits (1 × 4 nvidia.com/gpu are not free right now)" in r.err
    assert "2 of 8 free" in r.err
    assert batch.read_namespaced_job("q", "default").metadata.name == "q"


def test_taints_without_toleration_make_a_node_unusable(cli, api, tmp_path):
    core, _ = api
    add_node(
        core,
        "gpu-a",
        8,
        "a100",
        taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}],
    )
    r = cli("submit", write(tmp_path, "name: t\nimage: x\ngpus: 1\n"))
    assert r.code == 1 and "taint dedicated=infer:NoSchedule not tolerated" in r.err
    r = cli(
        "submit",
        write(
            tmp_path,
            "name: t\nimage: x\ngpus: 1\ntolerations: "
            "[{key: dedicated, operator: Equal, value: infer}]\n",
        ),
    )
    assert r.code == 0, r


def test_multinode_job_creates_service_and_indexed_job(cli, api, tmp_path):
    core, batch = api
    add_node(core, "n1", 8, "h100")
    add_node(core, "n2", 8, "h200")
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 0, r
    svc = core.read_namespaced_service("llama-pretrain", "team-a")
    job = batch.read_namespaced_job("llama-pretrain", "team-a")
    assert svc.spec.cluster_ip == "None"
    assert job.spec.completion_mode == "Indexed" and job.spec.completions == 2


def test_multinode_needs_enough_nodes(cli, api, tmp_path):
    core, _ = api
    add_node(core, "n1", 8, "h100")
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 1
    assert (
        "needs 2 × 8 nvidia.com/gpu; nodes with H100-80GB or H200 have room for 1 worker" in r.err
    )


def test_duplicate_name_is_a_clear_error_and_changes_nothing(cli, api, tmp_path):
    core, batch = api
    add_node(core, "gpu-a", 8, "a100")
    spec = write(tmp_path, "name: dup\nimage: x\ngpus: 1\nlabels: {v: one}\n")
    assert cli("submit", spec).code == 0
    spec2 = write(tmp_path, "name: dup\nimage: y\ngpus: 1\nlabels: {v: two}\n", "b.yaml")
    r = cli("submit", spec2)
    assert r.code == 1 and "already exists" in r.err and "nothing was changed" in r.err
    assert batch.read_namespaced_job("dup", "default").metadata.labels["v"] == "one"


def test_half_made_multinode_job_is_rolled_back(cli, api, tmp_path):
    """The Service is created, then the Job fails (a Job of that name exists but no Service):
    the Service made by this submit must be removed again."""
    core, batch = api
    add_node(core, "n1", 8, "h100")
    add_node(core, "n2", 8, "h100")
    batch.create_namespaced_job(
        "team-a",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "llama-pretrain"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "other"}],
                    }
                }
            },
        },
    )
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 1 and "a Job named 'llama-pretrain' already exists" in r.err
    assert core.list_namespaced_service("team-a").items == []
    assert (
        batch.read_namespaced_job("llama-pretrain", "team-a").spec.template.spec.containers[0].image
        == "other"
    )


def test_dry_run_client_creates_nothing(cli, api, kube, tmp_path):
    core, batch = api
    add_node(core, "gpu-a", 8, "a100")
    since = mark(kube)
    r = cli("submit", os.path.join(EX, "seed-pod.yaml"), "--dry-run", "-n", "ml")
    assert r.code == 0 and "dry run" in r.err and "namespace: ml" in r.out
    assert writes(kube, since) == []


def set_job_status(batch, name, ns, status, delay):
    def run():
        time.sleep(delay)
        batch.patch_namespaced_job_status(name, ns, {"status": status})

    t = threading.Thread(target=run)
    t.start()
    return t


@pytest.mark.parametrize("condition, code", [("Complete", 0), ("Failed", 1)])
def test_wait_follows_status_to_the_end(cli, api, tmp_path, condition, code):
    core, batch = api
    add_node(core, "gpu-a", 8, "a100")
    t = set_job_status(
        batch,
        "w",
        "default",
        {
            "active": 0,
            "succeeded": int(code == 0),
            "failed": int(code == 1),
            "conditions": [{"type": condition, "status": "True"}],
        },
        0.8,
    )
    r = cli("submit", write(tmp_path, "name: w\nimage: x\ngpus: 1\n"), "--wait", "--timeout", "20")
    t.join()
    assert r.code == code, r
    if code:
        assert "job default/w failed" in r.err.lower()
    # one plain line per status change: no repeats, no log timestamps or source paths
    lines = [ln for ln in r.err.splitlines() if ln.startswith("Job w: ")]
    assert lines[0] == "Job w: Pending — 0 running, 0/1 succeeded, 0 failed", r.err
    assert lines[-1].startswith("Job w: Succeeded" if code == 0 else "Job w: Failed"), r.err
    assert len(lines) == len(set(lines)) and "jobs.py" not in r.err, r.err


def test_wait_gives_up_after_timeout(cli, api, tmp_path):
    core, _ = api
    add_node(core, "gpu-a", 8, "a100")
    r = cli(
        "submit", write(tmp_path, "name: slow\nimage: x\ngpus: 1\n"), "--wait", "--timeout", "1"
    )
    assert r.code == 1 and "gave up waiting" in r.err


def test_jobs_list_get_delete_touch_only_managed_objects(cli, api, kube, tmp_path):
    import json

    core, batch = api
    add_node(core, "n1", 8, "h100")
    add_node(core, "n2", 8, "h100")
    add_node(core, "n3", 8, "a100")
    assert cli("submit", os.path.join(EX, "multinode-train.yaml")).code == 0
    assert cli("submit", os.path.join(EX, "seed-pod.yaml"), "-n", "team-a").code == 0
    add_pod(core, "not-ours", "n1", 1, namespace="team-a")
    r = cli("jobs", "list", "-n", "team-a", "-o", "json")
    assert r.code == 0, r
    rows = json.loads(r.out)["jobs"]
    assert [(x["name"], x["kind"], x["workers"]) for x in rows] == [
        ("gpu-pod", "Pod", 1),
        ("llama-pretrain", "Job", 2),
    ]
    # numbers and resources as fields of their own (the table writes "8 × nvidia.com/gpu")
    assert (rows[1]["gpus_per_worker"], rows[1]["gpu_resource"]) == (8, "nvidia.com/gpu")
    assert rows[1]["image"] and rows[1]["created"] and rows[1]["queue"] is None
    # the selector was sent to the server (the emulator ignores it; the client filters again)
    assert any(
        q[2].get("labelSelector") == "app.kubernetes.io/managed-by=gpuctl"
        for q in kube.requests()
        if q[1].endswith("/jobs")
    )
    r = cli("jobs", "get", "llama-pretrain", "-n", "team-a")
    assert r.code == 0 and "Pending" in r.out
    r = cli("jobs", "get", "not-ours", "-n", "team-a")
    assert r.code == 1 and "not managed by gpuctl" in r.err
    r = cli("jobs", "delete", "llama-pretrain", "-n", "team-a", "--yes")
    assert r.code == 0 and "Service/llama-pretrain" in r.err
    assert core.list_namespaced_service("team-a").items == []
    assert [j.metadata.name for j in batch.list_namespaced_job("team-a").items] == []
    r = cli("jobs", "delete", "gpu-pod", "-n", "team-a")  # no tty, no --yes
    assert r.code == 3 and core.read_namespaced_pod("gpu-pod", "team-a")
    r = cli("jobs", "get", "nope", "-n", "team-a")
    assert r.code == 1 and "no gpuctl job 'nope'" in r.err


def test_jobs_list_selects_by_label_and_shows_more_with_wide(cli, api, kube, tmp_path):
    import json

    add_node(api[0], "n1", 8, "h100")
    for name, team in (("a", "vision"), ("b", "nlp"), ("c", "vision")):
        spec = f"name: {name}\nimage: img-{name}\ngpus: 1\nlabels: {{team: {team}}}\n"
        assert cli("submit", write(tmp_path, spec)).code == 0
    r = cli("jobs", "list", "-l", "team=vision", "-o", "json")
    assert r.code == 0, r
    assert [row["name"] for row in json.loads(r.out)["jobs"]] == ["a", "c"]
    # sent to the server with gpuctl's own (the emulator ignores it; the client filters again)
    sent = [q[2].get("labelSelector") for q in kube.requests() if q[1].endswith("/jobs")]
    assert sent[-1] == "app.kubernetes.io/managed-by=gpuctl,team=vision"
    r = cli("jobs", "list", "-l", "team notin (vision),team", "-o", "wide")
    assert r.code == 0, r
    header, *lines = r.out.splitlines()
    assert header.split() == [
        "NAMESPACE", "NAME", "KIND", "WORKERS", "GPUS/WORKER", "STATUS", "ACTIVE",
        "SUCCEEDED", "FAILED", "RESTARTS", "QUEUE", "IMAGE", "AGE",
    ]  # fmt: skip
    assert len(lines) == 1 and " b " in lines[0] and "img-b" in lines[0], r.out
    assert "1 × nvidia.com/gpu" in lines[0] and lines[0].split()[-1].endswith("s")
    before = len(kube.requests())
    r = cli("jobs", "list", "-l", "team in (a")
    assert r.code == 2 and "bad label selector term" in r.err
    assert len(kube.requests()) == before  # refused before any request


def test_forbidden_and_server_errors_are_one_line(cli, api, kube, tmp_path):
    add_node(api[0], "gpu-a", 8, "a100")
    kube.call(lambda: kube.emulator["post /api/v1/namespaces/default/pods"] << 403)
    r = cli("submit", os.path.join(EX, "seed-pod.yaml"))
    assert r.code == 1 and "not allowed by the cluster (HTTP 403" in r.err
    assert "Traceback" not in r.err


def test_without_rights_to_list_nodes_submit_skips_the_fit_check(cli, api, kube):
    """Users with RBAC for their namespace only cannot list nodes or all pods."""
    core, _ = api
    kube.call(lambda: kube.emulator["get /api/v1/nodes"] << 403)
    r = cli("submit", os.path.join(EX, "seed-pod.yaml"))
    assert r.code == 0, r
    assert "warning: no fit check: listing nodes: not allowed by the cluster (HTTP 403" in r.err
    assert core.read_namespaced_pod("gpu-pod", "default").metadata.name == "gpu-pod"


@pytest.mark.integration  # takes a free port to find nothing listening there
def test_unreachable_cluster_and_missing_kubeconfig(cli, tmp_path, monkeypatch):
    import socket

    from tests.standins.kube import write_kubeconfig

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{port}"))
    r = cli("jobs", "list")
    assert r.code == 1 and "cannot reach the Kubernetes API" in r.err
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    r = cli("jobs", "list")
    assert r.code == 1 and "no usable Kubernetes configuration" in r.err
    r = cli("jobs", "list", "--context", "nope")
    assert r.code == 1
    for broken in ("clusters: [\n", "contexts: 5\n", "a: \x01\n"):
        (tmp_path / "broken").write_text(broken)
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "broken"))
        r = cli("jobs", "list")
        assert r.code == 1 and "no usable Kubernetes configuration" in r.err, r


def test_server_error_is_one_line(cli, kube):
    kube.call(lambda: kube.emulator["get /apis/batch/v1/namespaces/default/jobs"] << 503)
    r = cli("jobs", "list")
    assert r.code == 1 and "the API server failed (HTTP 503" in r.err
    assert "Traceback" not in r.err


def test_logs_of_a_bare_pod(cli, api, kube):
    """The emulator has no pod logs: the test gives the log endpoint a canned body."""
    core, _ = api
    add_node(core, "gpu-a", 8, "a100")
    assert cli("submit", os.path.join(EX, "seed-pod.yaml")).code == 0
    kube.call(
        lambda: (
            kube.emulator["get /api/v1/namespaces/default/pods/gpu-pod/log"]
            << b"epoch 1 loss 0.9\nepoch 2 loss 0.5\n"
        )
    )
    r = cli("jobs", "logs", "gpu-pod")
    assert r.code == 0, r
    assert r.out == "epoch 1 loss 0.9\nepoch 2 loss 0.5\n"


@pytest.mark.parametrize(
    "args", [("-n", "Team_A"), ("-n", "team-a\n"), ("--timeout", "nan"), ("--timeout", "0")]
)
def test_bad_options_are_refused_before_anything_is_sent(cli, kube, args):
    r = cli("submit", os.path.join(EX, "seed-pod.yaml"), "--wait", *args)
    assert r.code == 2 and "Traceback" not in r.err, r
    assert kube.requests() == []


def test_jobs_commands_check_the_namespace_option(cli, kube):
    for args in (("list",), ("get", "x"), ("logs", "x"), ("delete", "x", "--yes")):
        r = cli("jobs", *args, "-n", "Bad_NS")
        assert r.code == 2 and "not a valid namespace name" in r.err, r
    assert kube.requests() == []


def test_follow_waits_for_the_first_worker_then_streams_its_log(cli, api, kube, tmp_path):
    """Right after submit a Job has no pod (then a Pending one) and no log: --follow waits.
    The emulator runs no pods: the test plays the Job controller and the kubelet."""
    core, _ = api
    add_node(core, "gpu-a", 8, "a100")
    kube.call(
        lambda: (
            kube.emulator["get /api/v1/namespaces/default/pods/f-0-x7k2p/log"]
            << b"step 1\nstep 2\n"
        )
    )

    def controller():
        time.sleep(1)
        core.create_namespaced_pod(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "f-0-x7k2p", "labels": {"gpuctl.io/job": "f"}},
                "spec": {"containers": [{"name": "main", "image": "x"}]},
                "status": {"phase": "Pending"},
            },
        )
        time.sleep(1.5)
        core.patch_namespaced_pod_status("f-0-x7k2p", "default", {"status": {"phase": "Running"}})

    t = threading.Thread(target=controller)
    t.start()
    r = cli(
        "submit", write(tmp_path, "name: f\nimage: x\ngpus: 1\n"), "--follow", "--timeout", "20"
    )
    t.join()
    assert r.code == 0, r
    assert r.out == "step 1\nstep 2\n"
    log_reads = [q for q in kube.requests() if q[1].endswith("/log")]
    assert len(log_reads) == 1  # asked once, when the pod ran


def test_follow_gives_up_when_the_first_worker_never_starts(cli, api, tmp_path):
    core, _ = api
    add_node(core, "gpu-a", 8, "a100")
    r = cli(
        "submit",
        write(tmp_path, "name: p\nkind: Pod\nimage: x\ngpus: 1\n"),
        "--follow",
        "--timeout",
        "1",
    )
    assert r.code == 1 and "pod p has not started after 1 s" in r.err, r


def test_a_jobs_own_pods_are_not_listed_as_jobs(cli, api, tmp_path):
    import json

    core, _ = api
    add_node(core, "gpu-a", 8, "a100")
    assert cli("submit", write(tmp_path, "name: w\nimage: x\ngpus: 1\n")).code == 0
    core.create_namespaced_pod(
        "default",
        {  # what the Job controller would make
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "w-abc12",
                "labels": {
                    "app.kubernetes.io/managed-by": "gpuctl",
                    "gpuctl.io/job": "w",
                    "job-name": "w",
                },
            },
            "spec": {"containers": [{"name": "main", "image": "x"}]},
        },
    )
    rows = json.loads(cli("jobs", "list", "-o", "json").out)["jobs"]
    assert [(r["name"], r["kind"]) for r in rows] == [("w", "Job")]


def test_wait_stops_when_the_job_is_deleted(cli, api, tmp_path):
    core, batch = api
    add_node(core, "gpu-a", 8, "a100")

    def delete():
        time.sleep(1)
        batch.delete_namespaced_job("gone", "default")

    t = threading.Thread(target=delete)
    t.start()
    r = cli(
        "submit", write(tmp_path, "name: gone\nimage: x\ngpus: 1\n"), "--wait", "--timeout", "20"
    )
    t.join()
    assert r.code == 1 and "was deleted while waiting" in r.err, r


def test_a_server_that_is_not_kubernetes_is_one_line(cli, kube):
    kube.call(lambda: kube.emulator["get /api/v1/nodes"] << b"<html>Sign in</html>")
    r = cli("submit", os.path.join(EX, "seed-pod.yaml"))
    assert r.code == 1 and "did not answer with JSON" in r.err, r


def test_a_job_the_server_rejects_takes_its_service_back(cli, api, kube):
    core, batch = api
    add_node(core, "n1", 8, "h100")
    add_node(core, "n2", 8, "h100")
    kube.call(lambda: kube.emulator["post /apis/batch/v1/namespaces/team-a/jobs"] << 500)
    r = cli("submit", os.path.join(EX, "multinode-train.yaml"))
    assert r.code == 1 and "objects created before the failure were removed" in r.err, r
    assert core.list_namespaced_service("team-a").items == []


def test_logs_list_workers_by_completion_index(cli, api, kube):
    core, batch = api
    labels = {"app.kubernetes.io/managed-by": "gpuctl", "gpuctl.io/job": "t"}
    batch.create_namespaced_job(
        "default",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "t", "labels": labels},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "x"}],
                    }
                }
            },
        },
    )
    for index, suffix in ((10, "a"), (2, "b"), (0, "c")):
        pod = f"t-{index}-{suffix}"
        core.create_namespaced_pod(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod,
                    "labels": labels,
                    "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                },
                "spec": {"containers": [{"name": "main", "image": "x"}]},
            },
        )
        kube.call(
            lambda p=pod, i=index: (
                kube.emulator[f"get /api/v1/namespaces/default/pods/{p}/log"]
                << f"rank {i}\n".encode()
            )
        )
    r = cli("jobs", "logs", "t")
    assert r.code == 0, r
    assert r.out == "[t-0-c] rank 0\n[t-2-b] rank 2\n[t-10-a] rank 10\n"


def test_tls_failure_is_named(cli, kube, monkeypatch, tmp_path):
    from tests.standins.kube import write_kubeconfig

    https = kube.url.replace("http://", "https://")  # the emulator speaks plain HTTP
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kc", https))
    r = cli("jobs", "list")
    assert r.code == 1 and "the TLS handshake failed" in r.err, r
    assert "https or http" in r.err


def test_the_namespace_setting_is_where_jobs_go_without_n(cli, api, kube, tmp_path, monkeypatch):
    core, _ = api
    add_node(core, "gpu-a", 8, "a100")
    cfg = tmp_path / "config.yaml"
    cfg.write_text("namespace: team-file\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(cfg))
    spec = write(tmp_path, "name: t\nimage: x\ngpu_type: a100\n")
    since = mark(kube)
    assert cli("submit", spec).code == 0
    assert cli("submit", spec, "-n", "team-option").code == 0  # -n over the setting
    monkeypatch.setenv("GPUCTL_NAMESPACE", "team-env")  # the environment over the file
    assert cli("submit", spec).code == 0
    with_ns = write(tmp_path, "name: t\nimage: x\nnamespace: team-spec\n", "ns.yaml")
    assert cli("submit", with_ns).code == 0  # a spec's namespace over the setting
    assert [p for m, p in writes(kube, since) if m == "POST"] == [
        f"/apis/batch/v1/namespaces/{ns}/jobs"
        for ns in ("team-file", "team-option", "team-env", "team-spec")
    ]
    since = len(kube.requests())
    assert cli("jobs", "list", "-o", "json").code == 0  # the default namespace here too
    assert {q[1] for q in kube.requests()[since:] if q[1].endswith("/jobs")} == {
        "/apis/batch/v1/namespaces/team-env/jobs"
    }


@pytest.mark.parametrize(
    "extra, says",
    [
        ("extra_resources: {vpc.amazonaws.com/efa: 32}\n", "no vpc.amazonaws.com/efa"),
        ("extra_resources: {vpc.amazonaws.com/efa: 32}\n", "+ 32 vpc.amazonaws.com/efa"),
        ("memory: 8Gi\nextra_resources: {hugepages-1Gi: 64Gi}\n", "hugepages-1Gi, a worker needs"),
        ("node_selector: {topology.kubernetes.io/zone: us-east-1a}\n", "node_selector"),
    ],
    ids=["efa", "efa-in-the-reason", "hugepages", "node-selector"],
)
def test_submit_refuses_a_job_whose_other_resources_no_node_offers(
    cli, api, kube, tmp_path, extra, says
):
    """GPUs are there; what else a worker needs (EFA devices, huge pages) or the nodes it
    selects are not: refused before anything is sent, as a GPU shortfall is."""
    core, batch = api
    add_node(core, "gpu-h", 8, "h100", extra={"hugepages-1Gi": "16Gi"})
    since = mark(kube)
    r = cli("submit", write(tmp_path, "name: big\nimage: x\ngpus: 8\n" + extra))
    assert r.code == 1 and "can never fit" in r.err, r
    assert says in r.err
    assert batch.list_namespaced_job("default").items == [] and writes(kube, since) == []


def test_extra_resources_in_use_bound_the_workers_that_fit_now(cli, api, tmp_path):
    core, batch = api
    add_node(core, "p5-1", 8, "h100", extra={"vpc.amazonaws.com/efa": "32"})
    add_node(core, "p5-2", 8, "h100", extra={"vpc.amazonaws.com/efa": "32"})
    core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "efa-user"},
         "spec": {"nodeName": "p5-1", "containers": [{"name": "c", "image": "x", "resources": {
             "limits": {"vpc.amazonaws.com/efa": "32"}}}]},
         "status": {"phase": "Running"}},
    )  # fmt: skip
    spec = "name: two\nimage: x\ngpus: 8\nnodes: 2\nextra_resources: {vpc.amazonaws.com/efa: 32}\n"
    r = cli("submit", write(tmp_path, spec), "--dry-run")
    assert r.code == 0, r
    assert "0 of 32 vpc.amazonaws.com/efa free, a worker needs 32" in r.err + r.out
    r = cli("submit", write(tmp_path, spec.replace("nodes: 2", "nodes: 1")))
    assert r.code == 0, r
