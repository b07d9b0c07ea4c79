"""Team quotas on a cluster whose GPUs are DRA devices (real ResourceSlices and the drivers'
DeviceClasses, tests/data/dra), without Kueue, through the API emulator: the ResourceQuota
limits the devices claims of a class request (`<class>.deviceclass.resource.k8s.io/devices`,
KEP-4381) beside the device plugin's GPUs, and `quota list` counts the devices claims hold."""

from __future__ import annotations

import json

import pytest

from tests.gpu_cluster import node, pod, seed
from tests.gpus.test_dra import AKS, CLASSES, SLICES, T4, allocated, as_v1

pytestmark = pytest.mark.integration


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def test_quota_set_limits_dra_devices_and_list_counts_the_claims(cli, kube, kube_api):
    seed(kube_api, node(T4, 0, gfd=False), node(AKS, 0, gfd=False), *CLASSES, *map(as_v1, SLICES))  # fmt: skip
    r = cli("quota", "set", "team-a", "--gpus", "4", "--mig", "1g.10gb=2", "--yes")
    assert r.code == 0, r
    hard = json.loads(cli("quota", "list", "-n", "team-a", "-o", "json").out)["quotas"]
    limits = {q["resource"]: q["hard"] for q in hard}
    assert limits == {
        "nvidia.com/gpu": 4,
        "nvidia.com/mig-1g.10gb": 2,
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 4,
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices": 2,
    }
    seed(
        kube_api,
        allocated("team-a", "train", ("gpu.nvidia.com", T4, "gpu-0"), ("gpu.nvidia.com", T4, "gpu-1")),
        allocated("team-a", "mig", ("gpu.nvidia.com", AKS, "gpu-0-mig-19-2-1")),
        namespace("team-b"),
        allocated("team-b", "other", ("gpu.nvidia.com", AKS, "gpu-0")),
        pod("p", "team-a", 1, node_name=T4),
    )  # fmt: skip
    rows = json.loads(cli("quota", "list", "-o", "json").out)["quotas"]
    found = {(q["namespace"], q["resource"]): (q["used"], q["hard"], q["source"]) for q in rows}
    dra_gpus = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    assert found["team-a", dra_gpus] == (2, 4, "claims")
    assert found["team-a", "mig.nvidia.com.deviceclass.resource.k8s.io/devices"] == (1, 2, "claims")
    assert found["team-a", "nvidia.com/gpu"] == (1, 4, "pods")
    assert found["team-b", dra_gpus] == (1, None, "claims")  # no quota there
    table = cli("quota", "list", "-n", "team-a").out
    assert dra_gpus in table and "team-b" not in table
