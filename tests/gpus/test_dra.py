"""DRA read into the inventory (gpuctl.gpus.dra) from real ResourceSlices and the drivers'
DeviceClasses (tests/data/dra, each file citing its source): v1 and v1beta1 shapes, pools and
generations, allocations, taints and health, and who a device is from its attributes."""

from __future__ import annotations

import copy
import glob
import os

import yaml

from gpuctl.gpus import dra
from gpuctl.gpus.accelerators import DRA
from tests import ROOT

DIR = os.path.join(ROOT, "tests", "data", "dra")
MIB = 1 << 20
GIB = 1 << 30


def objects(kind: str) -> list[dict]:
    docs = [d for f in sorted(glob.glob(os.path.join(DIR, "*.yaml"))) for d in yaml.safe_load_all(open(f))]  # fmt: skip
    return [d for d in docs if d and d["kind"] == kind]


CLASSES = objects("DeviceClass")
SLICES = objects("ResourceSlice")
AKS = "aks-migpool-68842551-vmss000001"
T4 = "harpatil4220c-g9kfm-gpu-c-rd8r8"
AMD = "gpu-operator-2"
MI300X = "mi300x-node-1"
GAUDI = "gaudi2-node-1"
TRN2 = "ip-10-0-12-34.us-west-2.compute.internal"


def as_v1(s: dict) -> dict:
    """A ResourceSlice as a v1 API server returns it (a v1beta1 one's `basic:` flattened, as
    the server converts between versions)."""
    out = copy.deepcopy(s)
    out["apiVersion"] = "resource.k8s.io/v1"
    out["spec"]["devices"] = [{"name": d["name"], **d.get("basic", {})} if "basic" in d else d for d in out["spec"]["devices"]]  # fmt: skip
    return out


def allocated(
    namespace: str,
    name: str,
    *results: tuple[str, str, str],
    device_class: str = "gpu.nvidia.com",
    **extra,
) -> dict:
    """A claim of DEVICE_CLASS for as many devices as RESULTS, allocated them."""
    exactly = {
        "deviceClassName": device_class,
        "allocationMode": "ExactCount",
        "count": len(results),
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name, **extra},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": d, "pool": p, "device": n} for d, p, n in results
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": f"{name}-pod", "uid": "u-1"}],
        },
    }  # fmt: skip


def rows(view: dra.DraView, node: str) -> list[tuple]:
    return [
        (a.vendor, a.model, a.device_class, a.partition, a.count, a.allocated, a.free, a.memory_bytes)
        for a in view.accelerators(node)
    ]  # fmt: skip


def test_every_device_is_named_from_its_attributes_and_capacity():
    view = dra.view(CLASSES, SLICES)
    assert rows(view, AKS) == [
        ("nvidia", "A100-80GB", "mig.nvidia.com", "1g.10gb", 2, 0, 2, 9728 * MIB),
        ("nvidia", "A100-80GB", "gpu.nvidia.com", None, 1, 0, 1, 80 * GIB),
    ]
    assert rows(view, T4) == [("nvidia", "T4", "gpu.nvidia.com", None, 2, 0, 2, 15 * GIB)]
    # v1beta1 (basic: nesting), an AMD partition: product and partition from attributes
    assert rows(view, AMD) == [("amd", "MI300X", "gpu.amd.com", "dpx_nps1", 1, 0, 1, 98296 * MIB)]
    (mi300x,) = view.accelerators(AMD)
    assert (mi300x.product, mi300x.driver, mi300x.source, mi300x.devices) == (
        "AMD_Instinct_MI300X_OAM", "gpu.amd.com", DRA, ("gpu-32-160",),
    )  # fmt: skip


def test_names_are_never_read_for_who_a_device_is():
    renamed = copy.deepcopy(SLICES)
    for s in renamed:
        for i, d in enumerate(s["spec"]["devices"]):
            d["name"] = f"dev-{i}"
    assert [r[:5] for r in rows(dra.view(CLASSES, renamed), AKS)] == [
        r[:5] for r in rows(dra.view(CLASSES, SLICES), AKS)
    ]


def test_a_gpu_published_whole_beside_its_mig_devices_is_a_problem():
    view = dra.view(CLASSES, SLICES)
    assert view.problems(AKS) == (
        "gpu-0 (GPU-ddf64803-f421-0e5b-883e-cd752de16db7) is published whole and as 2 MIG "
        "device(s) of gpu.nvidia.com: a claim on one leaves the other unusable",
    )
    assert view.problems(T4) == ()


def test_claims_allocate_devices_admin_access_takes_none():
    claims = [
        allocated("ml", "train", ("gpu.nvidia.com", T4, "gpu-1")),
        allocated("ml", "mig", ("gpu.nvidia.com", AKS, "gpu-0-mig-19-2-1")),
    ]
    admin = allocated("ops", "probe", ("gpu.nvidia.com", T4, "gpu-0"))
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    view = dra.view(CLASSES, SLICES, [*claims, admin])
    assert rows(view, T4)[0][4:7] == (2, 1, 1)
    assert rows(view, AKS)[0][4:7] == (2, 1, 1)
    assert view.allocated[("gpu.nvidia.com", T4, "gpu-1")].pods == ("train-pod",)


