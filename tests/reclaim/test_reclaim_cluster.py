"""`gpuctl reclaim` on the real stand-ins: a real Prometheus holding DCGM-exporter series
(backfilled with promtool: busy, idle, idle-then-busy, stale, missing) and the API
emulator with Kueue's and JobSet's CRDs. Each test says what must not have changed."""

from __future__ import annotations

import json

import pytest

from tests.kueue_workloads import workload_for
from tests.standins.dcgm_series import device_series

pytestmark = pytest.mark.integration

H = 3600
NODE = "gpu-node-1"
# (namespace, job or deployment, kind, GPU UUID or None for no series, value over age, newest age)
IDLE = 0.0


# the exporter keeps sending while a module's tests run (minutes on a loaded machine): its
# series go on 30 minutes past the moment they are loaded, each query reads those up to now
LIVE = -1800


def busy_recently(age: float) -> float:
    return 80.0 if age < 600 else 0.0


def busy_until_3h_ago(age: float) -> float:
    return 90.0 if age > 3 * H else 0.0


WORKLOADS = [
    ("research", "notebook", "Deployment", "GPU-0", IDLE, LIVE),
    ("research", "keep", "Deployment", "GPU-1", IDLE, LIVE),  # labelled gpuctl.io/reclaim: never
    ("ml", "train", "Job", "GPU-2", 85.0, LIVE),  # busy
    ("ml", "stalled", "Job", "GPU-3", IDLE, LIVE),  # plain Job: spec.suspend
    ("ml", "queued", "Job", "GPU-4", IDLE, LIVE),  # Kueue-managed: Workload deactivated
    ("ml", "late", "Job", "GPU-5", busy_recently, LIVE),  # idle, then busy 10 minutes ago
    # newest sample 2.5 min old: stale (2m), and for 2.5 min more within the 5m lookback
    ("ml", "stale", "Job", "GPU-6", IDLE, 150),
    ("ml", "nodata", "Job", None, IDLE, LIVE),  # no series at all
    ("other", "elsewhere", "Job", "GPU-7", IDLE, LIVE),  # no rule covers it
    ("scratch", "debug", "Pod", "GPU-9", IDLE, LIVE),  # a bare pod: delete is opted in
    ("ml", "finished", "Job", "GPU-8", busy_until_3h_ago, LIVE),  # idle for 3 hours
]
# JobSets (gangs): one replicated job of two 1-GPU pods, each pod's GPU value over age
GANGS = [("gang", [IDLE, IDLE]), ("halfbusy", [IDLE, 85.0])]
POLICY = """apiVersion: gpuctl/v1
kind: ReclaimPolicy
name: test
exempt:
  namespaces: [kube-system]
rules:
  - name: notebooks
    namespaces: [research]
    idleFor: 2h
    action: scale-to-zero
  - name: batch
    namespaces: [ml]
    idleFor: 2h
    action: suspend
  - name: scratch
    namespaces: [scratch]
    idleFor: 2h
    action: delete
"""


def series():
    """Every field of dcgm-exporter's default counters for each GPU: GPU_UTIL and
    GR_ENGINE_ACTIVE both (tests/standins/dcgm_series.py), a week of them."""
    out = []
    week = {"history_s": 7 * 24 * H, "step_s": 60}
    for i, (ns, name, kind, uuid, value, newest) in enumerate(WORKLOADS):
        if uuid is None:
            continue
        labels = {"gpu": str(i), "UUID": uuid, "Hostname": NODE, "modelName": "NVIDIA H100 80GB HBM3",
                  "namespace": ns, "pod": pod_name(name, kind), "container": "main", "job": "dcgm"}  # fmt: skip
        out += device_series(labels, value, 1000, 81559, newest_s=newest, **week)
    for g, (name, values) in enumerate(GANGS):
        for i, value in enumerate(values):
            labels = {"gpu": str(10 + 2 * g + i), "UUID": f"GPU-{name}-{i}", "Hostname": NODE, "namespace": "ml",
                      "pod": gang_pod(name, i), "container": "main", "job": "dcgm"}  # fmt: skip
            out += device_series(labels, value, 1000, 81559, newest_s=LIVE, **week)
    return out


def gang_pod(name: str, index: int) -> str:
    return f"{name}-workers-0-{index}-h5x2k"


