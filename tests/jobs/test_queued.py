"""Jobs that Kueue admits: `submit` with a queue, multi-node jobs as JobSets, `jobs why`;
against the API emulator serving Kueue's and JobSet's CRDs (gpuctl/sim/crds/).

Neither Kueue's nor JobSet's controller runs here. Where a test needs what they would do
(a Workload and its status, a JobSet unsuspended or restarted), it writes it as they
would, in the CRDs' shapes (tests/kueue_workloads.py), and checks what gpuctl makes of it."""

import json
import re

import pytest

from tests.crd_schema import assert_valid_cr
from tests.gpu_cluster import mark, node, pod, seed, set_status, writes
from tests.kueue_workloads import admitted, condition, pending, workload_for

KEY = "nvidia.com/gpu.product"
FLAVOR = "nvidia-h100-80gb-hbm3"
JS = "/apis/jobset.x-k8s.io/v1alpha2"
PENDING = (
    "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/team-a/pendingworkloads"
)
TRAIN = """apiVersion: gpuctl/v1
name: llm
namespace: team-a
image: nvcr.io/nvidia/pytorch:24.05-py3
command: [torchrun, train.py]
nodes: 2
gpus: 8
retries: 2
"""


@pytest.fixture
def custom(kube_api):
    from kubernetes import client

    return client.CustomObjectsApi(kube_api)


@pytest.fixture
def cluster(kube, kube_api, cli):
    """Two 8-GPU H100 nodes, Kueue and JobSet, and two teams sharing a cohort."""
    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor", "Workload", "JobSet")
    seed(kube_api, node("gpu-1"), node("gpu-2"))
    for team in ("team-a", "team-b"):
        r = cli("quota", "set", team, "--gpus", "8", "--cohort", "ml", "--gpu-label-key", KEY)
        assert r.code == 0, r
    return kube


def job_file(tmp_path, text=TRAIN):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return str(path)


def submit(cli, tmp_path, *args, text=TRAIN):
    return cli("submit", job_file(tmp_path, text), "--gpu-label-key", KEY, *args)


def read_jobset(custom, name="llm"):
    return custom.get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", "team-a", "jobsets", name
    )


def test_a_multinode_job_is_admitted_and_restarted_as_one_unit(
    cli, cluster, kube_api, custom, tmp_path
):
    since = mark(cluster)
    r = submit(cli, tmp_path)
    assert r.code == 0, r
    assert "JobSet/llm created in namespace team-a" in r.err
    assert "queued in LocalQueue team-a" in r.err  # the namespace's only LocalQueue
    assert [w for w in writes(cluster, since)] == [("POST", f"{JS}/namespaces/team-a/jobsets")]
    js = read_jobset(custom)
    assert_valid_cr(js)
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert js["spec"]["suspend"] is True  # until Kueue admits all of it
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 2}  # retries: 2
    rows = json.loads(cli("jobs", "list", "-n", "team-a", "-o", "json").out)["jobs"]
    assert [(j["name"], j["kind"], j["status"], j["workers"]) for j in rows] == [
        ("llm", "JobSet", "Queued", 2)
    ]

    # Kueue: one Workload for the whole JobSet, one podSet of both workers
    wl = workload_for(js)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("workers", 2)]
    seed(kube_api, wl)
    set_status(kube_api, wl, admitted(wl, "team-a", FLAVOR, "nvidia.com/gpu"))
    # ... and, admitted, it unsuspends the JobSet (RunWithPodSetsInfo)
    custom.patch_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", "team-a", "jobsets", "llm", {"spec": {"suspend": False}}
    )
    r = cli("jobs", "why", "llm", "-n", "team-a")
    assert r.code == 0, r
    assert f"quota reserved in ClusterQueue team-a (flavors: nvidia.com/gpu → {FLAVOR})" in r.out
    assert "admitted: Kueue let its pods start" in r.out

    # JobSet: worker 1 failed, so every Job of the set was recreated (restart 1 of 2)
    js = read_jobset(custom)
    set_status(
        kube_api,
        js,
        {
            "restarts": 1,
            "restartsCountTowardsMax": 1,
            "replicatedJobsStatus": [
                {
                    "name": "workers",
                    "ready": 1,
                    "succeeded": 0,
                    "failed": 0,
                    "active": 1,
                    "suspended": 0,
                }
            ],
        },
    )
    got = json.loads(cli("jobs", "get", "llm", "-n", "team-a", "-o", "json").out)
    assert got["status"]["restarts"] == 1
    r = cli("jobs", "list", "-n", "team-a", "-o", "json")
    (row,) = json.loads(r.out)["jobs"]
    assert (row["status"], row["active"], row["restarts"]) == ("Running", 2, 1)
    # past maxRestarts, JobSet fails the whole set
    set_status(
        kube_api,
        js,
        {
            "restarts": 2,
            "terminalState": "Failed",
            "conditions": [
                condition(
                    "Failed",
                    "True",
                    "ReachedMaxRestarts",
                    "jobset failed due to reaching max number of restarts",
                )
            ],
        },
    )
    (row,) = json.loads(cli("jobs", "list", "-n", "team-a", "-o", "json").out)["jobs"]
    assert (row["status"], row["restarts"]) == ("Failed", 2)


