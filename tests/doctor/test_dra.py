"""`gpuctl doctor` on a cluster whose GPU nodes are DRA-managed (real ResourceSlices and the
drivers' DeviceClasses, tests/data/dra) beside a device-plugin H100 node, through the API
emulator: the devices counted, the classes that select them, the kubelet plugins, both
sources on one node, and Kueue's charging of DRA devices."""

from __future__ import annotations

import json

import pytest

from tests.doctor.test_queues import KUEUE, UPSTREAM_CONFIG
from tests.gpu_cluster import node, seed
from tests.gpus import test_dra
from tests.gpus.test_dra import AKS, AMD, T4, as_v1
from tests.node_corpus import corpus

pytestmark = pytest.mark.integration

# NVIDIA's slices and an AMD partition's (the other vendors' are gpuctl nodes' and the fit's)
SLICES = [s for s in test_dra.SLICES if s["spec"]["nodeName"] in (AKS, T4, AMD)]
CLASSES = [c for c in test_dra.CLASSES if c["metadata"]["name"].endswith(("nvidia.com", "amd.com"))]

H100 = corpus()["gfd-h100"]


def kubelet_plugin(name: str, namespace: str, ready: int, desired: int) -> dict:
    """A DRA driver's kubelet plugin DaemonSet (dra-driver-nvidia-gpu's chart names it
    <release>-kubelet-plugin), with the status its controller writes."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "plugin", "image": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"}]},
            },
        },
        "status": {"desiredNumberScheduled": desired, "numberReady": ready, "currentNumberScheduled": desired, "numberMisscheduled": 0},
    }  # fmt: skip


def checks_of(cli) -> tuple:
    r = cli("doctor", "-o", "json")
    return r, {c["name"]: c for c in json.loads(r.out)["checks"]}


def test_a_dra_cluster_s_devices_classes_and_plugins(cli, kube, kube_api):
    seed(kube_api, H100, *(node(n, 0, gfd=False) for n in (AKS, T4, AMD)), *CLASSES, *map(as_v1, SLICES))  # fmt: skip
    seed(kube_api, kubelet_plugin("nvidia-dra-driver-gpu-kubelet-plugin", "nvidia-dra-driver-gpu", 2, 2))  # fmt: skip
    r, checks = checks_of(cli)
    assert "3 node(s) with 6 device(s) through DRA" in checks["gpu-nodes"]["detail"]
    assert checks["dra"] == {
        "name": "dra", "status": "pass", "fix": "",
        "detail": "resource.k8s.io/v1: gpu.amd.com: 1 device(s) on 1 node(s), gpu.nvidia.com: 5 device(s) on 2 node(s)",
    }  # fmt: skip
    assert checks["dra-classes"]["status"] == "pass"
    assert checks["dra-kubelet-plugin"]["status"] == "pass"
    assert checks["dra-and-device-plugin"]["status"] == "pass"


def test_what_is_wrong_is_named(cli, kube, kube_api):
    amd_less = [c for c in CLASSES if c["metadata"]["name"] != "gpu.amd.com"]
    both = node(T4, 2)  # its device plugin still runs beside the DRA driver
    seed(kube_api, both, node(AKS, 0, gfd=False), node(AMD, 0, gfd=False), *amd_less, *map(as_v1, SLICES))  # fmt: skip
    seed(kube_api, kubelet_plugin("nvidia-dra-driver-gpu-kubelet-plugin", "nvidia-dra-driver-gpu", 1, 2))  # fmt: skip
    r, checks = checks_of(cli)
    assert r.code == 1, r
    assert checks["dra-classes"]["detail"] == "no DeviceClass selects 1 device(s) of gpu.amd.com: no claim can ask for them"  # fmt: skip
    assert checks["dra-kubelet-plugin"]["detail"] == (
        "kubelet plugin not running on every node: "
        "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin (1/2 ready)"
    )
    assert checks["dra-and-device-plugin"]["status"] == "fail"
    assert f"{T4} (nvidia.com/gpu from both the device plugin and DRA (gpu.nvidia.com))" in checks["dra-and-device-plugin"]["detail"]  # fmt: skip


def test_kueue_is_told_the_device_class_mappings_it_lacks(cli, kube, kube_api):
    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor", "Workload")
    config = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": UPSTREAM_CONFIG},
    }  # fmt: skip
    seed(kube_api, node(T4, 0, gfd=False), node(AKS, 0, gfd=False), *CLASSES, *map(as_v1, SLICES), KUEUE, config)  # fmt: skip
    r, checks = checks_of(cli)
    kueue = checks["kueue-dra"]
    # gpu.nvidia.com maps nvidia.com/gpu (KEP-5004): Kueue charges it; the others not
    assert kueue["detail"] == (
        "Kueue's Configuration maps no resource to DeviceClass gpu.amd.com, mig.nvidia.com: "
        "workloads claiming them are inadmissible"
    )
    assert "  - name: mig.nvidia.com.deviceclass.resource.k8s.io/devices\n    deviceClassNames:\n    - mig.nvidia.com\n" in kueue["fix"]  # fmt: skip
