"""Job specs for every vendor's accelerators (`accelerator:`, `gpus:` as devices,
`neuron_cores:`, `tpu_topology:`, `partition:`), submitted with --dry-run to the API emulator
seeded with the real node corpus (tests/data/nodes): each lands exactly on the nodes that have
that accelerator, asks for that vendor's resource, tolerates that vendor's taint, and what never
fits is refused in one line."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from gpuctl.k8s.objects import labels_of
from gpuctl.k8s.placement import terms_match
from tests.gpu_cluster import seed
from tests.node_corpus import corpus

pytestmark = pytest.mark.integration

NODES = corpus()


@pytest.fixture
def real_cluster(kube_api):
    seed(kube_api, *NODES.values())
    return kube_api


def job(tmp_path, text: str, name: str = "j") -> str:
    path = tmp_path / "job.yaml"
    path.write_text(f"apiVersion: gpuctl/v1\nname: {name}\nimage: x\n" + text)
    return str(path)


def submitted(cli, path: str) -> tuple[list[dict], str]:
    r = cli("submit", path, "--dry-run", "-o", "yaml")
    assert r.code == 0, r
    return list(yaml.safe_load_all(r.out)), r.err


def pod_of(docs: list[dict]) -> dict:
    last = docs[-1]
    return last["spec"] if last["kind"] == "Pod" else last["spec"]["template"]["spec"]


def selected(pod: dict) -> set[str]:
    affinity = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}
    )
    terms = [t["matchExpressions"] for t in affinity.get("nodeSelectorTerms", [])]
    return {stem for stem, n in NODES.items() if terms_match(labels_of(n), terms)}


@pytest.mark.parametrize(
    ("text", "limits", "stems"),
    [
        # the VF knows only its device ID, the OAM node its product name and ID
        ("accelerator: mi300x\n", {"amd.com/gpu": "1"}, {"amd-mi300x-vf", "amd-mi300x-labeller"}),
        ("accelerator: trainium2\ngpus: 16\n", {"aws.amazon.com/neuron": "16"},
         {"neuron-trn2-karpenter"}),
        # known only by its instance type
        ("accelerator: inferentia2\ngpus: 12\n", {"aws.amazon.com/neuron": "12"},
         {"neuron-inf2-instance-type"}),
        ("accelerator: inf2\nneuron_cores: 24\n", {"aws.amazon.com/neuroncore": "24"},
         {"neuron-inf2-instance-type"}),
        ("accelerator: gaudi2\ngpus: 8\n", {"habana.ai/gaudi": "8"}, {"gaudi2-hfd"}),
        ("gpu_type: h100\ngpus: 8\n", {"nvidia.com/gpu": "8"},
         {"gfd-h100", "gfd-h100-unhealthy", "gfd-h100-plugin-not-running", "gpuctl-h100"}),
        ("accelerator: h100\ngpus: 8\n", {"nvidia.com/gpu": "8"},
         {"gfd-h100", "gfd-h100-unhealthy", "gfd-h100-plugin-not-running", "gpuctl-h100"}),
    ],
)  # fmt: skip
def test_each_accelerator_lands_where_it_is(cli, real_cluster, tmp_path, text, limits, stems):
    docs, err = submitted(cli, job(tmp_path, text))
    pod = pod_of(docs)
    assert pod["containers"][0]["resources"]["limits"] == limits
    assert selected(pod) == stems
    resource = next(iter(limits))
    vendor_key = {
        "amd.com/gpu": "amd.com/gpu",
        "aws.amazon.com/neuron": "aws.amazon.com/neuron",
        "aws.amazon.com/neuroncore": "aws.amazon.com/neuron",
        "habana.ai/gaudi": "habana.ai/gaudi",
        "nvidia.com/gpu": "nvidia.com/gpu",
    }[resource]
    assert pod["tolerations"] == [{"key": vendor_key, "operator": "Exists", "effect": "NoSchedule"}]
    assert "can never fit" not in err and "fits no" not in err


def host(i: int, taint: bool = False) -> dict:
    """Host I of the corpus's TPU v5e 2x4 slice (its file is host 0); with GKE's TPU taint as
    its samples tolerate it (google.com/tpu NoSchedule) when TAINT."""
    node = copy.deepcopy(NODES["gke-tpu-v5e-2x4"])
    node["metadata"]["name"] = node["metadata"]["name"][:-1] + str(i)
    if taint:
        node["spec"] = {"taints": [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}]}  # fmt: skip
    return node


def test_a_tpu_v5e_2x4_slice_is_two_workers_of_four_chips_on_its_hosts(cli, real_cluster, tmp_path):
    seed(real_cluster, host(1))
    text = "accelerator: tpu-v5e\ntpu_topology: 2x4\nmultinode: indexed-job\n"
    docs, err = submitted(cli, job(tmp_path, text, "jax"))
    service, batch = docs
    assert service["spec"]["clusterIP"] == "None"
    spec = batch["spec"]
    # what GKE's webhook needs to inject TPU_WORKER_ID and TPU_WORKER_HOSTNAMES
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == "jax"
    assert pod["containers"][0]["resources"]["limits"] == {"google.com/tpu": "4"}
    assert selected(pod) == {"gke-tpu-v5e-2x4"}
    assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert "never" not in err
    js = cli("render", job(tmp_path, text.replace("indexed-job", "jobset"), "jax"), "-o", "json")
    (jobset,) = json.loads(js.out)["items"]
    replicated = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (replicated["completions"], replicated["parallelism"]) == (2, 2)


def test_both_hosts_of_a_slice_fit_and_their_taint_is_tolerated(cli, kube_api, tmp_path):
    seed(kube_api, host(0, taint=True), host(1, taint=True), NODES["neuron-trn2-karpenter"])
    r = cli("submit", job(tmp_path, "accelerator: tpu-v5e\ntpu_topology: 2x4\n"), "--dry-run")
    assert r.code == 0, r
    assert "never" not in r.err
    # a worker that does not tolerate it (a pod asking for another vendor's devices) would not
    # fit there: the fit reads the taint
    big = cli("submit", job(tmp_path, "accelerator: tpu-v5e\ntpu_topology: 4x4\n"), "--dry-run")
    assert big.code != 0 and "4 × 4 google.com/tpu" in big.err, big.err


def test_a_multi_node_trainium_job_gets_efa_and_its_environment(cli, tmp_path):
    text = (
        "accelerator: trainium2\ngpus: 16\nnodes: 2\nmultinode: indexed-job\n"
        "env: {FI_PROVIDER: sockets}\n"
    )
    r = cli("render", job(tmp_path, text, "llama"))
    assert r.code == 0, r
    docs = list(yaml.safe_load_all(r.out))
    container = pod_of(docs)["containers"][0]
    assert container["resources"]["limits"] == {
        "aws.amazon.com/neuron": "16",
        "vpc.amazonaws.com/efa": "16",  # what a trn2.48xlarge has
    }
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["FI_EFA_FORK_SAFE"] == "1"
    assert env["FI_PROVIDER"] == "sockets"  # the spec's own value wins


def test_what_never_fits_is_refused_in_one_line(cli, real_cluster, tmp_path):
    r = cli("submit", job(tmp_path, "accelerator: trainium2\ngpus: 32\n"))
    assert r.code != 0
    line = [x for x in r.err.splitlines() if "aws.amazon.com/neuron" in x]
    assert line and "32" in line[0], r.err
    r = cli("submit", job(tmp_path, "accelerator: mi300x\ngpus: 8\npartition: cpx_nps4\n"))
    assert r.code != 0 and "amd.com/cpx_nps4" in r.err


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("accelerator: [h100, mi300x]\n", "accelerator", "more than one vendor"),
        ("accelerator: mi300x\nmig: 1g.10gb\n", "mig", "NVIDIA's"),
        ("accelerator: trainium2\ntpu_topology: 2x4\n", "tpu_topology", "Google TPUs"),
        ("accelerator: tpu-v5e\ntpu_topology: 2x4\nnodes: 3\n", "nodes", "2 workers"),
        ("accelerator: tpu-v5e\ntpu_topology: 2x4\ngpus: 3\n", "gpus", "do not divide"),
        ("accelerator: trainium2\ngpus: 2\nneuron_cores: 8\n", "neuron_cores", "not both"),
        ("accelerator: h100\ngpu_type: h100\n", "gpu_type", "same as accelerator"),
        ("neuron_cores: 2\ngpu_type: h100\n", "neuron_cores", "Trainium"),
        ("accelerator: gaudi2\ngpus: 0\n", "gpus", "no device"),
        ("accelerator: mi300x\npartition: cpx_nps3\n", "partition", "cpx_nps4"),
        ("kind: Pod\naccelerator: tpu-v5e\ntpu_topology: 2x4\n", "tpu_topology", "kind Job"),
        (
            "accelerator: tpu-v5e\ntpu_topology: 2x4\ntpu_slices: 2\nmultinode: indexed-job\n",
            "multinode",
            "one Job per slice",
        ),
        ("accelerator: tpu-v5e\ntpu_slices: 2\n", "tpu_slices", "needs tpu_topology"),
        (
            "accelerator: tpu-v5e\ntpu_topology: 2x4\ntpu_slices: 2\nnodes: 2\n",
            "nodes",
            "× 2 slices",
        ),
        ("accelerator: gaudi2\nenv: {HABANA_VISIBLE_DEVICES: '0'}\n", "env", "device plugin"),
    ],
)
def test_bad_accelerator_specs_are_refused_naming_the_field(cli, tmp_path, text, field, words):
    r = cli("render", job(tmp_path, text))
    assert r.code == 2, r
    first = r.err.splitlines()[0]
    assert field in first and words in r.err, r.err


def test_jobs_why_reads_a_tpu_job_s_own_resource_and_affinity(cli, real_cluster, tmp_path):
    seed(real_cluster, host(1))
    r = cli("submit", job(tmp_path, "accelerator: tpu-v5e\ntpu_topology: 2x4\n", "jax"))
    assert r.code == 0, r
    d = json.loads(cli("jobs", "why", "jax", "-o", "json").out)
    assert (d["fit"]["resource"], d["fit"]["per_worker"]) == ("google.com/tpu", 4)
    fit = {n["name"]: n for n in d["fit"]["nodes"]}
    tpu = NODES["gke-tpu-v5e-2x4"]["metadata"]["name"]
    assert fit[tpu]["slots_ever"] == 1 and fit[tpu]["gpu_type"] == "TPU-v5e"
    assert set(fit) == {tpu, tpu[:-1] + "1"}  # only TPU nodes are the fit's to judge


def test_a_resource_quota_on_a_vendor_s_resource_refuses_what_would_exceed_it(
    cli, real_cluster, tmp_path
):
    # a team's ResourceQuota on Neuron devices, as on NVIDIA's: requests.<resource>
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "neuron", "namespace": "default"},
        "spec": {"hard": {"requests.aws.amazon.com/neuron": "8"}},
    }
    seed(real_cluster, quota)
    fits = cli("submit", job(tmp_path, "accelerator: trainium2\ngpus: 8\n"), "--dry-run")
    assert fits.code == 0, fits
    r = cli("submit", job(tmp_path, "accelerator: trainium2\ngpus: 16\n", "big"))
    assert r.code == 1, r
    assert "it requests 16 aws.amazon.com/neuron" in r.err and "quota neuron allows 8" in r.err


def test_multislice_is_a_jobset_of_one_job_per_slice_with_the_megascale_environment(cli, tmp_path):
    r = cli(
        "render",
        job(tmp_path, "accelerator: tpu-v6e\ntpu_topology: 2x4\ntpu_slices: 2\n", "ms"),
        "-o",
        "json",
    )
    assert r.code == 0, r
    (jobset,) = json.loads(r.out)["items"]
    assert jobset["kind"] == "JobSet"
    # each slice on a node pool of its own (xpk's annotation)
    assert jobset["metadata"]["annotations"] == {
        "alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"
    }
    (workers,) = jobset["spec"]["replicatedJobs"]
    assert workers["replicas"] == 2  # slices
    job_spec = workers["template"]["spec"]
    assert (job_spec["completions"], job_spec["parallelism"]) == (2, 2)  # hosts of a slice
    container = job_spec["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"google.com/tpu": "4"}
    env = {e["name"]: e for e in container["env"]}
    assert env["MEGASCALE_COORDINATOR_ADDRESS"]["value"] == "ms-workers-0-0.ms"
    assert env["MEGASCALE_NUM_SLICES"]["value"] == "2"
    assert env["MEGASCALE_SLICE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['jobset.sigs.k8s.io/job-index']"
    )
    assert "MASTER_ADDR" not in env  # torchrun's would name ranks within one slice only
    # one slice: no MEGASCALE, one replica
    one = cli(
        "render",
        job(tmp_path, "accelerator: tpu-v6e\ntpu_topology: 2x4\nmultinode: jobset\n", "one"),
        "-o",
        "json",
    )
    (single,) = json.loads(one.out)["items"]
    assert single["spec"]["replicatedJobs"][0]["replicas"] == 1
    assert "annotations" not in single["metadata"]
