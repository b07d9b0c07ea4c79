"""Every vendor's accelerators through DRA, through the API emulator: a cluster of ResourceSlices
from NVIDIA's, AMD's, Intel's Gaudi and AWS's Neuron drivers (tests/data/dra, each file citing
its source) beside a device-plugin H100 node. A spec for each model is claimed with that
vendor's DeviceClass and selectors on its driver's attributes, fits exactly on the node that
has the model (`jobs why` reads the claim back), and what can never fit is refused in one
line. Every claim template rendered validates against the upstream schema."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.gpu_cluster import mark, node, seed
from tests.gpus.test_dra import AKS, AMD, CLASSES, GAUDI, MI300X, SLICES, T4, TRN2, allocated, as_v1
from tests.jobs.test_submit import write
from tests.k8s_schema import assert_valid as validate
from tests.node_corpus import corpus

pytestmark = pytest.mark.integration

H100 = corpus()["gfd-h100"]
AMD_GPU = "device.attributes['gpu.amd.com']"
# spec → the claim's class, its selectors, the devices a worker claims, the one node it fits on
CASES = {
    "t4": ("gpus: 2\ngpu_type: t4\n", "gpu.nvidia.com",
           ["device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"], 2, T4),
    "a100-mig": ("mig: 1g.10gb\ngpu_type: a100\n", "mig.nvidia.com",
                 ["device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100 80GB PCIe'",
                  "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"], 1, AKS),
    "mi300x": ("accelerator: mi300x\ngpus: 8\n", "gpu.amd.com",
               [f"{AMD_GPU}.productName == 'AMD_Instinct_MI300X_OAM'", f"{AMD_GPU}.type == 'amdgpu'"],
               8, MI300X),
    "mi300x-dpx": ("accelerator: mi300x\npartition: dpx_nps1\ngpus: 1\n", "gpu.amd.com",
                   [f"{AMD_GPU}.productName == 'AMD_Instinct_MI300X_OAM'",
                    f"{AMD_GPU}.type == 'amdgpu-partition' && {AMD_GPU}.partitionProfile == 'dpx_nps1'"],
                   1, AMD),
    "gaudi2": ("accelerator: gaudi2\ngpus: 8\n", "gaudi.intel.com",
               ["device.attributes['gaudi.intel.com'].model == 'Gaudi2'"], 8, GAUDI),
    "trainium2": ("accelerator: trainium2\ngpus: 16\n", "neuron.aws.com",
                  ["device.attributes['neuron.aws.com'].instanceType == 'trn2.48xlarge'"], 16, TRN2),
}  # fmt: skip
TAINTS = {"gpu.nvidia.com": "nvidia.com/gpu", "mig.nvidia.com": "nvidia.com/gpu",
          "gpu.amd.com": "amd.com/gpu", "gaudi.intel.com": "habana.ai/gaudi",
          "neuron.aws.com": "aws.amazon.com/neuron"}  # fmt: skip


@pytest.fixture
def cluster(kube, kube_api):
    # DRA nodes carry no accelerator resource and no accelerator label of their own
    dra_nodes = (AKS, T4, AMD, MI300X, GAUDI, TRN2)
    seed(kube_api, H100, *(node(n, 0, gfd=False) for n in dra_nodes))
    seed(kube_api, *CLASSES, *map(as_v1, SLICES))
    return kube


def dry_run(cli, tmp_path, spec: str, *args: str):
    r = cli("submit", write(tmp_path, "name: train\nimage: x\n" + spec), "--dry-run", "-o", "yaml", *args)  # fmt: skip
    return r, [d for d in yaml.safe_load_all(r.out) if d] if r.code == 0 else []


@pytest.mark.parametrize("case", list(CASES))
def test_each_model_is_claimed_with_its_vendor_s_class_and_fits_only_where_it_is(
    cli, cluster, kubectl, tmp_path, case
):
    spec, device_class, selectors, count, where = CASES[case]
    name = f"train-{case}"
    r = cli("submit", write(tmp_path, f"name: {name}\nimage: x\n{spec}"), "--yes")
    assert r.code == 0, r
    assert "can never fit" not in r.err and "No room right now" not in r.err, r
    got = kubectl("get", "resourceclaimtemplate", f"{name}-gpu", "-o", "json").stdout
    template = json.loads(got)
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    exactly = request["exactly"]
    assert (exactly["deviceClassName"], exactly["count"]) == (device_class, count)
    assert [s["cel"]["expression"] for s in exactly["selectors"]] == selectors
    job = json.loads(kubectl("get", "job", name, "-o", "json").stdout)
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": f"{name}-gpu"}]
    # the worker tolerates its vendor's accelerator taint
    assert {"key": TAINTS[device_class], "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]  # fmt: skip
    d = json.loads(cli("jobs", "why", name, "-o", "json").out)
    fits = {n["name"] for n in d["fit"]["nodes"] if n["slots_ever"] > 0}
    assert fits == {where}, d["fit"]
    assert d["fit"]["fits_now"], d["fit"]
    r, objects = dry_run(cli, tmp_path, spec)
    for obj in objects:
        validate(obj)


def test_what_never_fits_is_refused_in_one_line_and_not_now_apart(cli, cluster, kube_api, tmp_path):
    since = mark(cluster)
    r, _ = dry_run(cli, tmp_path, "accelerator: gaudi3\ngpus: 1\n", "--allocation", "dra")
    assert r.code == 1, r
    (line,) = [line for line in r.err.splitlines() if "can never fit" in line]
    assert "gaudi.intel.com where device.attributes['gaudi.intel.com'].model == 'Gaudi3'" in line
    assert "8 Gaudi2 (gaudi.intel.com)" in line and "16 trn2.48xlarge (neuron.aws.com)" in line
    assert not [m for m, *_ in cluster.requests()[since:] if m in ("POST", "PATCH", "PUT")]
    seed(kube_api, allocated("default", "held", ("gaudi.intel.com", GAUDI, "0000-19-00-0-0x1020")))
    r, _ = dry_run(cli, tmp_path, "accelerator: gaudi2\ngpus: 8\n")
    assert r.code == 0 and "can never fit" not in r.err, r
    assert "7 of 8 matching devices free, a worker claims 8" in r.err


def test_a_device_plugin_s_model_stays_with_it_unless_dra_is_asked_for(cli, cluster, kube_api, tmp_path):  # fmt: skip
    seed(kube_api, corpus()["amd-mi300x-labeller"])
    r, objects = dry_run(cli, tmp_path, "accelerator: mi300x\ngpus: 1\n")
    assert r.code == 0, r
    (job,) = objects
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"amd.com/gpu": "1"}  # fmt: skip
    r, objects = dry_run(cli, tmp_path, "accelerator: mi300x\ngpus: 1\n", "--allocation", "dra")
    assert r.code == 0 and objects[0]["kind"] == "ResourceClaimTemplate", r
    # NeuronCores are set through the driver's opaque configuration: they stay with the device plugin
    path = write(tmp_path, "name: train\nimage: x\naccelerator: trainium2\nneuron_cores: 8\n")
    r = cli("render", path, "--allocation", "dra")
    assert r.code == 0 and "ResourceClaimTemplate" not in r.out, r
    (job,) = [d for d in yaml.safe_load_all(r.out) if d]
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"aws.amazon.com/neuroncore": "8"}


def test_an_offline_render_selects_the_model_by_what_its_driver_publishes(cli, tmp_path):
    path = write(tmp_path, "name: train\nimage: x\naccelerator: mi250\ngpus: 1\n")
    r = cli("render", path, "--allocation", "dra")
    assert r.code == 0, r
    template = next(d for d in yaml.safe_load_all(r.out) if d and d["kind"] == "ResourceClaimTemplate")  # fmt: skip
    validate(template)
    (selector, form) = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"]
    # MI250 is matched in AMD's product names, never MI250X
    assert (
        selector["cel"]["expression"] == f"{AMD_GPU}.productName.matches('MI250([^0-9A-Za-z]|$)')"
    )
    assert form["cel"]["expression"] == f"{AMD_GPU}.type == 'amdgpu'"
    r = cli("render", path)
    assert "as the device plugin's amd.com/gpu (no cluster read" in r.err, r