def pod_name(name: str, kind: str) -> str:
    if kind == "Pod":
        return name
    return f"{name}-7d9f8b6c5-x2k4q" if kind == "Deployment" else f"{name}-h5x2k"


def seed(kube, kube_api):
    from kubernetes import client

    kube.install_crds("Workload", "JobSet")
    core, apps, batch = (
        client.CoreV1Api(kube_api),
        client.AppsV1Api(kube_api),
        client.BatchV1Api(kube_api),
    )
    custom = client.CustomObjectsApi(kube_api)
    template = {"spec": {"containers": [{"name": "main", "image": "x",
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}  # fmt: skip
    for ns, name, kind, _, _, _ in WORKLOADS:
        labels = {"gpuctl.io/reclaim": "never"} if name == "keep" else {}
        if kind == "Deployment":
            dep = {"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": name, "namespace": ns, "labels": labels, "uid": f"uid-{name}"},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                            "template": {"metadata": {"labels": {"app": name}}, **template}}}  # fmt: skip
            apps.create_namespaced_deployment(ns, dep, _preload_content=False)
            rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": f"{name}-7d9f8b6c5", "namespace": ns, "ownerReferences": [
                      {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "uid": f"uid-{name}", "controller": True}]},
                  "spec": {"selector": {"matchLabels": {"app": name}},
                           "template": {"metadata": {"labels": {"app": name}}, **template}}}  # fmt: skip
            apps.create_namespaced_replica_set(ns, rs, _preload_content=False)
            owner = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs["metadata"]["name"],
                "uid": "rs",
                "controller": True,
            }
        elif kind == "Pod":
            owner = None
        else:
            if name == "queued":
                labels["kueue.x-k8s.io/queue-name"] = "team-ml"
            job = {"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": name, "namespace": ns, "labels": labels, "uid": f"uid-{name}"},
                   "spec": {"suspend": False, "template": {**template, "spec": {**template["spec"], "restartPolicy": "Never"}}}}  # fmt: skip
            made = batch.create_namespaced_job(ns, job, _preload_content=False)
            uid = json.loads(made.data)["metadata"]["uid"]  # the server's, as Kueue reads it
            owner = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": name,
                "uid": uid,
                "controller": True,
            }
            if name == "queued":
                wl = workload_for(job, uid=uid)
                custom.create_namespaced_custom_object(
                    "kueue.x-k8s.io", "v1beta2", ns, "workloads", wl, _preload_content=False
                )
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": pod_name(name, kind), "namespace": ns, "ownerReferences": [owner] if owner else [], "labels": labels},
               "spec": {"nodeName": NODE, **template["spec"]}, "status": {"phase": "Running"}}  # fmt: skip
        core.create_namespaced_pod(ns, pod, _preload_content=False)
    for name, values in GANGS:
        job_template = {"parallelism": len(values), "completions": len(values), "completionMode": "Indexed",
                        "template": {**template, "spec": {**template["spec"], "restartPolicy": "Never"}}}  # fmt: skip
        js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
              "spec": {"suspend": False, "replicatedJobs": [{"name": "workers", "replicas": 1,
                                                              "template": {"spec": job_template}}]}}  # fmt: skip
        custom.create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "ml", "jobsets", js, _preload_content=False
        )
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": f"{name}-workers-0", "namespace": "ml", "uid": f"uid-{name}-0",
                            "labels": {"jobset.sigs.k8s.io/jobset-name": name},
                            "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                                 "name": name, "uid": f"uid-{name}", "controller": True}]},
               "spec": job_template}  # fmt: skip
        batch.create_namespaced_job("ml", job, _preload_content=False)
        for i in range(len(values)):
            owner = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": f"{name}-workers-0",
                "uid": f"uid-{name}-0",
                "controller": True,
            }
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": gang_pod(name, i), "namespace": "ml", "ownerReferences": [owner],
                                "labels": {"jobset.sigs.k8s.io/jobset-name": name}},
                   "spec": {"nodeName": NODE, **template["spec"]}, "status": {"phase": "Running"}}  # fmt: skip
            core.create_namespaced_pod("ml", pod, _preload_content=False)


