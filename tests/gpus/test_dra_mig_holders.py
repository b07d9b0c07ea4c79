"""Which pod holds a MIG device allocated through DRA, as DCGM's series can be joined to it
(gpuctl.gpus.dra.DraView.mig_holders). DCGM's MIG series carry the parent GPU's UUID, the
profile (GPU_I_PROFILE) and the GPU instance id (GPU_I_ID); NVIDIA's DRA driver publishes a
MIG device's `parentUUID`, `profile`, its own `uuid` (static MIG) and its placement
(memorySlice<N> capacities, the device name), never the GPU instance id, which NVML assigns
apart from the placement (kubernetes-sigs/dra-driver-nvidia-gpu @ 9593204: mig.go
CommonAttributesMig, deviceinfo.go MigDeviceInfo.GetDevice, and MigLiveTuple's comment). So
(parent, profile) names the holder only where one pod holds every such device that exists.
Real slices: the AKS A100 with two static 1g.10gb devices (tests/data/dra), the DynamicMIG
A100 (tests/data/dra/partitionable), whose devices exist only once allocated."""

from __future__ import annotations

from gpuctl.gpus import dra
from tests.gpus.test_dra import AKS, CLASSES, SLICES, allocated
from tests.gpus.test_dra_counters import NODE
from tests.gpus.test_dra_counters import SLICES as DYNAMIC

AKS_GPU = "GPU-ddf64803-f421-0e5b-883e-cd752de16db7"
DYNAMIC_GPU = "GPU-4f3c1f6e-5b7a-4c35-9e0d-2b6a8c1d7e90"


def mig(namespace: str, name: str, pool: str, *devices: str) -> dict:
    results = [("gpu.nvidia.com", pool, d) for d in devices]
    return allocated(namespace, name, *results, device_class="mig.nvidia.com")


def test_static_mig_devices_join_only_when_one_pod_holds_every_one_of_the_profile():
    one = dra.view(CLASSES, SLICES, [mig("ml", "a", AKS, "gpu-0-mig-19-2-1")])
    assert one.mig_holders() == {}  # the other 1g.10gb exists, free: which GI is a's?
    both = dra.view(CLASSES, SLICES, [mig("ml", "a", AKS, "gpu-0-mig-19-2-1", "gpu-0-mig-19-3-1")])
    assert both.mig_holders() == {(AKS_GPU, "1g.10gb"): ("ml", "a-pod")}
    apart = [mig("ml", "a", AKS, "gpu-0-mig-19-2-1"), mig("ml", "b", AKS, "gpu-0-mig-19-3-1")]
    assert dra.view(CLASSES, SLICES, apart).mig_holders() == {}


def test_dynamic_mig_devices_exist_only_when_allocated():
    view = dra.view(CLASSES, DYNAMIC, [mig("ml", "a", NODE, "gpu-0-mig-1g10gb-15-2")])
    assert view.mig_holders() == {(DYNAMIC_GPU, "1g.10gb"): ("ml", "a-pod")}
    two = [
        mig("ml", "a", NODE, "gpu-0-mig-1g10gb-15-2"),
        mig("ml", "b", NODE, "gpu-0-mig-1g10gb-15-4"),
    ]
    assert dra.view(CLASSES, DYNAMIC, two).mig_holders() == {}
    assert dra.view(CLASSES, DYNAMIC).mig_holders() == {}
