"""The accelerators a node's device plugins advertise, one reader per vendor: a node's labels
and its accelerator resources (capacity and allocatable, as counts) in, `Accelerator`s of
source device-plugin out (allocated is the inventory's to count). Pure.

NVIDIA's reader maps the one GPU resolver (gpuctl.gpus.identity.identify): whole GPUs, MIG
slices of the single and mixed strategies as rows of their own (partition = the profile),
time-slicing and MPS as sharing and replicas, renamed resources. The other vendors get
`plain`: their resources counted, partitions named by the vendor table, the model, memory and
partition as their labels tell them (gpuctl.gpus.vendor_models). A vendor's reader of its
own is added to READERS."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gpuctl.common.numbers import whole_number
from gpuctl.gpus import geometry, identity, vendor_models
from gpuctl.gpus.accelerators import DEVICE_PLUGIN, Accelerator
from gpuctl.gpus.vendors import VENDORS, Vendor

MIB = 1 << 20
Found = tuple[list[Accelerator], list[str]]  # the node's accelerators, and what is wrong
Reader = Callable[[Vendor, Mapping[str, str], Mapping[str, int], Mapping[str, int]], Found]


def offered(
    vendor: Vendor, capacity: Mapping[str, int], allocatable: Mapping[str, int]
) -> dict[str, tuple[int, int]]:
    """The vendor's resources on the node → (count, unhealthy): the count is the capacity
    (the device plugin keeps unhealthy devices there), unhealthy what allocatable lacks."""
    out = {}
    for name in dict.fromkeys([*capacity, *allocatable]):
        if vendor.offers(name):
            count = max(capacity.get(name, 0), allocatable.get(name, 0))
            out[name] = (count, max(count - allocatable.get(name, 0), 0))
    return out


def plain(
    vendor: Vendor,
    labels: Mapping[str, str],
    capacity: Mapping[str, int],
    allocatable: Mapping[str, int],
) -> Found:
    """Each of the vendor's resources the node offers, named as its labels tell; a node its
    discovery labels but whose device plugin advertises nothing: one row of none."""
    rows = [
        _row(vendor, labels, name, count, unhealthy)
        for name, (count, unhealthy) in offered(vendor, capacity, allocatable).items()
        if count
    ]
    label = vendor.labelled(labels)
    if not rows and label:
        rows = [_row(vendor, labels, label.resource, 0, 0)]
    return rows, []


def _row(
    vendor: Vendor, labels: Mapping[str, str], resource: str, count: int, unhealthy: int
) -> Accelerator:
    named = vendor_models.named(vendor.name, labels, resource)
    return Accelerator(
        vendor.name,
        named.model,
        named.product,
        count,
        named.memory_bytes,
        DEVICE_PLUGIN,
        resource=resource,
        partition=vendor.partition_of(resource) or named.partition,
        unhealthy=unhealthy,
        scheme=named.scheme,
    )


def nvidia(
    vendor: Vendor,
    labels: Mapping[str, str],
    capacity: Mapping[str, int],
    allocatable: Mapping[str, int],
) -> Found:
    """NVIDIA's GPUs as the resolver reads them, a row per resource."""
    gpus = identity.identify(labels, capacity, allocatable)
    rows = [
        _nvidia_row(gpus, labels, name, count, unhealthy)
        for name, (count, unhealthy) in offered(vendor, capacity, allocatable).items()
        if count
    ]
    if not rows and vendor.labelled(labels):
        rows = [_nvidia_row(gpus, labels, identity.GPU, 0, 0)]
    problems = []
    if gpus.mig_invalid:
        problems.append(
            f"MIG layouts differ between its GPUs ({identity.GFD_PRODUCT}="
            f"{labels.get(identity.GFD_PRODUCT)}): the single strategy advertises no GPU"
        )
    return rows, problems


def _nvidia_row(
    gpus: identity.NodeGpus, labels: Mapping[str, str], name: str, count: int, unhealthy: int
) -> Accelerator:
    slice_of = name[len(identity.MIG_PREFIX) :].removesuffix(".shared")
    mixed = name.startswith(identity.MIG_PREFIX)
    profile = identity.mig_profile(slice_of) if mixed else gpus.single_profile
    shared = name.endswith(".shared") or (gpus.sharing != "none" and not gpus.shared_resource)
    replicas = gpus.replicas
    product = labels.get(identity.GFD_PRODUCT) or next(iter(gpus.products), None)
    if mixed:  # GFD labels each profile of the mixed strategy on its own
        replicas = _number(labels, f"{name}.replicas") or replicas
        product = labels.get(f"{identity.MIG_PREFIX}{slice_of}.product") or product
        memory = _number(labels, f"{identity.MIG_PREFIX}{slice_of}.memory")
    elif profile:  # the single strategy's GFD memory label is the slice's
        memory = _number(labels, identity.GFD_MEMORY)
    else:
        memory = gpus.memory_mib or _model_memory(gpus.model)
    if profile and not memory:
        memory = _profile_memory(gpus.model, profile)
    return Accelerator(
        "nvidia",
        gpus.model,
        product,
        count,
        memory * MIB if memory else None,
        DEVICE_PLUGIN,
        resource=name,
        partition=profile,
        sharing=gpus.sharing if shared and gpus.sharing != "none" else None,
        replicas=replicas if shared else 1,
        unhealthy=unhealthy,
        scheme=gpus.scheme,
    )


def _number(labels: Mapping[str, str], key: str) -> int | None:
    return whole_number(labels.get(key, ""))


def _model_memory(model: str | None) -> int | None:
    known = identity.by_short_name(model) if model else None
    return identity.memory_of(known) if known else None


def _profile_memory(model: str | None, profile: str) -> int | None:
    known = identity.by_short_name(model) if model else None
    if isinstance(known, geometry.GpuModel) and known.has_profile(profile):
        return known.profile(profile).memory_mib
    return None


READERS: dict[str, Reader] = {"nvidia": nvidia}


def advertised(
    labels: Mapping[str, str], capacity: Mapping[str, int], allocatable: Mapping[str, int]
) -> Found:
    """Every vendor's accelerators on a node with these labels and accelerator resources."""
    rows: list[Accelerator] = []
    problems: list[str] = []
    for vendor in VENDORS:
        found, wrong = READERS.get(vendor.name, plain)(vendor, labels, capacity, allocatable)
        rows += found
        problems += wrong
    return rows, problems
