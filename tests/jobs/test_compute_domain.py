"""Multi-node NVLink jobs (`compute_domain: true`) on GB200 trays in two NVLink cliques
(tests/data/computedomain, EKS p6e-gb200 as GFD labels them), through the API emulator with
NVIDIA's ComputeDomain CRD (gpuctl/sim/crds): the job's ComputeDomain first, each worker
claiming its IMEX channel beside its GPUs and kept within one clique; the fit and `jobs why`
count one clique's room; a cluster without the driver is told so before anything is made."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from tests import ROOT
from tests.crd_schema import assert_valid_cr
from tests.gpu_cluster import mark, seed
from tests.jobs.test_submit import write
from tests.k8s_schema import assert_valid as validate

pytestmark = pytest.mark.integration

with open(os.path.join(ROOT, "tests", "data", "computedomain", "eks-p6e-gb200.yaml")) as f:
    GB200 = [n for n in yaml.safe_load_all(f) if n]
A, B = "5f1c0e7a-3b9d-4c21-9a64-2d8e7f0b1c35.32766", "9b2d41f6-7e08-4a5c-b1d3-64f0a2c8e917.32766"


def spec(workers: int = 2, more: str = "") -> str:
    return f"name: train\nimage: x\ngpus: 4\nnodes: {workers}\ncompute_domain: true\nmultinode: indexed-job\n{more}"  # fmt: skip


@pytest.fixture
def cluster(kube, kube_api):
    kube.install_crds("ComputeDomain")
    seed(kube_api, *GB200)
    return kube


def test_render_gives_the_domain_first_and_each_worker_its_channel(cli, tmp_path):
    r = cli("render", write(tmp_path, spec(more="namespace: team-a\n")))
    assert r.code == 0, r
    domain, service, job = [d for d in yaml.safe_load_all(r.out) if d]
    assert_valid_cr(domain)  # NVIDIA's CRD (dra-driver-nvidia-gpu v0.4.1)
    assert (domain["kind"], domain["metadata"]["name"], domain["metadata"]["namespace"]) == ("ComputeDomain", "train", "team-a")  # fmt: skip
    assert domain["spec"] == {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "train-channel"}}}  # fmt: skip
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "compute-domain-channel", "resourceClaimTemplateName": "train-channel"}]  # fmt: skip
    resources = pod["containers"][0]["resources"]
    # the GPUs stay the device plugin's (as EKS's GB200 guide has it), the channel is DRA's
    assert resources == {"limits": {"nvidia.com/gpu": "4"}, "claims": [{"name": "compute-domain-channel"}]}  # fmt: skip
    (together,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert together == {"labelSelector": {"matchLabels": {"gpuctl.io/job": "train"}}, "topologyKey": "nvidia.com/gpu.clique"}  # fmt: skip
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]  # fmt: skip
    assert terms and all({"key": "nvidia.com/gpu.clique", "operator": "Exists"} in t["matchExpressions"] for t in terms)  # fmt: skip
    validate(job)


def test_gpus_claimed_through_dra_keep_both_claims(cli, tmp_path):
    r = cli("render", write(tmp_path, spec()), "--allocation", "dra")
    assert r.code == 0, r
    template, domain, _, job = [d for d in yaml.safe_load_all(r.out) if d]
    assert (template["kind"], domain["kind"]) == ("ResourceClaimTemplate", "ComputeDomain")
    pod = job["spec"]["template"]["spec"]
    assert [c["resourceClaimTemplateName"] for c in pod["resourceClaims"]] == ["train-gpu", "train-channel"]  # fmt: skip
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "gpu"}, {"name": "compute-domain-channel"}]  # fmt: skip
    validate(job)


def test_a_jobset_worker_claims_the_channel_too(cli, tmp_path):
    r = cli("render", write(tmp_path, spec().replace("indexed-job", "jobset")))
    assert r.code == 0, r
    domain, jobset = [d for d in yaml.safe_load_all(r.out) if d]
    assert_valid_cr(jobset)
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == "train-channel"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (spec(1), "compute_domain: needs a multi-node job (nodes ≥ 2)"),
        (
            spec(more="mig: 1g.23gb\n").replace("gpus: 4\n", ""),
            "compute_domain: joins whole NVIDIA GPUs",
        ),  # fmt: skip
    ],
)
def test_what_a_compute_domain_cannot_be(cli, tmp_path, text, message):
    r = cli("render", write(tmp_path, text))
    assert r.code == 2 and message in r.err, r


def test_submit_creates_the_domain_and_kubectl_reads_it(cli, cluster, kubectl, tmp_path):
    r = cli("submit", write(tmp_path, spec()), "--yes")
    assert r.code == 0, r
    domain = json.loads(kubectl("get", "computedomains.resource.nvidia.com", "train", "-o", "json").stdout)  # fmt: skip
    assert domain["spec"]["channel"]["resourceClaimTemplate"]["name"] == "train-channel"
    kubectl("get", "job", "train")
    r = cli("jobs", "delete", "train", "--yes")
    assert r.code == 0 and "ComputeDomain/train" in r.out + r.err, r
    assert kubectl("get", "computedomains.resource.nvidia.com", "-o", "name").stdout.strip() == ""


def test_a_role_that_cannot_list_domains_still_deletes_its_jobs(cli, cluster, tmp_path):
    assert cli("submit", write(tmp_path, "name: plain\nimage: x\ngpus: 4\n"), "--yes").code == 0
    path = "get /apis/resource.nvidia.com/v1beta1/namespaces/default/computedomains"
    cluster.call(lambda: cluster.emulator[path] << 403)
    r = cli("jobs", "delete", "plain", "--yes")
    assert r.code == 0 and "Job/plain" in r.out + r.err, r


def test_workers_fit_only_within_one_clique(cli, cluster, tmp_path):
    since = mark(cluster)
    r = cli("submit", write(tmp_path, spec(3)), "--dry-run")
    # three trays, but the largest clique has two: never, in one line
    assert r.code == 1, r
    line = next(line for line in r.err.splitlines() if "can never fit" in line)
    assert "within one NVLink clique (nvidia.com/gpu.clique)" in line
    assert f"{A}: 2" in line and f"{B}: 1" in line
    assert not [m for m, *_ in cluster.requests()[since:] if m in ("POST", "PATCH", "PUT")]
    r = cli("submit", write(tmp_path, spec(2)), "--dry-run")
    assert r.code == 0 and "can never fit" not in r.err, r


def test_a_cluster_without_the_driver_is_told_so(cli, kube, kube_api, tmp_path):
    seed(kube_api, *GB200)
    since = mark(kube)
    r = cli("submit", write(tmp_path, spec()), "--yes")
    assert r.code == 1 and "serves no resource.nvidia.com/v1beta1 API" in r.err, r
    assert "resources.computeDomains.enabled=true" in r.err
    assert not [m for m, *_ in kube.requests()[since:] if m in ("POST", "PATCH", "PUT")]


def test_jobs_why_counts_one_clique(cli, cluster, kube_api, tmp_path):
    r = cli("submit", write(tmp_path, spec(2)), "--yes")
    assert r.code == 0, r
    # another job takes a tray of the two-tray clique: this one waits, it is not refused
    seed(kube_api, _running_pod("ip-10-0-1-11.ec2.internal"))
    d = json.loads(cli("jobs", "why", "train", "-o", "json").out)
    fit = d["fit"]
    assert (fit["fits_now"], fit["can_ever_fit"]) == (False, True)
    (other,) = [n for n in fit["nodes"] if n["name"] == "ip-10-0-2-21.ec2.internal"]
    assert other["slots_ever"] == 0 and other["reason"] == f"in clique {B}, not {A}"


def test_jobs_why_says_what_the_domain_waits_for(cli, cluster, kubectl, tmp_path):
    assert cli("submit", write(tmp_path, spec(2)), "--yes").code == 0
    # no driver here: no controller made the channel's template, no IMEX daemon joined
    d = json.loads(cli("jobs", "why", "train", "-o", "json").out)
    assert d["compute_domain"] == [
        "ComputeDomain train: NotReady, no node's IMEX daemon has joined it yet",
        "ComputeDomain train: its channel ResourceClaimTemplate train-channel does not exist, "
        "and the workers wait for it: the DRA driver's compute-domain controller makes it "
        "(is it running?)",
    ]
    # what the driver writes: the template (templates/compute-domain-workload-claim-template
    # .tmpl.yaml, less its opaque config) and one daemon's status
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "train-channel", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "channel", "exactly": {
                    "deviceClassName": "compute-domain-default-channel.nvidia.com"}}]}}}}  # fmt: skip
    kubectl("apply", "-f", "-", stdin=json.dumps(template))
    node = {"name": "ip-10-0-1-11.ec2.internal", "ipAddress": "10.0.1.11", "cliqueID": A, "index": 0, "status": "Ready"}  # fmt: skip
    status = {"status": {"status": "NotReady", "nodes": [node]}}
    kubectl("patch", "computedomains.resource.nvidia.com", "train", "--subresource=status", "--type=merge", "-p", json.dumps(status))  # fmt: skip
    d = json.loads(cli("jobs", "why", "train", "-o", "json").out)
    assert d["compute_domain"] == ["ComputeDomain train: NotReady, 1 of 1 nodes' IMEX daemons ready"]  # fmt: skip


def _running_pod(node: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "other", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
            ],  # fmt: skip
        },
        "status": {"phase": "Running"},
    }


with open(os.path.join(ROOT, "tests", "data", "computedomain", "slices.yaml")) as f:
    CHANNELS = [s for s in yaml.safe_load_all(f) if s]  # the driver's kubelet plugin, per tray
with open(os.path.join(ROOT, "tests", "data", "computedomain", "classes.yaml")) as f:
    CHANNEL_CLASSES = [c for c in yaml.safe_load_all(f) if c]
NVLINK = "name: train\nimage: x\ngpus: 4\nnodes: 2\nmultinode: indexed-job\ntopology: {within: nvlink}\n"  # fmt: skip
CLIQUE_TERM = {"labelSelector": {"matchLabels": {"gpuctl.io/job": "train"}}, "topologyKey": "nvidia.com/gpu.clique"}  # fmt: skip


def _together(pod: dict) -> list:
    return pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]


def test_within_nvlink_on_dra_managed_trays_is_a_compute_domain(cli, cluster, kube_api, kubectl, tmp_path):  # fmt: skip
    seed(kube_api, *CHANNEL_CLASSES, *CHANNELS)
    r = cli("submit", write(tmp_path, NVLINK), "--yes")
    assert r.code == 0, r
    assert "sharing NVLink through ComputeDomain train" in " ".join(r.err.split())
    domain = json.loads(kubectl("get", "computedomains.resource.nvidia.com", "train", "-o", "json").stdout)  # fmt: skip
    assert domain["spec"]["numNodes"] == 2
    # the pod as the API server keeps it: one clique affinity, not the topology's and the domain's
    job = json.loads(kubectl("get", "job", "train", "-o", "json").stdout)
    pod = job["spec"]["template"]["spec"]
    assert _together(pod) == [CLIQUE_TERM]
    assert pod["resourceClaims"] == [{"name": "compute-domain-channel", "resourceClaimTemplateName": "train-channel"}]  # fmt: skip


def test_within_nvlink_without_the_drivers_trays_is_pod_affinity_only(cli, cluster, tmp_path):
    # ComputeDomains served, but no tray publishes the driver's channels: no domain
    r = cli("submit", write(tmp_path, NVLINK), "--dry-run", "-o", "yaml")
    assert r.code == 0, r
    (service, job) = [d for d in yaml.safe_load_all(r.out) if d]
    assert (service["kind"], job["kind"]) == ("Service", "Job")
    assert _together(job["spec"]["template"]["spec"]) == [CLIQUE_TERM]
    assert "resourceClaims" not in job["spec"]["template"]["spec"]


def test_a_spec_with_both_renders_the_clique_affinity_once(cli, tmp_path):
    r = cli("render", write(tmp_path, spec(more="topology: {within: nvlink}\n")))
    assert r.code == 0, r
    _, _, job = [d for d in yaml.safe_load_all(r.out) if d]
    assert _together(job["spec"]["template"]["spec"]) == [CLIQUE_TERM]
    validate(job)
    r = cli("render", write(tmp_path, NVLINK))
    assert "submit adds a ComputeDomain where the cluster serves them" in " ".join(r.err.split())