def test_a_scheduler_made_claim_kep_5004_is_marked():
    claim = allocated(
        "ml", "pod-extended-resources-x7k2p", ("gpu.nvidia.com", T4, "gpu-0"),
        annotations={dra.EXTENDED_CLAIM: "true"},
    )  # fmt: skip
    (parsed,) = dra.view(CLASSES, SLICES, [claim]).claims
    assert parsed.extended and parsed.devices[0].request == "gpu"


def test_only_the_newest_complete_generation_of_a_pool_is_read():
    (t4,) = [s for s in SLICES if s["spec"]["nodeName"] == T4]
    newer = copy.deepcopy(t4)
    newer["spec"]["pool"].update(generation=2, resourceSliceCount=2)
    newer["spec"]["devices"] = newer["spec"]["devices"][:1]
    view = dra.view(CLASSES, [t4, newer])  # generation 2 lacks a slice: 1 is read
    assert rows(view, T4)[0][4] == 2 and view.problems(T4) == ()
    second = copy.deepcopy(newer)
    second["metadata"]["name"] += "-2"
    second["spec"]["devices"][0]["name"] = "gpu-9"
    assert rows(dra.view(CLASSES, [t4, newer, second]), T4)[0][4] == 2  # gen 2 whole: its 2
    alone = dra.view(CLASSES, [newer])
    assert alone.problems(T4) == (
        f"pool {T4} of gpu.nvidia.com: 1 of 2 ResourceSlices of generation 2 published",
    )


def test_tainted_and_unhealthy_devices():
    (t4,) = copy.deepcopy([s for s in SLICES if s["spec"]["nodeName"] == T4])
    t4["spec"]["devices"][0]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]  # fmt: skip
    t4["spec"]["devices"][1]["taints"] = [{"key": "maintenance", "effect": "None"}]
    (a,) = dra.view(CLASSES, [t4]).accelerators(T4)
    assert (a.count, a.unhealthy, a.free) == (2, 1, 1)
    t4["spec"]["devices"][1]["attributes"]["healthy"] = {"bool": False}  # Intel's attribute
    (a,) = dra.view(CLASSES, [t4]).accelerators(T4)
    assert (a.unhealthy, a.free) == (2, 0)


def test_a_site_class_beside_the_vendors_own():
    site = {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "a-t4.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"}}]},
    }  # fmt: skip
    view = dra.view([site, *CLASSES], SLICES)
    assert rows(view, T4)[0][2] == "gpu.nvidia.com"  # the vendor's class first
    assert rows(dra.view([site], SLICES), T4)[0][2] == "a-t4.example.com"
    assert rows(dra.view([], SLICES), T4)[0][2] is None  # classes unread: none named


def test_other_vendors_devices_are_named_from_their_drivers_attributes():
    view = dra.view(CLASSES, SLICES)
    # AMD: the model in the normalised productName, whole GPUs (type amdgpu) apart from partitions
    assert rows(view, MI300X) == [("amd", "MI300X", "gpu.amd.com", None, 8, 0, 8, 196592 * MIB)]
    # Intel Gaudi: its `model`; AWS Neuron: its `instanceType`; neither publishes memory
    assert rows(view, GAUDI) == [("intel", "Gaudi2", "gaudi.intel.com", None, 8, 0, 8, 96 * GIB)]
    assert rows(view, TRN2) == [("aws", "Trainium2", "neuron.aws.com", None, 16, 0, 16, 96 * GIB)]
    (trn2,) = view.accelerators(TRN2)
    assert (trn2.product, trn2.devices[0]) == ("trn2.48xlarge", "neurondevice0")


def test_a_device_whose_memory_amd_could_not_read_takes_its_model_s():
    (s,) = [s for s in SLICES if s["spec"]["nodeName"] == MI300X]
    unread = copy.deepcopy(s)
    for d in unread["spec"]["devices"]:
        d["capacity"]["memory"] = {
            "value": "0"
        }  # the driver's sentinel (docs/driver-attributes.md)
    assert rows(dra.view(CLASSES, [unread]), MI300X)[0][-1] == 192 * GIB


def test_a_v1beta1_slice_reads_as_its_v1_form():
    (amd,) = [s for s in SLICES if s["apiVersion"] == "resource.k8s.io/v1beta1"]
    assert rows(dra.view(CLASSES, [amd]), AMD) == rows(dra.view(CLASSES, [as_v1(amd)]), AMD)


def test_a_v1beta1_claim_s_flat_requests_are_charged_too():
    spec = {"devices": {"requests": [
        {"name": "a", "deviceClassName": "x", "count": 2},
        {"name": "b", "deviceClassName": "x", "allocationMode": "All"},
        {"name": "c", "exactly": {"deviceClassName": "y"}},
        {"name": "d", "exactly": {"deviceClassName": "y", "allocationMode": "Sometimes"}},
    ]}}  # fmt: skip
    assert dra.charges(spec) == {"x": 2 + 32, "y": 1}