def test_a_pending_job_explains_itself(cli, cluster, kube, kube_api, custom, tmp_path):
    # team-b holds its 8 GPUs on gpu-2, so the cohort has nothing to lend
    seed(kube_api, *(pod(f"b-{i}", "team-b", gpus=1, node_name="gpu-2") for i in range(8)))
    assert submit(cli, tmp_path, text=TRAIN.replace("gpus: 8", "gpus: 8\nqueue: team-a")).code == 0
    wl = workload_for(read_jobset(custom))
    seed(kube_api, wl)
    set_status(
        kube_api,
        wl,
        pending(
            "couldn't assign flavors to pod set workers: insufficient unused quota for "
            f"nvidia.com/gpu in flavor {FLAVOR}, 8 more needed"
        ),
    )
    summary = {
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "kind": "PendingWorkloadsSummary",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": "job-earlier-1a2b3", "namespace": "team-a"},
                "priority": 0,
                "localQueueName": "team-a",
                "positionInClusterQueue": 0,
                "positionInLocalQueue": 0,
            },
            {
                "metadata": {"name": wl["metadata"]["name"], "namespace": "team-a"},
                "priority": 0,
                "localQueueName": "team-a",
                "positionInClusterQueue": 1,
                "positionInLocalQueue": 1,
            },
        ],
    }
    kube.call(lambda: kube.emulator[f"get {PENDING}"] << summary)
    r = cli("jobs", "why", "llm", "-n", "team-a")
    assert r.code == 0, r
    lines = [x.strip() for x in r.out.splitlines()]
    assert lines[:6] == [
        "JobSet team-a/llm: Queued (suspended until Kueue admits it)",
        "queue: LocalQueue team-a → ClusterQueue team-a",
        f"Kueue Workload {wl['metadata']['name']}:",
        "waiting for quota in ClusterQueue team-a (Pending): couldn't assign flavors to pod set "
        f"workers: insufficient unused quota for nvidia.com/gpu in flavor {FLAVOR}, 8 more needed",
        "position: 1 workload(s) ahead in LocalQueue team-a, 1 ahead in its ClusterQueue",
        "Fit: 2 × 8 nvidia.com/gpu",
    ]
    cells = {
        row[0]: row
        for row in (re.split(r"\s{2,}", x.strip()) for x in r.out.splitlines())
        if row and row[0].startswith("gpu-")
    }
    assert cells["gpu-1"][1:] == ["H100-80GB", "8", "8", "1", "8 of 8 free"]
    assert cells["gpu-2"][1:] == [
        "H100-80GB",
        "8",
        "0",
        "0",
        "0 of 8 free, a worker needs 8",
    ]
    d = json.loads(cli("jobs", "why", "llm", "-n", "team-a", "-o", "json").out)
    assert (d["status"], d["queue"], d["cluster_queue"]) == ("Queued", "team-a", "team-a")
    assert [(n["name"], n["free"], n["slots_now"]) for n in d["fit"]["nodes"]] == [
        ("gpu-1", 8, 1),
        ("gpu-2", 0, 0),
    ]
    assert d["fit"]["fits_now"] is False and d["fit"]["can_ever_fit"] is True
    # the visibility API not answering leaves the position unknown, the rest stands
    kube.call(lambda: kube.emulator[f"get {PENDING}"].override << 503)
    r = cli("jobs", "why", "llm", "-n", "team-a")
    assert "position: unknown (Kueue's visibility API did not answer:" in r.out
    assert "waiting for quota in ClusterQueue team-a" in r.out


# pkg/scheduler/preemption/preemption.go preemptionMessage
PREEMPTED = (
    "Preempted to accommodate a workload (UID: 5d0c2a4e, JobUID: 9f1b7e3a) due to reclamation "
    "within the cohort; preemptor path: /ml/team-b; preemptee path: /ml/team-a"
)