def snapshot(kube_api) -> dict:
    from kubernetes import client

    apps, batch = client.AppsV1Api(kube_api), client.BatchV1Api(kube_api)
    custom = client.CustomObjectsApi(kube_api)
    out = {}
    for kind, fn in (("Deployment", apps.list_deployment_for_all_namespaces),
                     ("Job", batch.list_job_for_all_namespaces)):  # fmt: skip
        for o in json.loads(fn(_preload_content=False).data)["items"]:
            out[(kind, o["metadata"]["namespace"], o["metadata"]["name"])] = o
    for o in custom.list_custom_object_for_all_namespaces("jobset.x-k8s.io", "v1alpha2", "jobsets")[
        "items"
    ]:
        out[("JobSet", o["metadata"]["namespace"], o["metadata"]["name"])] = o
    wls = custom.list_custom_object_for_all_namespaces("kueue.x-k8s.io", "v1beta2", "workloads")
    for o in wls["items"]:
        out[("Workload", o["metadata"]["namespace"], o["metadata"]["name"])] = o
    return out


def rows(doc) -> dict:
    return {(w["namespace"], w["name"]): w for w in doc["workloads"]}


@pytest.fixture
def cluster(kube, kube_api, tmp_path):
    seed(kube, kube_api)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return str(policy)


def test_the_dry_run_judges_every_workload_and_changes_nothing(prom, cluster, kube_api, cli):
    before = snapshot(kube_api)
    r = cli("reclaim", "--policy", cluster, "--prometheus", prom.url, "-o", "json")
    assert r.code == 0, r
    found = rows(json.loads(r.out))
    status = {k: (v["status"], v["action"]) for k, v in found.items()}
    assert status == {
        ("research", "notebook"): ("idle", "scale-to-zero"),
        ("research", "keep"): ("exempt", None),
        ("ml", "train"): ("busy", None),
        ("ml", "stalled"): ("idle", "suspend"),
        ("ml", "queued"): ("idle", "suspend"),
        ("ml", "late"): ("busy", None),
        ("ml", "stale"): ("stale", None),
        ("ml", "nodata"): ("missing", None),
        ("other", "elsewhere"): ("not covered", None),
        ("scratch", "debug"): ("idle", "delete"),
        ("ml", "finished"): ("idle", "suspend"),
        ("ml", "gang"): ("idle", "suspend"),  # a JobSet: both its pods idle
        ("ml", "halfbusy"): ("busy", None),  # one pod of the gang busy: the gang is busy
    }
    assert found[("ml", "gang")]["kind"] == "JobSet" and found[("ml", "gang")]["gpus"] == 2
    finished = found[("ml", "finished")]  # idle since its last busy step, 3 hours ago
    assert finished["idle_since_known"] and abs(finished["idle_s"] - 3 * H) <= 120, finished
    never_busy = found[("ml", "stalled")]  # never busy in the lookback: idle at least idleFor
    assert not never_busy["idle_since_known"] and abs(never_busy["idle_s"] - 2 * H) <= 5
    assert snapshot(kube_api) == before  # a dry run: nothing changed


