"""The sandbox keeps a gang within one network block, as a cluster does with EKS's topology
labels: kube-scheduler by required pod affinity on the block's label, Kueue by Topology
Aware Scheduling (`kueue.x-k8s.io/podset-required-topology`). The simulation runs in the
test, a tick at a time, against the API emulator; gpuctl reads it over HTTP."""

from __future__ import annotations

import pytest

from gpuctl.sim import cluster, mig_manager
from gpuctl.sim.controllers import BOOKMARK_S, Api, Simulation
from gpuctl.sim.kueue import Kueue
from gpuctl.sim.sandbox import KUEUE_KINDS, seed
from tests.clirun import run_gpuctl

pytestmark = pytest.mark.integration
pytest.importorskip("kmock")

NODES = "4xH100-80GB"  # blocks {h100-node-1, -2} and {-3, -4}, one spine
BLOCK = "topology.k8s.aws/network-node-layer-3"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@pytest.fixture
def sim(kube):
    kube.install_crds("JobSet", *KUEUE_KINDS)
    nodes = cluster.node_objects(cluster.parse_nodes(NODES))
    api = Api(kube.url)
    seed(api, nodes, kueue=True)
    hardware = {n["metadata"]["name"]: mig_manager.hardware(n, {}) for n in nodes}
    kube.bookmark_every(BOOKMARK_S)  # a step catches up at the first one
    sim = Simulation(api, {k: v for k, v in hardware.items() if v}, kube, Kueue(api))
    api.create("/api/v1/namespaces", {"metadata": {"name": "ml"}})
    for node in ("h100-node-1", "h100-node-3"):  # half of a node in each block is taken
        api.create("/apis/batch/v1/namespaces/ml/jobs", _job(f"on-{node[-1]}", 1, 4, node=node))
    for _ in range(3):
        sim.step()
    return sim


def _job(name, workers, gpus, node=None, labels=None, annotations=None, affinity=None) -> dict:
    pod: dict = {
        "containers": [
            {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        ],
        "restartPolicy": "Never",
        "tolerations": TOLERATE,
    }
    if node:
        pod["nodeSelector"] = {"kubernetes.io/hostname": node}
    if affinity:
        pod["affinity"] = affinity
    template = {
        "metadata": {"labels": {"gang": name}, "annotations": annotations or {}},
        "spec": pod,
    }
    spec = {"completions": workers, "parallelism": workers, "completionMode": "Indexed", "template": template}  # fmt: skip
    if labels:
        spec["suspend"] = True  # as gpuctl and Kueue's webhook leave a queued job
    meta = {"name": name, "namespace": "ml", "labels": labels or {}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def _nodes_of(api: Api, job: str) -> list[str]:
    pods = api.items("/api/v1/namespaces/ml/pods")
    return sorted(
        p["spec"]["nodeName"]
        for p in pods
        if p["metadata"]["labels"].get("gang") == job and p["spec"].get("nodeName")
    )


def _blocks(api: Api, nodes: list[str]) -> set[str]:
    return {api.get(f"/api/v1/nodes/{n}")["metadata"]["labels"][BLOCK] for n in nodes}


def _steps(sim: Simulation, n: int = 4) -> None:
    for _ in range(n):
        sim.step()


def test_without_a_constraint_most_allocated_splits_the_gang_across_blocks(sim):
    sim.api.create("/apis/batch/v1/namespaces/ml/jobs", _job("loose", 2, 4))
    _steps(sim)
    placed = _nodes_of(sim.api, "loose")
    assert placed == ["h100-node-1", "h100-node-3"] and len(_blocks(sim.api, placed)) == 2


def test_required_pod_affinity_on_the_block_keeps_the_gang_in_one_block(sim):
    term = {"labelSelector": {"matchLabels": {"gang": "kept"}}, "topologyKey": BLOCK}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    sim.api.create("/apis/batch/v1/namespaces/ml/jobs", _job("kept", 2, 4, affinity=affinity))
    _steps(sim)
    placed = _nodes_of(sim.api, "kept")
    assert len(placed) == 2 and len(_blocks(sim.api, placed)) == 1, placed


def _queue(api: Api, topology: bool) -> None:
    """A ClusterQueue over the H100 flavor, tied to a Topology of EKS's levels or not."""
    levels = [f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3)]
    api.create(f"{KUEUE}/topologies", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "eks"}, "spec": {"levels": [{"nodeLabel": k} for k in [*levels, "kubernetes.io/hostname"]]}})  # fmt: skip
    flavor = {"nodeLabels": {"gpu-type": "h100"}, "tolerations": TOLERATE}
    flavor |= {"topologyName": "eks"} if topology else {}
    api.create(f"{KUEUE}/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": flavor})  # fmt: skip
    quota = [{"name": r, "nominalQuota": q} for r, q in (("cpu", "100"), ("memory", "1Ti"), ("nvidia.com/gpu", "32"))]  # fmt: skip
    groups = [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": quota}]}]  # fmt: skip
    api.create(f"{KUEUE}/clusterqueues", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "ml"}, "spec": {"namespaceSelector": {}, "resourceGroups": groups}})  # fmt: skip
    api.create(f"{KUEUE}/namespaces/ml/localqueues", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "ml", "namespace": "ml"}, "spec": {"clusterQueue": "ml"}})  # fmt: skip