def test_a_preempted_job_says_why(cli, cluster, kube_api, custom, tmp_path):
    assert submit(cli, tmp_path).code == 0
    wl = workload_for(read_jobset(custom))
    seed(kube_api, wl)
    status = {
        "conditions": [
            condition(
                "QuotaReserved",
                "False",
                "Pending",
                "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor x, 8 more needed",
            ),
            condition("Admitted", "False", "NoReservation", "The workload has no reservation"),
            condition(
                "Evicted",
                "True",
                "Preempted",
                PREEMPTED,
            ),
            condition(
                "Preempted",
                "True",
                "InCohortReclamation",
                PREEMPTED,
            ),
            condition("Requeued", "True", "BackoffFinished", "The workload backoff was finished"),
        ],
        "requeueState": {"count": 1},
    }
    set_status(kube_api, wl, status)
    r = cli("jobs", "why", "llm", "-n", "team-a")
    assert (
        "evicted: preempted so that a queue of the cohort could reclaim quota this one borrowed "
        "(Preempted): Preempted to accommodate a workload" in r.out
    ), r
    assert "requeued 1 time(s)" in r.out


def test_queue_must_exist_and_needs_kueue(cli, kube, kube_api, tmp_path):
    seed(kube_api, node("gpu-1"))
    one_node = TRAIN.replace("nodes: 2", "nodes: 1") + "queue: team-a\n"
    r = submit(cli, tmp_path, text=one_node)
    assert r.code == 1 and "asks for queue team-a, but this cluster has no Kueue" in r.err, r
    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor")
    since = mark(kube)
    r = submit(cli, tmp_path, text=one_node.replace("queue: team-a", "queue: gpu"))
    assert r.code == 1 and "no LocalQueue 'gpu' in namespace team-a; nothing was sent" in r.err, r
    assert writes(kube, since) == []


def test_with_several_local_queues_a_job_names_one(cli, cluster, kube_api, tmp_path, kube):
    seed(
        kube_api,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "batch", "namespace": "team-a"},
            "spec": {"clusterQueue": "team-a"},
        },
    )
    one_node = TRAIN.replace("nodes: 2", "nodes: 1")
    r = submit(cli, tmp_path, text=one_node)
    assert r.code == 0, r
    assert "has LocalQueues batch, team-a: name one with queue:" in r.err
    from kubernetes import client

    job = client.BatchV1Api(kube_api).read_namespaced_job("llm", "team-a")
    assert not job.spec.suspend and "kueue.x-k8s.io/queue-name" not in job.metadata.labels
    r = submit(cli, tmp_path, text=one_node.replace("name: llm", "name: llm2") + "queue: batch\n")
    assert r.code == 0, r
    job = client.BatchV1Api(kube_api).read_namespaced_job("llm2", "team-a")
    assert job.spec.suspend and job.metadata.labels["kueue.x-k8s.io/queue-name"] == "batch"


def test_jobset_is_the_default_only_where_the_cluster_has_it(cli, kube, kube_api, tmp_path):
    seed(kube_api, node("gpu-1"), node("gpu-2"))
    r = submit(cli, tmp_path, "--multinode", "jobset")
    assert r.code == 1 and "this cluster has no JobSet" in r.err, r
    r = submit(cli, tmp_path)
    assert r.code == 0 and "Service/llm, Job/llm created" in r.err, r
    kube.install_crds("JobSet")
    assert cli("jobs", "delete", "llm", "-n", "team-a", "--yes").code == 0
    r = submit(cli, tmp_path)
    assert r.code == 0 and "JobSet/llm created" in r.err, r
    r = submit(
        cli, tmp_path, "--multinode", "indexed-job", text=TRAIN.replace("name: llm", "name: ij")
    )
    assert r.code == 0 and "Service/ij, Job/ij created" in r.err, r
    since = mark(kube)
    r = cli("jobs", "delete", "llm", "-n", "team-a", "--yes")
    assert r.code == 0 and "deleted JobSet/llm in namespace team-a" in r.err, r
    assert writes(kube, since) == [("DELETE", f"{JS}/namespaces/team-a/jobsets/llm")]


def test_a_job_that_is_running_is_said_to_be(cli, kube, kube_api, tmp_path):
    seed(kube_api, node("gpu-1"))
    assert submit(cli, tmp_path, text=TRAIN.replace("nodes: 2", "nodes: 1")).code == 0
    from kubernetes import client

    client.BatchV1Api(kube_api).patch_namespaced_job_status(
        "llm", "team-a", {"status": {"active": 1}}
    )
    r = cli("jobs", "why", "llm", "-n", "team-a")
    assert r.code == 0 and r.out.strip() == "Job team-a/llm: Running", r
