"""Team quotas on a cluster whose GPUs are DRA devices (real ResourceSlices and the drivers'
DeviceClasses, tests/data/dra), without Kueue, through the API emulator: the ResourceQuota
limits the devices claims of a class request (`<class>.deviceclass.resource.k8s.io/devices`,
KEP-4381) beside the device plugin's GPUs, and `quota list` counts the devices claims hold."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml

from tests.gpu_cluster import node, pod, seed
from tests.gpus.test_dra import AKS, AMD, CLASSES, SLICES, T4, allocated, as_v1

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
        allocated("team-a", "mig", ("gpu.nvidia.com", AKS, "gpu-0-mig-19-2-1"), device_class="mig.nvidia.com"),
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


def claim(namespace: str, name: str, *requests: dict, **meta) -> dict:
    """A claim as it is created, not yet allocated."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name, **meta},
        "spec": {"devices": {"requests": list(requests)}},
    }  # fmt: skip


def exactly(device_class: str, count: int | None = None, mode: str = "ExactCount") -> dict:
    return {"deviceClassName": device_class, "allocationMode": mode, **({"count": count} if count else {})}  # fmt: skip


def test_claims_are_charged_as_the_api_server_charges_them(cli, kube, kube_api):
    """kube-apiserver's quota evaluator (kubernetes/kubernetes pkg/quota/v1/evaluator/core/
    resource_claims.go) charges a claim's requests, allocated or not: `count` (default 1),
    All as 32, a firstAvailable request its largest alternative per class. A pod asking the
    plain nvidia.com/gpu that a DeviceClass maps (KEP-5004) is charged there by the pod and
    its generated claim to the class's key: each key counts the devices once."""
    seed(kube_api, node(T4, 0, gfd=False), *CLASSES, *map(as_v1, SLICES), namespace("team-a"))
    gpus, mig = "gpu.nvidia.com", "mig.nvidia.com"
    seed(
        kube_api,
        claim("team-a", "pending", {"name": "gpu", "exactly": exactly(gpus, 2)}),
        claim("team-a", "every", {"name": "gpu", "exactly": exactly(mig, mode="All")}),
        claim("team-a", "either", {"name": "gpu", "firstAvailable": [
            {"name": "t4", **exactly(gpus, 1)}, {"name": "a100", **exactly(gpus, 3)},
            {"name": "slice", **exactly(mig, 1)}]}),
        claim("team-a", "train-0-extended-resources-x7k2q", {"name": "container-0-request-0", "exactly": exactly(gpus, 1)},
              annotations={"resource.kubernetes.io/extended-resource-claim": "true"}),
        pod("train-0", "team-a", 1, node_name=T4),
    )  # fmt: skip
    rows = json.loads(cli("quota", "list", "-n", "team-a", "-o", "json").out)["quotas"]
    used = {q["resource"]: q["used"] for q in rows}
    assert used == {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 2 + 3 + 1,
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices": 32 + 1,
        "nvidia.com/gpu": 1,  # the pod's limit, not its generated claim again
    }


def cluster_queue(api, name: str) -> dict:
    from kubernetes import client

    return client.CustomObjectsApi(api).get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", name)  # fmt: skip


def test_kueue_queues_cover_the_dra_devices_kueue_charges_through_mappings(cli, kube, kube_api):
    """With Kueue, a class with an extendedResourceName (the NVIDIA chart's gpu.nvidia.com →
    nvidia.com/gpu) is charged as that resource; another NVIDIA class through the
    Configuration's deviceClassMappings, whose quota resource the ClusterQueue covers, and
    which `quota set` prints (Kueue reads it at start); other vendors' classes are named as
    left out."""
    from tests.crd_schema import assert_valid_cr

    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor")
    plain = [{**c, "spec": {k: v for k, v in c["spec"].items() if k != "extendedResourceName"}} for c in CLASSES]  # fmt: skip
    seed(kube_api, *(node(n, 0, gfd=False) for n in (T4, AKS, AMD)), *plain, *map(as_v1, SLICES))
    r = cli("quota", "set", "team-a", "--gpus", "4", "--mig", "1g.10gb=2", "--cpu", "64", "--memory", "256Gi", "--yes")  # fmt: skip
    assert r.code == 0, r
    cq = cluster_queue(kube_api, "team-a")
    assert_valid_cr(cq)
    (group,) = cq["spec"]["resourceGroups"]
    gpus, mig = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "mig.nvidia.com.deviceclass.resource.k8s.io/devices"  # fmt: skip
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", gpus, mig]  # fmt: skip
    (flavor,) = group["flavors"]
    assert flavor["resources"][4:] == [{"name": gpus, "nominalQuota": "4"}, {"name": mig, "nominalQuota": "2"}]  # fmt: skip
    assert "DRA devices of gaudi.intel.com, gpu.amd.com, neuron.aws.com are not in the team's quota" in r.err  # fmt: skip
    lines = r.err[r.err.index("resources:") :].splitlines()
    printed = "\n".join(lines[:1] + list(itertools.takewhile(lambda line: line.startswith(" "), lines[1:])))  # fmt: skip
    mappings = yaml.safe_load(printed)["resources"]["deviceClassMappings"]
    assert mappings == [
        {"name": gpus, "deviceClassNames": ["gpu.nvidia.com"]},
        {"name": mig, "deviceClassNames": ["mig.nvidia.com"]},
    ]


def test_a_class_that_maps_an_extended_resource_is_charged_as_it(cli, kube, kube_api):
    """The NVIDIA chart's gpu.nvidia.com maps nvidia.com/gpu: Kueue charges it as that."""
    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor")
    seed(kube_api, *(node(n, 0, gfd=False) for n in (T4, AKS)), *CLASSES, *map(as_v1, SLICES))
    r = cli("quota", "set", "team-b", "--gpus", "4", "--mig", "1g.10gb=2", "--cpu", "64", "--memory", "256Gi", "--yes")  # fmt: skip
    assert r.code == 0, r
    cq = cluster_queue(kube_api, "team-b")
    covered = cq["spec"]["resourceGroups"][0]["coveredResources"]
    assert covered == ["cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "mig.nvidia.com.deviceclass.resource.k8s.io/devices"]  # fmt: skip
    assert "- mig.nvidia.com\n" in r.err and "- gpu.nvidia.com" not in r.err