def _workload(api: Api) -> dict:
    (w,) = [
        w
        for w in api.items(f"{KUEUE}/namespaces/ml/workloads")
        if w["metadata"]["name"].startswith("job-gang-")
    ]
    return w


QUEUED = {"kueue.x-k8s.io/queue-name": "ml"}
SPINE = "topology.k8s.aws/network-node-layer-2"


def _gang(api: Api, gpus: int, level: str) -> None:
    annotations = {"kueue.x-k8s.io/podset-required-topology": level}
    api.create("/apis/batch/v1/namespaces/ml/jobs", _job("gang", 2, gpus, labels=QUEUED, annotations=annotations))  # fmt: skip


def test_quota_set_ties_the_flavor_to_the_nodes_topology_and_kueue_keeps_a_gang_in_a_block(
    sim, capsys
):
    api = sim.api
    code, _, err = run_gpuctl(capsys, "quota", "set", "ml", "--gpus", "32", "--gpu-type", "h100", "--yes")  # fmt: skip
    assert code == 0, err
    (topology,) = api.items(f"{KUEUE}/topologies")
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == [
        *(f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3)),
        "kubernetes.io/hostname",
    ]
    (flavor,) = api.items(f"{KUEUE}/resourceflavors")
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    _gang(api, 4, BLOCK)
    _steps(sim)
    w = _workload(api)
    assert w["spec"]["podSets"][0]["topologyRequest"]["required"] == BLOCK
    (assigned,) = w["status"]["admission"]["podSetAssignments"]
    (piece,) = assigned["topologyAssignment"]["slices"]
    assert assigned["topologyAssignment"]["levels"] == ["kubernetes.io/hostname"]
    placed = _nodes_of(api, "gang")
    assert len(placed) == 2 and len(_blocks(api, placed)) == 1, placed
    # where Kueue assigned them: the block's nodes
    assert _blocks(api, piece["valuesPerLevel"][0].get("individual", {}).get("roots") or [piece["valuesPerLevel"][0]["universal"]]) == _blocks(api, placed)  # fmt: skip


def test_kueue_refuses_a_gang_no_block_has_room_for_and_admits_it_within_a_spine(sim):
    api = sim.api
    _queue(api, topology=True)
    _gang(api, 8, BLOCK)  # 8 GPUs a worker: h100-node-2 and -4 have them, in two blocks
    _steps(sim)
    reserved = {c["type"]: c for c in _workload(api)["status"]["conditions"]}["QuotaReserved"]
    assert reserved["status"] == "False" and reserved["message"] == (
        'couldn\'t assign flavors to pod set main: topology "eks" allows to fit only 1 out '
        "of 2 pod(s)"
    )
    assert _nodes_of(api, "gang") == []
    api.delete("/apis/batch/v1/namespaces/ml/jobs/gang")
    _steps(sim, 2)
    _gang(api, 8, SPINE)
    _steps(sim)
    assert _nodes_of(api, "gang") == ["h100-node-2", "h100-node-4"]


def test_a_flavor_without_topology_refuses_a_topology_request_as_kueue_does(sim):
    api = sim.api
    _queue(api, topology=False)
    _gang(api, 4, BLOCK)
    _steps(sim)
    reserved = {c["type"]: c for c in _workload(api)["status"]["conditions"]}["QuotaReserved"]
    assert reserved["message"] == (
        'couldn\'t assign flavors to pod set main: Flavor "h100" does not support '
        "TopologyAwareScheduling"
    )


SPEC = """apiVersion: gpuctl/v1
kind: Job
name: {name}
image: nvcr.io/nvidia/pytorch:24.05-py3
command: [python, train.py]
nodes: 2
gpus: 4
gpu_type: h100
topology: {{within: block}}
env: {{SANDBOX_RUNTIME: "600"}}
"""


@pytest.mark.parametrize("queued", [False, True], ids=["jobset-exclusive", "kueue-tas"])
def test_a_submitted_gang_within_a_block_is_kept_there(sim, tmp_path, capsys, monkeypatch, queued):
    """`gpuctl submit` of a 2-node job asked within a block: JobSet's exclusive placement
    without a queue, Kueue's required topology on a queue whose flavor has one (quota set)."""
    if queued:
        code, _, err = run_gpuctl(capsys, "quota", "set", "ml", "--gpus", "32", "--gpu-type", "h100", "--yes")  # fmt: skip
        assert code == 0, err
    spec = tmp_path / "gang.yaml"
    spec.write_text(SPEC.format(name="gang"))
    monkeypatch.setenv("GPUCTL_NAMESPACE", "ml")
    code, _, err = run_gpuctl(capsys, "submit", spec)
    assert code == 0, err
    _steps(sim, 6)
    pods = [p for p in sim.api.items("/api/v1/namespaces/ml/pods") if p["metadata"]["name"].startswith("gang-") and p["spec"].get("nodeName")]  # fmt: skip
    placed = sorted(p["spec"]["nodeName"] for p in pods)
    assert len(placed) == 2 and len(_blocks(sim.api, placed)) == 1, placed
    if queued:  # by Kueue's topology-aware admission
        (w,) = sim.api.items(f"{KUEUE}/namespaces/ml/workloads")
        assert w["spec"]["podSets"][0]["topologyRequest"]["required"] == BLOCK
    else:  # by JobSet's exclusive placement
        js = sim.api.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/gang")
        assert js["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] == BLOCK
