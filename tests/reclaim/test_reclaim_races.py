"""`gpuctl reclaim --yes` against another client acting just before each of its writes (a
fault proxy in front of the API emulator lets the other client's change land first), and
the never marks read up the owner chain; `reclaim restore` refusing records that are no
replica count before any write. What gpuctl must not have changed is checked each time."""

from __future__ import annotations

import json
import signal

import pytest

from tests.clirun import gpuctl_process
from tests.reclaim.test_reclaim_cluster import run, snapshot
from tests.standins.faults import delay, meanwhile

pytestmark = pytest.mark.integration
STALLED = "/apis/batch/v1/namespaces/ml/jobs/stalled"
WORKLOAD = r"/apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads/.*"
EVICT_DEBUG = "/api/v1/namespaces/scratch/pods/debug/eviction"
RECORD = "gpuctl.io/reclaim"


def mark_job(kube_api, name, where="labels"):
    from kubernetes import client

    body = {"metadata": {where: {"gpuctl.io/reclaim": "never"}}}
    return lambda: client.BatchV1Api(kube_api).patch_namespaced_job(name, "ml", body)


def test_a_job_marked_never_just_before_its_suspension_is_left_alone(
    cli, prom, policy, kube_api, proxied_kube
):
    before = snapshot(kube_api)
    proxied_kube.on("PATCH", STALLED, meanwhile(mark_job(kube_api, "stalled")))
    r = run(cli, prom, policy)
    assert r.code == 1, r
    assert (
        "Job ml/stalled: marked gpuctl.io/reclaim: never (label) since the plan was made; "
        "not acted on" in r.err
    ), r.err
    stalled = snapshot(kube_api)[("Job", "ml", "stalled")]
    assert stalled["spec"] == before[("Job", "ml", "stalled")]["spec"]  # not suspended
    assert RECORD not in (stalled["metadata"].get("annotations") or {})


def test_a_kueue_workload_is_left_active_when_its_job_is_marked_just_before(
    cli, prom, policy, kube_api, proxied_kube
):
    """The mark lands just before gpuctl deactivates the Job's Workload: the Job's own write,
    held by the resourceVersion gpuctl checked, is refused, and the Workload is put back."""
    before = snapshot(kube_api)
    mark = mark_job(kube_api, "queued", "annotations")
    proxied_kube.on("PATCH", WORKLOAD, meanwhile(mark))
    r = run(cli, prom, policy)
    assert r.code == 1, r
    assert "Job ml/queued: marked gpuctl.io/reclaim: never (annotation)" in r.err, r.err
    assert "was reactivated" in r.err
    after = snapshot(kube_api)
    (wl,) = [v for k, v in after.items() if k[0] == "Workload"]
    assert wl["spec"].get("active") is not False
    assert RECORD not in (wl["metadata"].get("annotations") or {})
    queued = after[("Job", "ml", "queued")]
    assert queued["spec"] == before[("Job", "ml", "queued")]["spec"]
    assert queued["metadata"]["annotations"][RECORD] == "never"  # the mark, no record over it


def test_a_pod_replaced_under_the_same_name_just_before_its_eviction_stays(
    cli, prom, policy, kube_api, proxied_kube
):
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    old = core.read_namespaced_pod("debug", "scratch")

    def replace():  # its owner (a person) deletes it and starts it again under its name
        core.delete_namespaced_pod("debug", "scratch")
        new = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug"},
               "spec": core.api_client.sanitize_for_serialization(old.spec)}  # fmt: skip
        core.create_namespaced_pod("scratch", new)

    proxied_kube.on("POST", EVICT_DEBUG, meanwhile(replace))
    r = run(cli, prom, policy, "-o", "json")
    assert r.code == 1, r
    assert "Pod scratch/debug was replaced under the same name" in r.err, r.err
    now = core.read_namespaced_pod("debug", "scratch")
    assert now.metadata.uid != old.metadata.uid  # the new one was not evicted
    assert json.loads(r.out)["evicted"] == []


