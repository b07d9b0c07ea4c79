"""A job's GPUs asked through DRA: the ResourceClaimTemplate each pod's claim is made from,
and what a pod says of it (kubernetes/api resource/v1/types.go, core/v1 PodResourceClaim).
Pure.

- The DeviceClass is the driver's own for the form asked: `gpu.nvidia.com` for whole GPUs,
  `mig.nvidia.com` for MIG devices (dra-driver-nvidia-gpu's chart), where the cluster has
  it (any, offline).
- CEL selectors on the driver's attributes pick the model (`productName`, as the devices
  publish it, else as NVML names the model) and the MIG `profile`; `count` is the GPUs a
  worker asks for.
- Several models are tried in order as `firstAvailable` subrequests (DRAPrioritizedList,
  beta and on from Kubernetes 1.34), one per model; the container then names the request.
- Sharing (`shared: true`) is the driver's opaque GpuConfig (resource.nvidia.com/v1beta1,
  strategy TimeSlicing) in the claim's config.
- Where the class maps an extended resource (KEP-5004, `extendedResourceName`) and the job
  asks for plain whole GPUs of any model, the pod keeps its plain limit: kube-scheduler makes
  the claim itself.
- Other vendors' accelerators (a spec's `accelerator:`) through their drivers' own classes
  and attributes:

| vendor | DeviceClass | a model is selected by | source |
|---|---|---|---|
| amd | `gpu.amd.com` | `productName` (`AMD_Instinct_MI300X_OAM`) as published, else matched on the model; `type` `amdgpu` (whole) or `amdgpu-partition` with its `partitionProfile` | ROCm/k8s-gpu-dra-driver docs/driver-attributes.md |
| aws | `neuron.aws.com` | `instanceType` (`trn2.48xlarge`) of the model's instances | aws-neuron/aws-neuron-sdk deploy/eks/dra.rst |
| intel | `gaudi.intel.com` | `model` (`Gaudi2`, the driver's name for the PCI device ID) | intel/intel-resource-drivers-for-kubernetes pkg/gaudi/device/device.go |

  NeuronCores (set through the driver's opaque NeuronConfig) and TPUs stay with their
  device plugins."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuctl.gpus import identity, names
from gpuctl.gpus.dra import GAUDI_DRIVER, Device, DraView
from gpuctl.gpus.vendor_models import instance_types
from gpuctl.k8s.vendor_placement import AcceleratorRequest

API_VERSION = "resource.k8s.io/v1"
CLAIM = "gpu"  # the pod's claim, and the request in it
DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
AMD_DRIVER = "gpu.amd.com"
NEURON_DRIVER = "neuron.aws.com"
VENDOR_DRIVERS = {"amd": AMD_DRIVER, "aws": NEURON_DRIVER, "intel": GAUDI_DRIVER}
SHARING_CONFIG = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}},
}


@dataclass(frozen=True)
class Choice:
    """One way to meet the request: its name (a subrequest's), class and selectors."""

    name: str
    device_class: str
    selectors: tuple[str, ...]

    def to_dict(self, count: int) -> dict[str, Any]:
        out: dict[str, Any] = {"deviceClassName": self.device_class}
        if self.selectors:
            out["selectors"] = [{"cel": {"expression": e}} for e in self.selectors]
        out["allocationMode"] = "ExactCount"
        out["count"] = count
        return out


@dataclass(frozen=True)
class ClaimRequest:
    """The devices one worker claims: COUNT devices of the first CHOICE that can be met."""

    choices: tuple[Choice, ...]
    count: int
    shared: bool = False
    extended_resource: str | None = None  # KEP-5004: the pod keeps this plain limit
    vendor: str = "nvidia"  # whose devices (the worker tolerates its taint)

    def template(self, name: str) -> dict[str, Any]:
        """The ResourceClaimTemplate NAME that each pod's claim is made from."""
        if len(self.choices) == 1:
            request: dict[str, Any] = {"name": CLAIM, "exactly": self.choices[0].to_dict(self.count)}  # fmt: skip
        else:
            request = {
                "name": CLAIM,
                "firstAvailable": [{"name": c.name, **c.to_dict(self.count)} for c in self.choices],
            }
        devices: dict[str, Any] = {"requests": [request]}
        if self.shared:
            devices["config"] = [
                {"requests": [CLAIM], "opaque": {"driver": DRIVER, "parameters": SHARING_CONFIG}}
            ]
        return {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": devices}},
        }

    def describe(self) -> str:
        """One line: `2 gpu.nvidia.com devices where <selector>` (or: each choice)."""
        plural = "s" if self.count != 1 else ""
        ways = [
            f"{c.device_class}" + (f" where {' && '.join(c.selectors)}" if c.selectors else "")
            for c in self.choices
        ]
        return f"{self.count} device{plural} of " + ", else ".join(ways)


def from_template(template: dict[str, Any]) -> ClaimRequest | None:
    """The claim a ResourceClaimTemplate makes (its first request: v1's `exactly` or
    `firstAvailable`, v1beta1's fields on the request itself); None without one."""
    spec = ((template.get("spec") or {}).get("spec") or {}).get("devices") or {}
    requests = spec.get("requests") or []
    if not requests or not isinstance(requests[0], dict):
        return None
    first = requests[0]
    ways = first.get("firstAvailable") or [first.get("exactly") or first]
    choices = tuple(
        Choice(
            str(w.get("name") or first.get("name") or CLAIM),
            str(w.get("deviceClassName") or ""),
            tuple(
                str((s.get("cel") or {}).get("expression") or "") for s in w.get("selectors") or []
            ),
        )
        for w in ways
        if isinstance(w, dict)
    )
    count = ways[0].get("count") if isinstance(ways[0], dict) else None
    shared = any((c.get("opaque") or {}).get("parameters", {}).get("sharing") for c in spec.get("config") or [])  # fmt: skip
    return ClaimRequest(choices, count if isinstance(count, int) else 1, bool(shared))


def template_names(pod: dict[str, Any]) -> list[str]:
    """The ResourceClaimTemplates a pod (spec) makes its claims from."""
    return [
        str(c["resourceClaimTemplateName"])
        for c in pod.get("resourceClaims") or []
        if isinstance(c, dict) and c.get("resourceClaimTemplateName")
    ]


def template_name(job: str) -> str:
    return f"{job}-{CLAIM}"


def pod_claims(pod: dict[str, Any], template: str) -> None:
    """Make POD's containers use the claim made from TEMPLATE."""
    pod["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": template}]
    for c in pod.get("containers") or []:
        c.setdefault("resources", {})["claims"] = [{"name": CLAIM}]


