"""Gangs kept within one network domain on topology-labelled nodes (tests/data/topology: EKS
p4de nodes, a block of 2 within a spine of 3), through the API emulator: the label a name
means there, the engine that keeps the pods together (pod affinity for an Indexed Job,
JobSet's exclusive placement, Kueue's TAS annotation where the queue's flavor has a
topology), each object checked against the upstream schema or CRD; the fit per domain ("can
never fit" apart from "not now") at submit and in `jobs why`."""

from __future__ import annotations

import json

import pytest
import yaml

from gpuctl.jobs.core.topology import JOBSET_EXCLUSIVE, KUEUE_REQUIRED
from tests.crd_schema import assert_valid_cr
from tests.gpu_cluster import mark, pod, seed, seed_custom
from tests.jobs.test_submit import write
from tests.k8s_schema import assert_valid
from tests.topology_corpus import layout

pytestmark = pytest.mark.integration

BLOCK = "topology.k8s.aws/network-node-layer-3"
SPINE = "topology.k8s.aws/network-node-layer-2"
NODES = [n["metadata"]["name"] for n in layout("eks-p4de")]
GANG = "name: train\nimage: nvcr.io/nvidia/pytorch:24.05-py3\ngpus: 8\n"


@pytest.fixture
def cluster(kube, kube_api):
    seed(kube_api, *layout("eks-p4de"))
    return kube


def submit(cli, tmp_path, extra: str, *args: str):
    r = cli("submit", write(tmp_path, GANG + extra), "--dry-run", "-o", "yaml", *args)
    return r, [d for d in yaml.safe_load_all(r.out) if d] if r.code == 0 else []


def test_an_indexed_job_keeps_its_gang_in_one_block_by_pod_affinity(cli, cluster, tmp_path):
    r, objects = submit(cli, tmp_path, "nodes: 2\nmultinode: indexed-job\ntopology: {within: block}\n")  # fmt: skip
    assert r.code == 0, r
    job = objects[-1]
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["affinity"]["podAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"gpuctl.io/job": "train"}}, "topologyKey": BLOCK}
        ]
    }
    # pod affinity is not gang-aware: the gang is also pinned to the only block with room
    (term,) = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]  # fmt: skip
    assert {"key": BLOCK, "operator": "In", "values": ["nn-38464347ecf47e324"]} in term["matchExpressions"]  # fmt: skip
    assert (
        f"pods kept within one {BLOCK} domain (block) by pod affinity (required), pinned to "
        "nn-38464347ecf47e324, the tightest with room now"
    ) in " ".join(r.err.split())
    for obj in objects:
        assert_valid(obj)


def test_preferred_is_a_preferred_pod_affinity(cli, cluster, tmp_path):
    extra = "nodes: 3\nmultinode: indexed-job\ntopology: {within: block, required: false}\n"
    r, objects = submit(cli, tmp_path, extra)
    assert r.code == 0, r  # 3 workers fit across blocks: a preference refuses nothing
    affinity = objects[-1]["spec"]["template"]["spec"]["affinity"]["podAffinity"]
    (term,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["weight"] == 100 and term["podAffinityTerm"]["topologyKey"] == BLOCK
    assert_valid(objects[-1])


def test_a_jobset_is_kept_in_one_block_by_its_exclusive_placement(cli, cluster, tmp_path):
    cluster.install_crds("JobSet")
    r, (jobset,) = submit(cli, tmp_path, "nodes: 2\ntopology: {within: block}\n")
    assert r.code == 0, r
    assert jobset["kind"] == "JobSet"
    assert jobset["metadata"]["annotations"] == {JOBSET_EXCLUSIVE: BLOCK}
    assert "affinity" not in jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]  # fmt: skip
    assert "by JobSet's exclusive placement" in r.err
    assert_valid_cr(jobset)


@pytest.mark.parametrize(
    ("levels", "said"),
    [
        (
            [SPINE, "kubernetes.io/hostname"],
            f"Topology eks-network lists {SPINE}, kubernetes.io/hostname",
        ),  # fmt: skip
        (None, "Topology eks-network does not exist"),
    ],
)
def test_a_level_the_flavors_topology_lacks_is_refused_naming_it(cli, cluster, kube_api, tmp_path, levels, said):  # fmt: skip
    _tas_queue(cluster, kube_api, levels)
    since = mark(cluster)
    r, _ = submit(cli, tmp_path, "namespace: team-a\nnodes: 2\ntopology: {within: block}\n")
    assert r.code == 2, r
    line = " ".join(r.err.split())
    assert f"topology.within: queue team-a places pods by Kueue's topology, and no Topology of its flavors lists {BLOCK}" in line  # fmt: skip
    assert said in line and "Kueue would never admit the job" in line
    assert not [m for m, *_ in cluster.requests()[since:] if m in ("POST", "PATCH", "PUT")]
    # a level it lists is kept by Kueue
    r, _ = submit(cli, tmp_path, "namespace: team-a\nnodes: 2\ntopology: {within: spine}\n")
    assert (r.code == 0) == (levels is not None), r


