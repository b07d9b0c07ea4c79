"""`gpuctl nodes` on a cluster whose GPU nodes are DRA-managed, beside device-plugin nodes:
real ResourceSlices and the drivers' DeviceClasses (tests/data/dra) in the API emulator,
claims allocating some devices, through the official client; kubectl reads the same DRA
objects, as from a real API server."""

from __future__ import annotations

import json

import pytest

from gpuctl.sim.kube import KubeEmulator, write_kubeconfig
from tests.gpu_cluster import node, pod, seed
from tests.gpus.test_dra import AKS, AMD, CLASSES, GAUDI, MI300X, SLICES, T4, TRN2, allocated, as_v1
from tests.node_corpus import corpus

pytestmark = pytest.mark.integration

H100 = corpus()["gfd-h100"]


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


@pytest.fixture
def cluster(kube, kube_api):
    # DRA nodes carry no accelerator resource and no GPU label of their own
    dra_nodes = (AKS, T4, AMD, MI300X, GAUDI, TRN2)
    seed(kube_api, namespace("ml"), H100, *(node(n, 0, gfd=False) for n in dra_nodes))
    seed(
        kube_api,
        *CLASSES,
        *map(as_v1, SLICES),
        pod("train-0", "ml", 3, node_name=H100["metadata"]["name"]),
    )
    seed(kube_api, allocated("ml", "mig-0", ("gpu.nvidia.com", AKS, "gpu-0-mig-19-2-1")))
    return kube


def listed(cli, *args: str) -> dict[str, dict]:
    r = cli("nodes", "-o", "json", *args)
    assert r.code == 0, r
    return {n["name"]: n for n in json.loads(r.out)["nodes"]}


def test_dra_devices_beside_device_plugin_nodes(cli, cluster):
    found = listed(cli)
    assert set(found) == {H100["metadata"]["name"], AKS, T4, AMD, MI300X, GAUDI, TRN2}
    (h100,) = found[H100["metadata"]["name"]]["accelerators"]
    assert (h100["source"], h100["resource"], h100["allocated"]) == ("device-plugin", "nvidia.com/gpu", 3)  # fmt: skip
    mig, whole = found[AKS]["accelerators"]
    assert {k: mig[k] for k in ("source", "device_class", "driver", "model", "partition", "count", "allocated", "free", "resource")} == {  # fmt: skip
        "source": "dra", "device_class": "mig.nvidia.com", "driver": "gpu.nvidia.com",
        "model": "A100-80GB", "partition": "1g.10gb", "count": 2, "allocated": 1, "free": 1,
        "resource": None,
    }  # fmt: skip
    assert mig["devices"] == ["gpu-0-mig-19-2-1", "gpu-0-mig-19-3-1"]
    assert (whole["device_class"], whole["devices"], whole["memory_bytes"]) == ("gpu.nvidia.com", ["gpu-0"], 80 << 30)  # fmt: skip
    assert "is published whole and as 2 MIG device(s)" in found[AKS]["problems"][0]
    (t4,) = found[T4]["accelerators"]
    assert (t4["model"], t4["count"], t4["free"]) == ("T4", 2, 2)
    (amd,) = found[AMD]["accelerators"]
    assert (amd["vendor"], amd["model"], amd["partition"], amd["device_class"]) == (
        "amd",
        "MI300X",
        "dpx_nps1",
        "gpu.amd.com",
    )
    # every vendor's devices, named from its driver's attributes
    named = {
        n: [(a["vendor"], a["model"], a["count"], a["free"], a["memory_bytes"], a["device_class"]) for a in found[n]["accelerators"]]
        for n in (MI300X, GAUDI, TRN2)
    }  # fmt: skip
    assert named == {
        MI300X: [("amd", "MI300X", 8, 8, 196592 << 20, "gpu.amd.com")],
        GAUDI: [("intel", "Gaudi2", 8, 8, 96 << 30, "gaudi.intel.com")],
        TRN2: [("aws", "Trainium2", 16, 16, 96 << 30, "neuron.aws.com")],
    }


