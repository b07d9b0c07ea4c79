"""Every command that reads nodes, on a cluster of real node objects (tests/data/nodes, each
citing its public source) in the API emulator, with no gpuctl settings: specs asking for
H100, A100, T4 or L4 fit the nodes that have them and render affinity those nodes satisfy;
MIG requests render the resource the MIG nodes offer."""

from __future__ import annotations

import json

import pytest
import yaml

from gpuctl.k8s.objects import labels_of
from gpuctl.k8s.placement import terms_match
from tests.gpu_cluster import seed
from tests.node_corpus import corpus

NODES = corpus()
BY_NAME = {n["metadata"]["name"]: stem for stem, n in NODES.items()}


RUNNING = {  # a job gpuctl placed on the H100 node, as the API returns it
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train-0", "namespace": "default"},
    "spec": {
        "nodeName": "xe9680-h100",
        "containers": [
            {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "nvidia.com/gpu.product",
                                    "operator": "In",
                                    "values": ["NVIDIA-H100-80GB-HBM3"],
                                }
                            ]
                        }
                    ]
                }
            }
        },
    },
    "status": {"phase": "Running"},
}


@pytest.fixture
def real_cluster(kube_api):
    seed(kube_api, *NODES.values())
    return kube_api


def job(tmp_path, text: str) -> str:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: gpuctl/v1\nname: j\nimage: x\n" + text)
    return str(path)


def pod_of(docs: list[dict]) -> dict:
    last = docs[-1]
    return last["spec"] if last["kind"] == "Pod" else last["spec"]["template"]["spec"]


def submitted(cli, path: str) -> tuple[dict, str]:
    r = cli("submit", path, "--dry-run", "-o", "yaml")
    assert r.code == 0, r
    return pod_of(list(yaml.safe_load_all(r.out))), r.err


def selected(pod: dict) -> set[str]:
    terms = [
        t["matchExpressions"]
        for t in ((pod.get("affinity") or {}).get("nodeAffinity") or {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    ]
    return {stem for stem, n in NODES.items() if terms_match(labels_of(n), terms)}


@pytest.mark.parametrize(
    ("gpu_type", "gpus", "nodes"),
    [
        (
            "h100",
            8,
            {"gfd-h100", "gfd-h100-unhealthy", "gfd-h100-plugin-not-running", "gpuctl-h100"},
        ),
        (
            "A100",
            8,
            {
                "gfd-a100-old-name",
                "gfd-a100-80gb",
                "gfd-a100-mig-mixed",
                "karpenter-p4d",
                "aks-a100",
            },
        ),
        ("t4", 1, {"gfd-t4"}),
        ("L4", 1, {"gfd-l4", "gke-l4"}),
    ],
)
def test_a_gpu_type_fits_the_nodes_that_have_it_and_renders_their_affinity(
    cli, real_cluster, tmp_path, gpu_type, gpus, nodes
):
    pod, err = submitted(cli, job(tmp_path, f"gpus: {gpus}\ngpu_type: {gpu_type}\n"))
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == str(gpus)
    assert selected(pod) == nodes
    assert "can never fit" not in err


def test_a_mig_request_renders_the_resource_the_mig_nodes_offer(cli, real_cluster, tmp_path):
    pod, _ = submitted(cli, job(tmp_path, "mig: 1g.5gb\n"))
    # only single-strategy nodes offer 1g.5gb here (GFD's and GKE's): nvidia.com/gpu there
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert selected(pod) == {"gfd-a100-mig-single", "gke-a100-partitioned"}
    pod, _ = submitted(cli, job(tmp_path, "mig: 7g.40gb\n"))
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-7g.40gb": "1"}


def test_jobs_why_reads_the_job_s_own_affinity(cli, real_cluster, tmp_path):
    r = cli("submit", job(tmp_path, "gpus: 8\ngpu_type: h100\n"))
    assert r.code == 0, r
    d = json.loads(cli("jobs", "why", "j", "-o", "json").out)
    fit = {n["name"]: n for n in d["fit"]["nodes"]}
    assert fit["xe9680-h100"]["slots_ever"] == 1
    assert fit["xe9680-h100-degraded"]["reason"] == "7 nvidia.com/gpu, a worker needs 8"
    assert fit["g4dn-t4"]["reason"] == "outside the job's node affinity"


def test_quota_set_on_several_types_refuses_to_give_n_per_type(cli, kube, real_cluster):
    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor")
    r = cli("quota", "set", "team-a", "--gpus", "8", "--engine", "kueue", "--dry-run")
    assert r.code == 2 and "GPU types" in r.err and "--gpus-per-type" in r.err
    r = cli(
        "quota", "set", "team-a", "--gpus", "8", "--gpu-type", "h100", "--dry-run", "-o", "yaml"
    )
    assert r.code == 0, r
    flavors = [o for o in yaml.safe_load_all(r.out) if o.get("kind") == "ResourceFlavor"]
    (flavor,) = flavors
    ((key, value),) = flavor["spec"]["nodeLabels"].items()
    chosen = {stem for stem, n in NODES.items() if labels_of(n).get(key) == value}
    assert chosen and chosen <= {"gfd-h100", "gfd-h100-unhealthy", "gfd-h100-plugin-not-running"}


def test_share_show_whatif_and_doctor_read_the_same_identity(cli, real_cluster):
    rows = {r["node"]: r for r in json.loads(cli("share", "show", "-o", "json").out)["nodes"]}
    assert rows["g4dn-t4-shared"]["gpu"] == "T4"
    assert (rows["g4dn-t4-shared"]["strategy"], rows["g4dn-t4-shared"]["replicas"]) == (
        "time-slicing",
        8,
    )
    assert rows["gke-ml-l4-pool-3f9a2c1d-x7kq"]["gpu"] == "L4"
    seed(real_cluster, RUNNING)
    r = cli("whatif", "--from-cluster", "--seeds", "1", "-o", "json")
    assert r.code == 0, r
    r = cli("doctor", "-o", "json")
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    mig = checks["mig"]["detail"]
    assert "xe9680-h100" not in mig  # all-disabled is not MIG applied
    assert "r7525-a100-mig" in mig or checks["mig"]["status"] != "pass"