def request_for(
    gpus: int,
    mig: str | None,
    shared: bool,
    gpu_types: tuple[str, ...],
    view: DraView | None,
) -> ClaimRequest | None:
    """The claim for GPUS (or one MIG device of profile MIG) of GPU_TYPES on the cluster's
    DRA (VIEW; None: no cluster read); None when the cluster has no class for it."""
    device_class = MIG_CLASS if mig else GPU_CLASS
    classes = {c.name: c for c in view.classes} if view is not None else {}
    if view is not None and device_class not in classes:
        return None
    common = (f"device.attributes['{DRIVER}'].profile == {_quoted(mig)}",) if mig else ()
    choices = tuple(
        Choice(_subrequest(t), device_class, (_products_selector(t, view), *common))
        for t in gpu_types
    ) or (Choice(CLAIM, device_class, common),)
    extended = classes[device_class].extended_resource if device_class in classes else None
    plain = not (mig or shared or gpu_types)
    return ClaimRequest(choices, gpus if not mig else 1, shared, extended if plain else None)


def _subrequest(gpu_type: str) -> str:
    """A DNS label for a subrequest named after the GPU type (`h100`, `a100-80gb`)."""
    label = re.sub(r"[^a-z0-9-]+", "-", gpu_type.lower()).strip("-")[:63].strip("-")
    return label or "gpu"


def _products_selector(gpu_type: str, view: DraView | None) -> str:
    return _one_of(f"device.attributes['{DRIVER}'].productName", products_of(gpu_type, view))


def products_of(gpu_type: str, view: DraView | None) -> list[str]:
    """The productName values that are GPU_TYPE: those the cluster's devices publish (VIEW),
    else NVML's names of its models, else the type as written."""
    models = identity.models_for(gpu_type)
    published = _published(view.devices if view is not None else (), models)
    if published:
        return published
    known = [n for m in models if (k := identity.by_short_name(m)) for n in names.reported_names(k)]
    return list(dict.fromkeys(known)) or [gpu_type]


def _published(devices: Iterable[Device], models: Iterable[str], driver: str = DRIVER) -> list[str]:
    """The products DRIVER's devices publish that are one of MODELS."""
    wanted = set(models)
    return sorted({d.product for d in devices if d.driver == driver and d.product and d.model in wanted})  # fmt: skip


def accelerator_request(request: AcceleratorRequest, view: DraView | None) -> ClaimRequest | None:
    """The claim for another vendor's accelerators (REQUEST) on the cluster's DRA (VIEW;
    None: no cluster read); None where its driver does not serve them that way (NeuronCores,
    TPUs) or the cluster has no class for it."""
    driver = VENDOR_DRIVERS.get(request.vendor)
    if driver is None or request.unit == "neuroncore" or request.topology:
        return None
    if view is not None and driver not in view.class_named:
        return None
    devices = view.devices if view is not None else ()
    common = _amd_form(request.unit) if request.vendor == "amd" else ()
    choices = tuple(
        Choice(_subrequest(m), driver, (_model_selector(request.vendor, m, devices), *common))
        for m in request.models
    ) or (Choice(CLAIM, driver, common),)
    return ClaimRequest(choices, request.count, vendor=request.vendor)


def _amd_form(partition: str | None) -> tuple[str, ...]:
    """Whole AMD GPUs, or partitions of the compute/memory PARTITION profile."""
    attributes = f"device.attributes['{AMD_DRIVER}']"
    if partition is None:
        return (f"{attributes}.type == 'amdgpu'",)
    return (f"{attributes}.type == 'amdgpu-partition' && {attributes}.partitionProfile == {_quoted(partition)}",)  # fmt: skip


def _model_selector(vendor: str, model: str, devices: Iterable[Device]) -> str:
    """The selector of another vendor's MODEL: on what the cluster's DEVICES publish for
    it, else on what its driver publishes for it."""
    driver = VENDOR_DRIVERS[vendor]
    if vendor == "intel":
        return f"device.attributes['{driver}'].model == {_quoted(model)}"
    published = _published(devices, [model], driver)
    if vendor == "aws":
        return _one_of(f"device.attributes['{driver}'].instanceType", published or instance_types(model))  # fmt: skip
    if published:
        return _one_of(f"device.attributes['{driver}'].productName", published)
    # AMD's normalised product names carry the model (AMD_Instinct_MI300X_OAM): not MI250 in MI250X
    return (
        f"device.attributes['{driver}'].productName.matches({_quoted(model + '([^0-9A-Za-z]|$)')})"
    )


def _one_of(attribute: str, values: list[str]) -> str:
    if len(values) == 1:
        return f"{attribute} == {_quoted(values[0])}"
    return f"{attribute} in [{', '.join(_quoted(v) for v in values)}]"


def _quoted(text: str | None) -> str:
    return "'" + str(text).replace("\\", "\\\\").replace("'", "\\'") + "'"
