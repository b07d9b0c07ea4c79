"""Where a job's accelerators can be when they are not NVIDIA's GPUs: the resource a worker
asks for and the node affinity that selects nodes with the model, under the labels each
vendor's tools write (gpuctl.gpus.vendor_models reads the same labels). Pure.

| vendor | resource per worker | selected by (OR'ed terms) |
|---|---|---|
| amd | `amd.com/gpu`; a partition (`partition: cpx_nps4`): `amd.com/cpx_nps4` (mixed naming) or `amd.com/gpu` on nodes labelled `amd.com/gpu.compute-memory-partition=cpx_nps4` (single naming), whichever the nodes offer more of | the node labeller's `amd.com/gpu.device-id` or `beta.amd.com/gpu.device-id` In the model's IDs, or `beta.amd.com/gpu.device-id.<id>` Exists (a node of mixed GPUs); the VM sizes that have it |
| aws | `aws.amazon.com/neuron` (devices), `aws.amazon.com/neuroncore` (`neuron_cores:`) | Karpenter's `instance-accelerator-name`, or the instance types that have it |
| google | `google.com/tpu` (the host's chips) | `cloud.google.com/gke-tpu-accelerator`, and `cloud.google.com/gke-tpu-topology` for a slice |
| intel | `habana.ai/gaudi` | Habana's `habana.ai/device.id` In the model's IDs, or the instance types that have it |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuctl.common.quantity import count
from gpuctl.gpus import vendor_models as vm
from gpuctl.k8s.nodes import allocatable
from gpuctl.k8s.objects import labels_of
from gpuctl.k8s.selectors import expression

Term = tuple[dict[str, Any], ...]
RESOURCES = {
    "amd": "amd.com/gpu",
    "aws": "aws.amazon.com/neuron",
    "google": "google.com/tpu",
    "intel": "habana.ai/gaudi",
}
NEURONCORE = "aws.amazon.com/neuroncore"
AMD_DEVICE_ID = ("amd.com/gpu.device-id", "beta.amd.com/gpu.device-id")


@dataclass(frozen=True)
class AcceleratorRequest:
    """A worker's accelerators of one vendor other than NVIDIA."""

    vendor: str  # amd | aws | google | intel
    models: tuple[str, ...]  # any of these (gpuctl.gpus.vendor_models); (): any of the vendor's
    count: int  # devices per worker (TPU chips, Neuron devices, GPUs), or units of `unit`
    unit: str | None = None  # neuroncore; an AMD compute/memory partition (cpx_nps4)
    topology: str | None = None  # a TPU slice's (2x4)
    slices: int = 1  # TPU slices of that topology (multislice)

    @property
    def wanted(self) -> str:
        what = " or ".join(self.models) or f"{self.vendor} accelerators"
        if self.topology:
            what += f" {self.topology}"
        return what + (f" ({self.unit})" if self.unit else "")


@dataclass(frozen=True)
class VendorPlacement:
    resource: str
    per_worker: int
    terms: tuple[Term, ...]
    wanted: str
    notes: tuple[str, ...] = ()


def place(request: AcceleratorRequest, nodes: list[dict[str, Any]] | None) -> VendorPlacement:
    """The resource and affinity of REQUEST, from NODES when the cluster was read."""
    resource, single, notes = _resource(request, nodes)
    terms = model_terms(request.vendor, request.models, request.topology)
    if single:  # AMD's single naming: amd.com/gpu counts the partitions the label names
        partitioned = expression(vm.AMD_PARTITION, "In", [request.unit or ""])
        terms = tuple((*t, partitioned) for t in terms) or ((partitioned,),)
    return VendorPlacement(resource, request.count, terms, request.wanted, notes)


def _resource(
    request: AcceleratorRequest, nodes: list[dict[str, Any]] | None
) -> tuple[str, bool, tuple[str, ...]]:
    """(resource, whether it is AMD's single naming of partitions, notes)."""
    if request.vendor == "aws" and request.unit == "neuroncore":
        return NEURONCORE, False, ()
    if request.vendor != "amd" or not request.unit:
        return RESOURCES[request.vendor], False, ()
    mixed = f"amd.com/{request.unit}"
    if nodes is None:
        note = f"AMD {request.unit}: no cluster read, so {mixed} (the mixed naming strategy)"
        return mixed, False, (note,)
    n_mixed = sum(count(allocatable(n).get(mixed, 0)) for n in nodes)
    n_single = sum(
        count(allocatable(n).get(RESOURCES["amd"], 0))
        for n in nodes
        if labels_of(n).get(vm.AMD_PARTITION) == request.unit
    )
    return (RESOURCES["amd"], True, ()) if n_single > n_mixed else (mixed, False, ())


def model_terms(
    vendor: str, models: Sequence[str], topology: str | None = None
) -> tuple[Term, ...]:
    """Terms that select nodes with any of MODELS of VENDOR (a TPU slice of TOPOLOGY), under
    every label scheme gpuctl reads for it; () when no model is asked for."""
    if not models:
        return ((expression(vm.TPU_TOPOLOGY, "In", [topology]),),) if topology else ()
    out: list[Term] = []
    if vendor == "amd":
        ids = [i for m in models for i in vm.amd_device_ids(m)]
        out += [(expression(key, "In", ids),) for key in AMD_DEVICE_ID]
        out += [(expression(f"{AMD_DEVICE_ID[1]}.{i}", "Exists"),) for i in ids]
    elif vendor == "aws":
        names = [n for m in models for n in vm.karpenter_names(m)]
        out.append((expression(vm.KARPENTER_ACCELERATOR, "In", names),))
    elif vendor == "google":
        values = [v for m in models for v in vm.accelerator_values(m)]
        shape = (expression(vm.TPU_TOPOLOGY, "In", [topology]),) if topology else ()
        out.append((expression(vm.TPU_ACCELERATOR, "In", values), *shape))
    elif vendor == "intel":
        ids = [i for m in models for i in vm.gaudi_device_ids(m)]
        out.append((expression(vm.GAUDI_ID, "In", ids),))
    sizes = [s for m in models for s in vm.instance_types(m)]
    if sizes:
        out.append((expression(vm.INSTANCE_TYPE, "In", sizes),))
    return tuple(out)