def test_yes_acts_on_the_idle_covered_ones_only_and_restore_puts_them_back(
    prom, cluster, kube_api, cli
):
    before = snapshot(kube_api)
    r = cli("reclaim", "--policy", cluster, "--prometheus", prom.url, "--yes")
    assert r.code == 0, r
    after = snapshot(kube_api)
    notebook = after[("Deployment", "research", "notebook")]
    assert notebook["spec"]["replicas"] == 0
    assert notebook["metadata"]["annotations"]["gpuctl.io/reclaim-replicas"] == "1"
    record = json.loads(notebook["metadata"]["annotations"]["gpuctl.io/reclaim"])
    assert (record["action"], record["rule"], record["gpus"], record["idleFor"]) == (
        "scale-to-zero",
        "notebooks",
        1,
        "2h",
    )
    assert after[("Job", "ml", "stalled")]["spec"]["suspend"] is True
    wl = next(v for k, v in after.items() if k[0] == "Workload")
    assert wl["spec"]["active"] is False
    assert (
        after[("Job", "ml", "queued")]["spec"]["suspend"] is False
    )  # Kueue suspends it, not gpuctl
    changed = {k for k in before if before[k] != after[k]}
    assert after[("JobSet", "ml", "gang")]["spec"]["suspend"] is True  # the gang, as a whole
    assert changed == {("Deployment", "research", "notebook"), ("Job", "ml", "stalled"), ("Job", "ml", "finished"),
                       ("JobSet", "ml", "gang"),
                       ("Job", "ml", "queued"), ("Workload",) + next(k for k in after if k[0] == "Workload")[1:]}  # fmt: skip
    # what must not have changed: the busy, exempt, stale, missing and uncovered ones
    for key in [("Deployment", "research", "keep"), ("Job", "ml", "train"), ("Job", "ml", "late"),
                ("Job", "ml", "stale"), ("Job", "ml", "nodata"), ("Job", "other", "elsewhere"),
                ("JobSet", "ml", "halfbusy")]:  # fmt: skip
        assert after[key] == before[key], key

    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    assert not core.list_namespaced_pod("scratch").items  # evicted
    events = json.loads(core.list_event_for_all_namespaces(_preload_content=False).data)["items"]
    said = {(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) for e in events}
    assert said == {
        ("Job", "finished", "IdleGPUsSuspended"), ("JobSet", "gang", "IdleGPUsSuspended"),
        ("Deployment", "notebook", "IdleGPUsScaledToZero"), ("Job", "queued", "IdleGPUsSuspended"),
        ("Job", "stalled", "IdleGPUsSuspended"), ("Pod", "debug", "IdleGPUsEvicted"),
    }  # fmt: skip
    r = cli("reclaim", "restore", "--yes")
    assert r.code == 0, r
    restored = snapshot(kube_api)
    assert restored[("Deployment", "research", "notebook")]["spec"]["replicas"] == 1
    assert (
        "gpuctl.io/reclaim-replicas"
        not in restored[("Deployment", "research", "notebook")]["metadata"]["annotations"]
    )
    assert restored[("Job", "ml", "stalled")]["spec"]["suspend"] is False
    assert restored[("JobSet", "ml", "gang")]["spec"]["suspend"] is False
    assert next(v for k, v in restored.items() if k[0] == "Workload")["spec"]["active"] is True


def test_without_a_policy_every_namespace_is_only_reported(prom, cluster, kube_api, cli):
    before = snapshot(kube_api)
    r = cli("reclaim", "--prometheus", prom.url, "--yes", "-o", "json")
    assert r.code == 0, r
    actions = {k: v["action"] for k, v in rows(json.loads(r.out)).items() if v["action"]}
    assert actions == {("research", "notebook"): "report", ("ml", "stalled"): "report",
                       ("ml", "queued"): "report", ("other", "elsewhere"): "report",
                       ("ml", "finished"): "report", ("ml", "gang"): "report",
                       ("scratch", "debug"): "report"}  # fmt: skip
    after = snapshot(kube_api)
    for key, obj in before.items():  # only annotations: no spec changed
        assert after[key]["spec"] == obj["spec"], key
    record = json.loads(
        after[("Job", "other", "elsewhere")]["metadata"]["annotations"]["gpuctl.io/reclaim"]
    )
    assert record["action"] == "report"
    # re-running is idempotent: what was reported for this idle stretch is not reported again
    again = cli("reclaim", "--prometheus", prom.url, "--yes", "-o", "json")
    assert again.code == 0, again
    assert not [v for v in rows(json.loads(again.out)).values() if v["action"]]
    assert snapshot(kube_api) == after


@pytest.mark.parametrize("before_command", [True, False])
def test_the_context_options_work_before_and_after_reclaim(
    prom, cluster, kube, tmp_path, cli, before_command
):
    from tests.test_cli_flags import two_contexts

    cfg = two_contexts(tmp_path, kube.url)  # its current context points at nothing
    picked = ["--kubeconfig", cfg, "--context", "emu"]
    args = ["--prometheus", prom.url, "-o", "json"]
    r = cli(*picked, "reclaim", *args) if before_command else cli("reclaim", *picked, *args)
    assert r.code == 0, r
    assert rows(json.loads(r.out))[("ml", "stalled")]["status"] == "idle"


def run(cli, prom, policy, *extra):
    """`gpuctl reclaim --yes` with the POLICY file and the module's Prometheus."""
    return cli("reclaim", "--policy", policy, "--prometheus", prom.url, "--yes", *extra)