def test_marks_up_the_owner_chain_keep_a_workload(cli, prom, kube, kube_api, tmp_path):
    """A Deployment's pods whose ReplicaSet is marked, a CronJob's whose CronJob is: both
    exempt, whatever their GPUs say; the dry run says which owner."""
    from kubernetes import client

    apps, batch = client.AppsV1Api(kube_api), client.BatchV1Api(kube_api)
    create = {"ReplicaSet": apps.create_namespaced_replica_set,
              "Deployment": apps.create_namespaced_deployment,
              "Job": batch.create_namespaced_job, "CronJob": batch.create_namespaced_cron_job}  # fmt: skip
    kube.install_crds("Workload", "JobSet")
    template = {"spec": {"containers": [{"name": "c", "image": "x"}]}}
    chains = {  # pod -> its owners, nearest first: (kind, name, apiVersion, metadata)
        "web-7c5d-x2x9z": [("ReplicaSet", "web-7c5d", "apps/v1", {"labels": {"gpuctl.io/evict": "never"}}),
                           ("Deployment", "web", "apps/v1", {})],
        "nightly-28900-h5x2k": [("Job", "nightly-28900", "batch/v1", {}),
                                ("CronJob", "nightly", "batch/v1", {"annotations": {"gpuctl.io/reclaim": "never"}})],
    }  # fmt: skip
    for pod_name, owners in chains.items():
        for i, (kind, name, api, extra) in enumerate(owners):
            up = owners[i + 1] if i + 1 < len(owners) else None
            meta = {"name": name, "namespace": "ml", **extra}
            if up:
                meta["ownerReferences"] = [{"apiVersion": up[2], "kind": up[0], "name": up[1],
                                            "uid": f"uid-{up[1]}", "controller": True}]  # fmt: skip
            spec = {"jobTemplate": {"spec": {"template": template}}, "schedule": "0 * * * *"}
            if kind != "CronJob":
                spec = {"selector": {"matchLabels": {"a": "b"}}, "template": template}
            create[kind]("ml", {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec})
        kind, name, api, _ = owners[0]
        ref = {
            "apiVersion": api,
            "kind": kind,
            "name": name,
            "uid": f"uid-{name}",
            "controller": True,
        }
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": pod_name, "namespace": "ml", "ownerReferences": [ref]},
               "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "c", "image": "x",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
               "status": {"phase": "Running"}}  # fmt: skip
        client.CoreV1Api(kube_api).create_namespaced_pod("ml", pod)
    r = cli("reclaim", "--prometheus", prom.url, "-o", "json")
    assert r.code == 0, r
    found = {w["name"]: w for w in json.loads(r.out)["workloads"]}
    assert found["web"]["status"] == found["nightly"]["status"] == "exempt"
    assert "its ReplicaSet ml/web-7c5d is marked gpuctl.io/evict: never" in found["web"]["why"]
    assert "its CronJob ml/nightly is marked gpuctl.io/reclaim: never" in found["nightly"]["why"]


@pytest.mark.parametrize(
    ("forward", "fate", "evicted"),
    [(True, "it is gone", ["scratch/debug"]), (False, "it is still there", [])],
)
def test_ctrl_c_during_an_eviction_names_the_pod(
    prom, policy, kube_api, proxied_kube, forward, fate, evicted
):
    """Ctrl-C while the eviction's answer is held: made upstream or not, the message and
    the JSON name the pod and say what became of it."""
    rule = proxied_kube.on("POST", EVICT_DEBUG, delay(5, forward=forward))
    args = ("--policy", policy, "--prometheus", prom.url, "--yes", "-o", "json")
    proc = gpuctl_process("reclaim", *args)
    try:
        assert rule.fired.wait(60), "gpuctl never reached the eviction of scratch/debug"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert f"interrupted while evicting scratch/debug: {fate}" in err, err
    doc = json.loads(out)
    assert (doc["evicted"], doc["evicting"]) == (evicted, "scratch/debug")


@pytest.mark.parametrize("record", ["-3", "1000000000000", "abc", "2.5", ""])
def test_restore_refuses_a_record_that_is_no_replica_count_before_any_write(
    kube, kube_api, cli, record
):
    from kubernetes import client

    kube.install_crds("Workload", "JobSet")
    apps = client.AppsV1Api(kube_api)
    template = {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
    for name, count in (("good", "2"), ("bad", record)):  # the good one comes first
        dep = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "annotations": {"gpuctl.io/reclaim-replicas": count}},
               "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "x"}}, "template": template}}  # fmt: skip
        apps.create_namespaced_deployment("ml", dep)
    before = {
        d.metadata.name: d.metadata.resource_version
        for d in apps.list_namespaced_deployment("ml").items
    }
    r = cli("reclaim", "restore", "--yes")
    assert r.code == 1, r
    assert (
        f"Deployment ml/bad: annotation gpuctl.io/reclaim-replicas is {record!r}, not a replica "
        "count from 0 to 10000; nothing was restored" in r.err
    ), r.err
    after = {
        d.metadata.name: d.metadata.resource_version
        for d in apps.list_namespaced_deployment("ml").items
    }
    assert after == before  # not even the good one


def test_restore_puts_back_a_count_up_to_the_bound(kube, kube_api, cli):
    from kubernetes import client

    kube.install_crds("Workload", "JobSet")
    apps = client.AppsV1Api(kube_api)
    template = {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "big", "annotations": {"gpuctl.io/reclaim-replicas": "10000"}},
           "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "x"}}, "template": template}}  # fmt: skip
    apps.create_namespaced_deployment("ml", dep)
    r = cli("reclaim", "restore", "--yes")
    assert r.code == 0, r
    assert apps.read_namespaced_deployment("big", "ml").spec.replicas == 10000


def test_a_record_on_a_deployment_scaled_back_since_is_not_read(kube, kube_api, cli):
    """Its owner scaled it back: theirs now, and a record gpuctl will not act on does not
    stop the restore of the others."""
    from kubernetes import client

    kube.install_crds("Workload", "JobSet")
    apps = client.AppsV1Api(kube_api)
    template = {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
    for name, replicas, count in (("theirs", 3, "abc"), ("ours", 0, "2")):
        dep = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "annotations": {"gpuctl.io/reclaim-replicas": count}},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "x"}}, "template": template}}  # fmt: skip
        apps.create_namespaced_deployment("ml", dep)
    theirs = apps.read_namespaced_deployment("theirs", "ml").metadata.resource_version
    r = cli("reclaim", "restore", "--yes")
    assert r.code == 0, r
    assert apps.read_namespaced_deployment("ours", "ml").spec.replicas == 2
    assert apps.read_namespaced_deployment("theirs", "ml").metadata.resource_version == theirs
