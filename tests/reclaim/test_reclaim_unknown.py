"""`gpuctl reclaim` never acts on what its data does not show: a real Prometheus holding
DCGM-exporter series whose values are NaN or ±Inf at some steps (Go's strconv writes them
`NaN`, `+Inf`, `-Inf`, as dcgm-exporter's text does), a MIG device whose only series is
DCGM_FI_DEV_GPU_UTIL (the busy rule never judges a MIG device by it: no signal), and a
Prometheus whose answers are partial (a remote_read store that does not answer: Prometheus
answers with `warnings`). Each such workload is `unknown`, the plan says why, and `--yes`
changes nothing of it; an idle one beside them is still acted on.

Labels as dcgm-exporter writes them (NVIDIA/dcgm-exporter README, "Kubernetes" section:
gpu, UUID, device, modelName, Hostname, namespace, pod, container; MIG devices add
GPU_I_PROFILE and GPU_I_ID)."""

from __future__ import annotations

import json
import time

import pytest

from tests.reclaim.test_reclaim_cluster import snapshot
from tests.standins.prometheus import Series, load_blocks, start_prometheus

pytestmark = pytest.mark.integration
H = 3600
NAN, INF = float("nan"), float("inf")
POLICY = """apiVersion: gpuctl/v1
kind: ReclaimPolicy
name: unknown
rules:
  - name: batch
    namespaces: [ml]
    idleFor: 2h
    action: suspend
"""


def idle_but(value, between):
    """Idle (0 %) but VALUE while the sample's age is within BETWEEN (seconds)."""
    low, high = between
    return lambda age: value if low <= age <= high else 0.0


JOBS = {  # Job name -> (its GPU's value over age, extra labels)
    "idle": (0.0, {}),
    "nan-hour-ago": (idle_but(NAN, (3600, 5400)), {}),
    "nan-now": (idle_but(NAN, (0, 300)), {}),
    "plus-inf": (idle_but(INF, (1800, 2400)), {}),
    "minus-inf": (idle_but(-INF, (1800, 2400)), {}),
    "mig-util-only": (0.0, {"GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "9"}),
}


def series():
    out = []
    for i, (name, (value, extra)) in enumerate(JOBS.items()):
        labels = {"gpu": str(i), "UUID": f"GPU-{i:04d}", "device": f"nvidia{i}",
                  "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": "gpu-node-1",
                  "namespace": "ml", "pod": f"{name}-h5x2k", "container": "main", **extra}  # fmt: skip
        out.append(Series("DCGM_FI_DEV_GPU_UTIL", labels, value, history_s=2 * 24 * H, step_s=60))
    return out


def seed(kube_api):
    from kubernetes import client

    batch, core = client.BatchV1Api(kube_api), client.CoreV1Api(kube_api)
    for name, (_, extra) in JOBS.items():
        resource = "nvidia.com/mig-1g.10gb" if extra else "nvidia.com/gpu"
        spec = {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "x", "resources": {"limits": {resource: "1"}}}]}  # fmt: skip
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
               "spec": {"template": {"spec": spec}}}  # fmt: skip
        made = json.loads(batch.create_namespaced_job("ml", job, _preload_content=False).data)
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name,
                 "uid": made["metadata"]["uid"], "controller": True}  # fmt: skip
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{name}-h5x2k", "ownerReferences": [owner]},
               "spec": {"nodeName": "gpu-node-1", **spec}, "status": {"phase": "Running"}}  # fmt: skip
        core.create_namespaced_pod("ml", pod, _preload_content=False)


@pytest.fixture
def policy(kube, kube_api, tmp_path):
    kube.install_crds("Workload", "JobSet")  # what snapshot() reads
    seed(kube_api)
    f = tmp_path / "policy.yaml"
    f.write_text(POLICY)
    return str(f)


@pytest.fixture
def prometheus():
    """Factory: a real Prometheus holding series(), with REMOTE_READ stores."""
    servers = []

    def start(remote_read=None):
        servers.append(
            start_prometheus(load_blocks(series(), time.time()), remote_read=remote_read)
        )
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def rows(out: str) -> dict:
    return {w["name"]: w for w in json.loads(out)["workloads"]}


def test_values_that_are_no_number_and_a_missing_signal_leave_their_workloads_unknown(
    prometheus, policy, kube_api, cli
):
    prom = prometheus()
    before = snapshot(kube_api)
    r = cli("reclaim", "--policy", policy, "--prometheus", prom.url, "--yes", "-o", "json")
    assert r.code == 0, r
    found = rows(r.out)
    assert {n: (w["status"], w["action"]) for n, w in found.items()} == {
        "idle": ("idle", "suspend"),
        **{n: ("unknown", None) for n in JOBS if n != "idle"},
    }
    for name in ("nan-hour-ago", "nan-now", "plus-inf", "minus-inf"):
        assert "its busy signal is NaN or ±Inf at" in found[name]["why"], found[name]
    assert "a busy signal (" in found["mig-util-only"]["why"]  # UTIL never judges a MIG device
    notes = json.loads(r.out)["plan"]["notes"]
    assert {n.split(": ")[1] for n in notes} == {f"Job ml/{n}" for n in JOBS if n != "idle"}
    assert "not acted on, its data unknown: Job ml/nan-now: unknown: " in r.err  # the plan's text
    after = snapshot(kube_api)
    assert {k for k in before if before[k] != after[k]} == {("Job", "ml", "idle")}


def test_a_partial_answer_leaves_every_workload_unknown(prometheus, policy, kube_api, cli):
    store = [{"url": "http://127.0.0.1:9/api/v1/read", "read_recent": True}]  # nothing listens
    prom = prometheus(remote_read=store)
    before = snapshot(kube_api)
    r = cli("reclaim", "--policy", policy, "--prometheus", prom.url, "--yes", "-o", "json")
    assert r.code == 0, r
    found = rows(r.out)
    assert {w["status"] for w in found.values()} == {"unknown"}
    assert all("Prometheus's answer is partial: remote_read" in w["why"] for w in found.values())
    assert json.loads(r.out)["plan"]["steps"] == [] and "nothing to change" in r.err
    assert snapshot(kube_api) == before