def _tas_queue(cluster, kube_api, levels: list[str] | None) -> None:
    """Queue team-a on flavor p4de tied to Topology eks-network of LEVELS (None: none)."""
    cluster.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor", "Workload", "JobSet", "Topology")  # fmt: skip
    kueue = "kueue.x-k8s.io/v1beta2"
    flavor = {
        "apiVersion": kueue,
        "kind": "ResourceFlavor",
        "metadata": {"name": "p4de"},
        "spec": {
            "nodeLabels": {"node.kubernetes.io/instance-type": "p4de.24xlarge"},
            "topologyName": "eks-network",
        },
    }
    queue = {
        "apiVersion": kueue,
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "p4de",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 24}],
                        }  # fmt: skip
                    ],
                }
            ],
        },
    }
    local = {
        "apiVersion": kueue,
        "kind": "LocalQueue",
        "metadata": {"name": "team-a", "namespace": "team-a"},
        "spec": {"clusterQueue": "team-a"},
    }
    network = {
        "apiVersion": kueue,
        "kind": "Topology",
        "metadata": {"name": "eks-network"},
        "spec": {"levels": [{"nodeLabel": k} for k in levels or []]},
    }
    for obj in (flavor, queue, local, *([network] if levels else [])):
        assert_valid_cr(obj)
        seed_custom(kube_api, obj)


def test_kueue_places_the_pod_set_where_the_queue_flavor_has_a_topology(cli, cluster, kube_api, tmp_path):  # fmt: skip
    _tas_queue(cluster, kube_api, [SPINE, BLOCK, "kubernetes.io/hostname"])
    r, (jobset,) = submit(cli, tmp_path, "namespace: team-a\nnodes: 2\ntopology: {within: block}\n")  # fmt: skip
    assert r.code == 0, r
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert template["metadata"]["annotations"] == {KUEUE_REQUIRED: BLOCK}
    assert "annotations" not in jobset["metadata"]  # Kueue places it; JobSet need not
    assert "by Kueue's required topology" in r.err
    assert_valid_cr(jobset)


def test_a_gang_bigger_than_any_block_is_refused_in_one_line_and_fits_a_spine(cli, cluster, tmp_path):  # fmt: skip
    r, _ = submit(cli, tmp_path, "nodes: 3\nmultinode: indexed-job\ntopology: {within: block}\n")
    assert r.code == 1, r
    assert (
        f"train can never fit this cluster: needs 3 × 8 nvidia.com/gpu within one {BLOCK} domain "
        "(block); the largest has room for 2 (nn-38464347ecf47e324: 2 nodes, 16 free)"
    ) in r.err
    r, objects = submit(cli, tmp_path, "nodes: 3\nmultinode: indexed-job\ntopology: {within: spine}\n")  # fmt: skip
    assert r.code == 0, r
    assert (
        objects[-1]["spec"]["template"]["spec"]["affinity"]["podAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ][0]["topologyKey"]
        == SPINE
    )


def test_a_block_busy_now_is_not_now_not_never(cli, cluster, kube_api, tmp_path):
    seed(kube_api, pod("other", "default", gpus=8, node_name=NODES[0]))
    r, _ = submit(cli, tmp_path, "nodes: 2\nmultinode: indexed-job\ntopology: {within: block}\n")
    assert r.code == 0, r
    assert "can never fit" not in r.err and "pinned" not in r.err  # no block has room to pin to
    assert (
        f"no {BLOCK} domain has room for 2 × 8 nvidia.com/gpu now; nn-38464347ecf47e324 will "
        "when work running there ends (room for 1 now)"
    ) in " ".join(r.err.split())


def test_nvlink_on_nodes_without_cliques_is_a_clear_error(cli, cluster, tmp_path):
    r, _ = submit(cli, tmp_path, "nodes: 2\ntopology: {within: nvlink}\n")
    assert r.code == 2, r
    line = r.err.strip().splitlines()[0]
    assert "job.yaml: topology.within: no node carries a 'nvlink' label" in line
    assert "nvidia.com/gpu.clique" in line and f"{BLOCK} (block)" in line


def test_jobs_why_reads_the_topology_back_and_counts_per_domain(cli, cluster, kube_api, tmp_path):  # fmt: skip
    seed(kube_api, pod("other", "default", gpus=8, node_name=NODES[0]))
    path = write(tmp_path, GANG + "nodes: 2\nmultinode: indexed-job\ntopology: {within: block}\n")
    assert cli("submit", path).code == 0
    r = cli("jobs", "why", "train")
    assert r.code == 0, r
    text = " ".join(r.out.split())
    assert f"Fit within one {BLOCK} domain (block)" in text
    assert "not now: no topology.k8s.aws/network-node-layer-3 domain has room" in text
    assert "can never fit" not in text
    data = json.loads(cli("jobs", "why", "train", "-o", "json").out)
    domains = data["fit"]["topology"]["domains"]
    assert data["fit"]["topology"]["key"] == BLOCK
    assert [(d["value"], d["slots_now"], d["slots_ever"]) for d in domains] == [
        ("nn-38464347ecf47e324", 1, 2),
        ("nn-5c0d2e7f41a9b3e86", 1, 1),
    ]
    assert data["fit"]["fits_now"] is False and data["fit"]["can_ever_fit"] is True


def test_on_gke_block_is_the_sub_block_and_spine_the_block(cli, kube, kube_api, tmp_path):
    seed(kube_api, *layout("gke-a3-ultra"))  # one GKE block, two sub-blocks of one node
    gang = "nodes: 2\nmultinode: indexed-job\ntopology: {within: block}\n"
    r, _ = submit(cli, tmp_path, gang)
    assert r.code == 1, r
    assert (
        "needs 2 × 8 nvidia.com/gpu within one cloud.google.com/gce-topology-subblock domain "
        "(block); the largest has room for 1"
    ) in " ".join(r.err.split())
    r, objects = submit(cli, tmp_path, gang.replace("block", "spine"))
    assert r.code == 0, r
    term = objects[-1]["spec"]["template"]["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert term["topologyKey"] == "cloud.google.com/gce-topology-block"
