"""Jobs asking for GPUs on a cluster whose GPU nodes are DRA-managed (real ResourceSlices and
the drivers' DeviceClasses, tests/data/dra) beside a device-plugin H100 node, through the
API emulator: claims where only DRA offers the GPU, the plain limit where a device plugin
does, selectors that pick only that model, the fit counted from the devices claims hold, and
what never fits refused in one line. Every resource.k8s.io object rendered validates against
the upstream schema (kubernetes-validate)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.gpu_cluster import mark, node, seed
from tests.gpus.test_dra import AKS, AMD, CLASSES, SLICES, T4, allocated, as_v1
from tests.jobs.test_submit import write
from tests.k8s_schema import assert_valid as validate
from tests.node_corpus import corpus

pytestmark = pytest.mark.integration

H100 = corpus()["gfd-h100"]


@pytest.fixture
def cluster(kube, kube_api):
    seed(kube_api, H100, *(node(n, 0, gfd=False) for n in (AKS, T4, AMD)))
    seed(kube_api, *CLASSES, *map(as_v1, SLICES))
    return kube


def dry_run(cli, tmp_path, spec: str, *args: str):
    r = cli("submit", write(tmp_path, "name: train\nimage: x\n" + spec), "--dry-run", "-o", "yaml", *args)  # fmt: skip
    return r, [d for d in yaml.safe_load_all(r.out) if d] if r.code == 0 else []


def test_a_model_only_dra_offers_is_claimed_and_fits_there(cli, cluster, tmp_path):
    r, objects = dry_run(cli, tmp_path, "gpus: 2\ngpu_type: t4\n")
    assert r.code == 0, r
    template, job = objects
    assert (
        template["kind"] == "ResourceClaimTemplate" and template["metadata"]["name"] == "train-gpu"
    )
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert request["exactly"]["count"] == 2
    (selector,) = request["exactly"]["selectors"]
    # the product name as the cluster's devices publish it
    assert (
        selector["cel"]["expression"]
        == "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "train-gpu"}]
    assert pod["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert "nodeAffinity" not in json.dumps(pod)  # the selectors choose the devices
    assert "can never fit" not in r.err and "No room right now" not in r.err  # it fits now
    for obj in objects:
        validate(obj)


def test_a_model_a_device_plugin_offers_renders_as_today(cli, cluster, tmp_path):
    r, (job,) = dry_run(cli, tmp_path, "gpus: 2\ngpu_type: h100\n")
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}  # fmt: skip
    r, objects = dry_run(cli, tmp_path, "gpus: 2\ngpu_type: h100\n", "--allocation", "dra")
    assert r.code == 1 and "can never fit" in r.err, r  # no H100 is a DRA device here


def test_mig_through_the_mig_class_and_its_profile(cli, cluster, kube_api, tmp_path):
    r, objects = dry_run(cli, tmp_path, "mig: 1g.10gb\ngpu_type: a100\n")
    assert r.code == 0, r
    request = objects[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == "mig.nvidia.com"
    assert [s["cel"]["expression"] for s in request["selectors"]] == [
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100 80GB PCIe'",
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
    ]
    assert "can never fit" not in r.err and "No room right now" not in r.err


def test_several_models_become_first_available_subrequests(cli, cluster, tmp_path):
    r, objects = dry_run(cli, tmp_path, "gpus: 1\ngpu_type: [a100, t4]\n", "--allocation", "dra")
    assert r.code == 0, r
    (request,) = objects[0]["spec"]["spec"]["devices"]["requests"]
    assert [(s["name"], s["deviceClassName"], s["count"]) for s in request["firstAvailable"]] == [
        ("a100", "gpu.nvidia.com", 1), ("t4", "gpu.nvidia.com", 1),
    ]  # fmt: skip
    validate(objects[0])


def test_sharing_through_the_driver_s_opaque_config(cli, cluster, tmp_path):
    r, objects = dry_run(cli, tmp_path, "gpus: 1\nshared: true\ngpu_type: t4\n")
    assert r.code == 0, r
    (config,) = objects[0]["spec"]["spec"]["devices"]["config"]
    assert config["opaque"]["driver"] == "gpu.nvidia.com"
    assert config["opaque"]["parameters"]["kind"] == "GpuConfig"
    assert config["opaque"]["parameters"]["sharing"]["strategy"] == "TimeSlicing"
    validate(objects[0])


def test_never_fits_and_not_now_stay_apart(cli, cluster, kube_api, tmp_path):
    since = mark(cluster)
    r, _ = dry_run(cli, tmp_path, "gpus: 4\ngpu_type: t4\n")
    assert r.code == 1, r
    line = next(line for line in r.err.splitlines() if "can never fit" in line)
    # the class, the selector and what the nodes have, in one line
    assert (
        "gpu.nvidia.com where device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'" in line
    )
    assert "2 Tesla T4 (gpu.nvidia.com)" in line and "1g.10gb (mig.nvidia.com)" in line
    assert not [m for m, *_ in cluster.requests()[since:] if m in ("POST", "PATCH", "PUT")]
    seed(kube_api, allocated("default", "held", ("gpu.nvidia.com", T4, "gpu-0")))
    r, _ = dry_run(cli, tmp_path, "gpus: 2\ngpu_type: t4\n")
    assert r.code == 0 and "can never fit" not in r.err, r
    assert "1 of 2 matching devices free, a worker claims 2" in r.err


def test_submit_creates_the_claim_template_first(cli, cluster, kubectl, tmp_path):
    r = cli("submit", write(tmp_path, "name: train\nimage: x\ngpus: 1\ngpu_type: t4\n"), "--yes")
    assert r.code == 0, r
    template = json.loads(kubectl("get", "resourceclaimtemplate", "train-gpu", "-o", "json").stdout)
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    kubectl("get", "job", "train")


def test_an_offline_render_says_which_allocation_it_assumed(cli, tmp_path):
    path = write(tmp_path, "name: train\nimage: x\ngpus: 1\n")
    r = cli("render", path)
    assert r.code == 0 and "as the device plugin's nvidia.com/gpu (no cluster read" in r.err, r
    r = cli("render", path, "--allocation", "dra")
    assert "kind: ResourceClaimTemplate" in r.out and "through DRA" in r.err
    r = cli("render", path, "--allocation", "plenty")
    assert r.code == 2 and "not one of auto, device-plugin, dra" in r.err


def test_jobs_why_counts_the_devices_its_claims_can_take(cli, cluster, kube_api, tmp_path):
    r = cli("submit", write(tmp_path, "name: train\nimage: x\ngpus: 2\ngpu_type: t4\n"), "--yes")
    assert r.code == 0, r
    seed(kube_api, allocated("default", "other", ("gpu.nvidia.com", T4, "gpu-1")))
    d = json.loads(cli("jobs", "why", "train", "-o", "json").out)
    fit = d["fit"]
    assert (fit["per_worker"], fit["fits_now"], fit["can_ever_fit"]) == (2, False, True)
    (t4,) = [n for n in fit["nodes"] if n["name"] == T4]
    assert (t4["allocatable"], t4["free"], t4["reason"]) == (2, 1, "1 of 2 matching devices free, a worker claims 2")  # fmt: skip
    assert fit["resource"].startswith("devices of gpu.nvidia.com where")


def test_the_quota_check_charges_the_claim_s_devices_to_their_class(cli, cluster, kube_api, tmp_path):  # fmt: skip
    """A ResourceQuota on gpu.nvidia.com's devices refuses a job whose claims would exceed it
    (as the API server would refuse the claims, leaving pods pending); a plain limit a class
    maps (KEP-5004) is charged there too, by the claim kube-scheduler makes."""
    gpus_key = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    quota = {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "dra", "namespace": "default"},
        "spec": {"hard": {gpus_key: "1"}},
    }  # fmt: skip
    seed(kube_api, quota)
    r, _ = dry_run(cli, tmp_path, "gpus: 2\ngpu_type: t4\n")
    assert (
        r.code == 1 and f"it requests 2 {gpus_key}, 0 are used and quota dra allows 1" in r.err
    ), r
    assert "gpuctl quota set default --gpus N" in r.err
    r, _ = dry_run(cli, tmp_path, "gpus: 2\n", "--allocation", "dra")  # the plain nvidia.com/gpu
    assert r.code == 1 and f"it requests 2 {gpus_key}" in r.err, r
    r, _ = dry_run(cli, tmp_path, "gpus: 1\ngpu_type: t4\n")
    assert r.code == 0, r
