"""The sandbox's simulated DRA driver and the allocating half of kube-scheduler's DRA plugin.
The driver publishes a node's GPUs as NVIDIA's DRA driver does (one ResourceSlice per node,
driver and pool named as dra-driver-nvidia-gpu names them, the attributes and capacity of
cmd/gpu-kubelet-plugin/deviceinfo.go: type, uuid, productName, brand, architecture,
cudaComputeCapability, driverVersion, cudaDriverVersion, memory), and the DeviceClasses its
chart installs (for resource.k8s.io/v1 it maps `gpu.nvidia.com` to the extended resource
`nvidia.com/gpu`, KEP-5004). A claim is allocated on a node when, for its first choice that
the node can meet, enough devices the class's and the choice's selectors select are free
there. No I/O: objects in, objects out."""

from __future__ import annotations

import uuid as uuids
from typing import Any

from gpuctl.gpus import dra_cel, geometry
from gpuctl.gpus.dra import DraView
from gpuctl.k8s.claims import CLAIM, DRIVER, GPU_CLASS, MIG_CLASS, Choice, ClaimRequest
from gpuctl.k8s.nodes import GPU

API_VERSION = "resource.k8s.io/v1"
DEVICE_CLASSES = [
    {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
                    }
                }  # fmt: skip
            ],
            **({"extendedResourceName": extended} if extended else {}),
        },
    }
    for name, kind, extended in ((GPU_CLASS, "gpu", GPU), (MIG_CLASS, "mig", None))
]
EXTENDED_REQUEST = "container-{container}-request-{request}"  # kube-scheduler's names (KEP-5004)


def resource_slice(node: str, model: geometry.GpuModel, count: int) -> dict[str, Any]:
    """NODE's COUNT GPUs of MODEL, as the driver publishes them."""
    devices = [
        {
            "name": f"gpu-{minor}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": f"GPU-{uuids.uuid5(uuids.NAMESPACE_DNS, f'{node}/{minor}')}"},
                "productName": {"string": model.nvml_name},
                "brand": {"string": "Nvidia"},
                "architecture": {"string": model.architecture.split()[0]},
                "driverVersion": {"version": "580.95.5"},
                "cudaDriverVersion": {"version": "13.0.0"},
            },
            "capacity": {"memory": {"value": f"{model.memory_total_mib}Mi"}},
        }
        for minor in range(count)
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def allocate(view: DraView, claim: ClaimRequest, node: str) -> list[dict[str, Any]] | None:
    """The allocation results of CLAIM on NODE (devices no claim holds, whose shared counters
    the held ones leave room for), or None when the node cannot meet it."""
    devices = view.on(node)
    for choice in claim.choices:
        found = view.class_named.get(choice.device_class)
        if found is None:
            continue
        try:
            selector = dra_cel.selector(*found.selectors, *choice.selectors)
            # free ones, within what the shared counters (KEP-4815) leave
            chosen = view.available([d for d in devices if selector.matches(d)])
        except dra_cel.SelectorError:
            continue
        if len(chosen) >= claim.count:
            request = choice.name if len(claim.choices) == 1 else f"{CLAIM}/{choice.name}"
            return [
                {"request": request, "driver": d.driver, "pool": d.pool, "device": d.name}
                for d in chosen[: claim.count]
            ]
    return None


def extended_request(view: DraView, resource: str, count: int) -> ClaimRequest | None:
    """The claim kube-scheduler makes for COUNT of RESOURCE in a pod's first container where
    a DeviceClass maps it (KEP-5004; the newest class wins, here the first); None: none does."""
    for c in view.classes:
        if c.extended_resource == resource:
            name = EXTENDED_REQUEST.format(container=0, request=0)
            return ClaimRequest((Choice(name, c.name, ()),), count)
    return None