def test_the_table_names_the_device_class(cli, cluster):
    r = cli("nodes", "-l", "kubernetes.io/hostname!=x")
    assert r.code == 0, r
    line = next(line for line in r.out.splitlines() if line.startswith(T4))
    assert line.split()[1:] == ["nvidia", "T4", "2", "0", "2", "dra", "gpu.nvidia.com"]
    assert f"{AKS}: gpu-0 (GPU-ddf64803-f421-0e5b-883e-cd752de16db7) is published whole" in r.err


def test_a_node_through_both_sources_is_a_problem(cli, kube, kube_api):
    both = node(T4, 2)  # the device plugin still advertises the GPUs DRA publishes
    seed(kube_api, both, *CLASSES, *map(as_v1, SLICES))
    found = listed(cli)
    assert found[T4]["problems"] == [
        "nvidia.com/gpu from both the device plugin and DRA (gpu.nvidia.com)"
    ]
    assert [a["source"] for a in found[T4]["accelerators"]] == ["device-plugin", "dra"]


def test_an_older_cluster_s_v1beta1_dra_is_read(cli, tmp_path, monkeypatch):
    """Kubernetes 1.32/1.33: resource.k8s.io v1beta1 only, devices nested under `basic:`."""
    from kubernetes import client

    emu = KubeEmulator(dra=("v1beta1",)).start()
    try:
        monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kc", emu.url))
        cfg = client.Configuration()
        cfg.host = emu.url
        with client.ApiClient(cfg) as api:
            old = [{**c, "apiVersion": "resource.k8s.io/v1beta1"} for c in CLASSES]
            (amd,) = [s for s in SLICES if s["apiVersion"] == "resource.k8s.io/v1beta1"]
            seed(api, node(AMD, 0, gfd=False), *old, amd)
        (row,) = listed(cli)[AMD]["accelerators"]
        assert (row["device_class"], row["partition"], row["memory_bytes"]) == ("gpu.amd.com", "dpx_nps1", 98296 << 20)  # fmt: skip
        assert ("/apis/resource.k8s.io/v1beta1/resourceslices", {}) in [(p, q) for _, p, q in emu.requests()]  # fmt: skip
    finally:
        emu.stop()


def test_without_dra_nothing_more_is_asked(cli, tmp_path, monkeypatch):
    from kubernetes import client

    emu = KubeEmulator(dra=()).start()
    try:
        monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kc", emu.url))
        cfg = client.Configuration()
        cfg.host = emu.url
        with client.ApiClient(cfg) as api:
            seed(api, H100)
        assert list(listed(cli)) == [H100["metadata"]["name"]]
        assert not [p for _, p, _ in emu.requests() if "resource.k8s.io" in p]
    finally:
        emu.stop()


def test_kubectl_reads_the_emulator_s_dra_objects(cli, cluster, kubectl):
    slices = json.loads(kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    assert sorted(s["spec"]["nodeName"] for s in slices) == sorted([AKS, T4, AMD, MI300X, GAUDI, TRN2])  # fmt: skip
    classes = sorted(kubectl("get", "deviceclasses", "-o", "name").stdout.split())
    assert classes == [f"deviceclass.resource.k8s.io/{c}" for c in ("gaudi.intel.com", "gpu.amd.com", "gpu.nvidia.com", "mig.nvidia.com", "neuron.aws.com")]  # fmt: skip
    claims = json.loads(kubectl("get", "resourceclaims", "-n", "ml", "-o", "json").stdout)["items"]
    assert (
        claims[0]["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0-mig-19-2-1"
    )
    kubectl("patch", "resourceclaim", "mig-0", "-n", "ml", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"allocation": None}}))  # fmt: skip
    (mig, _) = listed(cli)[AKS]["accelerators"]
    assert mig["allocated"] == 0  # the claim's allocation gone (as on release), the device free
    kubectl("delete", "resourceclaim", "mig-0", "-n", "ml")
    assert kubectl("get", "resourceclaims", "-A", "-o", "name").stdout == ""
