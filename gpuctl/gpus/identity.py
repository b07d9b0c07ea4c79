"""What GPUs a node has, whatever labelled it: the one resolver every capability reads.

A node's labels and its GPU resources (capacity and allocatable, as counts) come in; a
typed `NodeGpus` comes out: the model (the canonical short name the MIG geometry and the
price table know), the product strings the labels carry, GPUs, memory, the MIG strategy and
the slices of each profile, sharing, what is unhealthy, and which scheme said so. Pure.

The label schemes, most precise first (the first that names a GPU gpuctl knows wins):

| scheme | labels read | written by | source |
|---|---|---|---|
| gfd | `nvidia.com/gpu.product` (NVML name, spaces → dashes; `-MIG-<p>` in the single MIG strategy, `-MIG-INVALID` when the GPUs disagree; `-SHARED` when time-sliced and not renamed), `.count`, `.memory` (MiB), `.family`, `.replicas`, `.sharing-strategy`, `nvidia.com/mig.strategy`, `mig.capable`, `mig.config`, `mig.config.state`, `nvidia.com/mig-<p>.count/.memory/.product` (mixed) | GPU Feature Discovery (GPU Operator, k8s-device-plugin) | NVIDIA/k8s-device-plugin `internal/lm/resource.go` (productLabel, replicasLabel), `internal/lm/mig-strategy.go` (single/mixed/invalid labelers); GPU Operator docs, gpu-sharing.html (`Tesla-T4` → `Tesla-T4-SHARED`) |
| gke | `cloud.google.com/gke-accelerator` (`nvidia-tesla-t4`, `nvidia-l4`, `nvidia-tesla-a100`, `nvidia-a100-80gb`, `nvidia-h100-80gb`, …), `cloud.google.com/gke-gpu-partition-size` (a MIG profile; each partition is one `nvidia.com/gpu`), `cloud.google.com/gke-gpu-sharing-strategy` | GKE | cloud.google.com/kubernetes-engine/docs/how-to/gpus, …/gpus-multi (MIG partitions), …/timesharing-gpus |
| karpenter | `karpenter.k8s.aws/instance-gpu-name` (lower-kebab EC2 GPU name: `a100`, `h100`, `t4`, `l4`, `a10g`), `-gpu-count`, `-gpu-memory` (MiB per GPU), `-gpu-manufacturer` | Karpenter (AWS provider) | aws/karpenter-provider-aws `pkg/apis/v1/labels.go` (LabelInstanceGPUName/Count/Memory/Manufacturer); website reference/instance-types.md |
| aks | `kubernetes.azure.com/accelerator: nvidia` and the VM size in `node.kubernetes.io/instance-type` (`Standard_NC24ads_A100_v4`) | AKS | learn.microsoft.com/azure/aks/use-labels; learn.microsoft.com/azure/virtual-machines/sizes (GPU sizes) |
| gpuctl | `gpu-type` (`h100`, `a100-80gb`: a name as people write it) | `gpuctl provision` | gpuctl/provision |
| instance-type | `node.kubernetes.io/instance-type` (`p4d.24xlarge`) through the `instances` table of `gpuctl/data/ec2_gpu_prices.json` | the cloud's node controller | kubernetes.io/docs/reference/labels-annotations-taints; the EC2 accelerated-computing instance table (cited in the JSON) |
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import astuple, dataclass, field
from functools import lru_cache
from importlib import resources

from gpuctl.common.errors import GpuctlError
from gpuctl.common.numbers import whole_number
from gpuctl.gpus import geometry, names

GPU = "nvidia.com/gpu"
SHARED_GPU = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"

GFD_PRODUCT = names.GFD_PRODUCT_LABEL
GFD_PRESENT = "nvidia.com/gpu.present"
GFD_COUNT = "nvidia.com/gpu.count"
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_REPLICAS = "nvidia.com/gpu.replicas"
GFD_SHARING = "nvidia.com/gpu.sharing-strategy"
MIG_STRATEGY = "nvidia.com/mig.strategy"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
MIG_CAPABLE = "nvidia.com/mig.capable"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
GKE_PARTITION = "cloud.google.com/gke-gpu-partition-size"
GKE_SHARING = "cloud.google.com/gke-gpu-sharing-strategy"
KARPENTER_NAME = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_COUNT = "karpenter.k8s.aws/instance-gpu-count"
KARPENTER_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
KARPENTER_MAKER = "karpenter.k8s.aws/instance-gpu-manufacturer"
AKS_ACCELERATOR = "kubernetes.azure.com/accelerator"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPUCTL_TYPE = "gpu-type"  # gpuctl.common.k8s_names.DEFAULT_GPU_LABEL_KEY

SCHEMES = ("gfd", "gke", "karpenter", "aks", "gpuctl", "instance-type")
SCHEME_KEYS = {
    "gfd": GFD_PRODUCT,
    "gke": GKE_ACCELERATOR,
    "karpenter": KARPENTER_NAME,
    "aks": INSTANCE_TYPE,
    "gpuctl": GPUCTL_TYPE,
    "instance-type": INSTANCE_TYPE,
}

# GKE's accelerator names (cloud.google.com/compute/docs/gpus, "GPU models"): the A100 40GB
# is nvidia-tesla-a100, the 80GB nvidia-a100-80gb; H100 Mega is an H100 80GB board.
GKE_MODELS = {
    "nvidia-tesla-t4": "T4",
    "nvidia-l4": "L4",
    "nvidia-tesla-v100": "V100-16GB",
    "nvidia-tesla-a100": "A100-40GB",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-h100-80gb": "H100-80GB",
    "nvidia-h100-mega-80gb": "H100-80GB",
    "nvidia-h200-141gb": "H200",
    "nvidia-b200": "B200",
    "nvidia-gb200": "GB200",
}
# Azure GPU VM sizes (learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated):
# the series → the model; the count comes from the node's capacity.
AKS_SERIES = (
    (re.compile(r"^Standard_NC\d+ads_A100_v4$", re.I), "A100-80GB"),
    (re.compile(r"^Standard_ND96amsr_A100_v4$", re.I), "A100-80GB"),
    (re.compile(r"^Standard_ND96asr_v4$", re.I), "A100-40GB"),
    (re.compile(r"^Standard_NC\d+ads_H100_v5$", re.I), "H100-NVL"),
    (re.compile(r"^Standard_ND96isr_H100_v5$", re.I), "H100-80GB"),
    (re.compile(r"^Standard_ND96isr_H200_v5$", re.I), "H200"),
    (re.compile(r"^Standard_NC\d+as_T4_v3$", re.I), "T4"),
    (re.compile(r"^Standard_NC\d+s_v3$", re.I), "V100-16GB"),
)
# Karpenter's instance-gpu-name for each model (the lower-kebab EC2 GPU name), and the MiB EC2
# reports per GPU (instance-gpu-memory) where a name covers two models (describe-instance-
# types: p4d 40960, p4de 81920, p3 16384, p3dn 32768).
KARPENTER_NAMES = {
    "A100-40GB": "a100",
    "A100-80GB": "a100",
    "H100-80GB": "h100",
    "H200": "h200",
    "B200": "b200",
    "L40S": "l40s",
    "L4": "l4",
    "A10G": "a10g",
    "T4": "t4",
    "V100-16GB": "v100",
    "V100-32GB": "v100",
}
KARPENTER_MEMORY_MIB = {
    "A100-40GB": 40960,
    "A100-80GB": 81920,
    "V100-16GB": 16384,
    "V100-32GB": 32768,
}


@dataclass(frozen=True)
class NodeGpus:
    """The GPUs of one node as its labels and resources tell them."""

    model: str | None  # canonical short name (H100-80GB, A100-40GB, T4, L4); None: unknown
    scheme: str | None  # the scheme that named the model (SCHEMES), None: none did
    selector: tuple[tuple[str, str], ...]  # labels that select nodes like it under its scheme
    products: tuple[str, ...] = ()  # the GPU names the labels carry, as written
    count: int | None = None  # physical GPUs
    memory_mib: int | None = None  # per physical GPU
    mig_strategy: str = "none"  # none | single | mixed
    mig_invalid: bool = False  # single strategy whose GPUs disagree (GFD's -MIG-INVALID)
    mig_slices: Mapping[str, int] = field(default_factory=dict)  # profile → slices offered
    mig_config: str | None = None  # nvidia.com/mig.config (the layout asked of the manager)
    mig_state: str | None = None  # nvidia.com/mig.config.state (success, pending, failed)
    sharing: str = "none"  # none | time-slicing | mps
    replicas: int = 1  # per GPU when shared
    shared_resource: str | None = None  # the renamed resource (nvidia.com/gpu.shared)
    capacity: Mapping[str, int] = field(default_factory=dict)  # GPU resources
    allocatable: Mapping[str, int] = field(default_factory=dict)

    @property
    def plugin_running(self) -> bool:
        """The device plugin advertises GPU resources (their capacity is kept while they
        are unhealthy; a node whose plugin has not started has none)."""
        return any(v > 0 for v in self.capacity.values()) or any(
            v > 0 for v in self.allocatable.values()
        )

    @property
    def unhealthy(self) -> dict[str, int]:
        """Per resource, how many the plugin advertises but marks unhealthy (capacity less
        allocatable)."""
        out = {}
        for name, cap in self.capacity.items():
            gone = cap - self.allocatable.get(name, 0)
            if gone > 0:
                out[name] = gone
        return out

    @property
    def whole_gpus(self) -> int:
        """Allocatable nvidia.com/gpu that are whole, unshared GPUs: none when that
        resource counts MIG slices (single strategy, GKE partitions) or time-shared
        replicas that were not renamed."""
        if self.mig_strategy == "single" or self.sharing != "none" and not self.shared_resource:
            return 0
        return self.allocatable.get(GPU, 0)

    @property
    def split_gpus(self) -> int | None:
        """How many of its GPUs are split into MIG slices (None: not known). GFD counts the
        physical GPUs in nvidia.com/gpu.count under the mixed strategy (its whole ones are
        nvidia.com/gpu); under the single strategy that label counts the slices
        (k8s-device-plugin internal/lm/mig-strategy.go; its GFD README): there, and without
        the label, the fewest GPUs of the model that hold the slices (geometry.gpus_for)."""
        if not self.mig_slices:
            return 0
        if self.mig_strategy == "mixed" and self.count is not None:
            return max(0, self.count - self.capacity.get(GPU, self.allocatable.get(GPU, 0)))
        model = next((m for m in geometry.models() if m.short_name == self.model), None)
        try:
            return None if model is None else model.gpus_for(self.mig_slices)
        except GpuctlError:  # a profile its geometry does not have
            return None

    @property
    def physical(self) -> GpuCount:
        """Its physical GPUs, those split into MIG slices and the slices."""
        if self.mig_invalid:  # GFD counts nothing on GPUs whose MIG layouts disagree
            return GpuCount(unknown=1)
        slices, split, gpus = sum(self.mig_slices.values()), self.split_gpus, self.count
        if gpus is None and self.mig_strategy != "none":  # single: every GPU is split
            whole = self.capacity.get(GPU, 0) if self.mig_strategy == "mixed" else 0
            gpus = None if split is None else whole + split
        if gpus is None:  # time-shared replicas under nvidia.com/gpu: the GPUs they share
            gpus = self.capacity.get(GPU, self.allocatable.get(GPU, 0)) // max(1, self.replicas)
            gpus = gpus or None
        if gpus is None:
            return GpuCount(unknown=1, slices=slices)
        return GpuCount(gpus, split or 0, slices)

    @property
    def single_profile(self) -> str | None:
        """The profile nvidia.com/gpu counts on a single-strategy node."""
        if self.mig_strategy != "single" or len(self.mig_slices) != 1:
            return None
        return next(iter(self.mig_slices))

    @property
    def name(self) -> str | None:
        """The GPU's name: its model, else the product its labels carry."""
        return self.model or (self.products[0] if self.products else None)

    def describe(self) -> str:
        """The GPU in words, e.g. `8 × H100-80GB (gfd)`, `A100-40GB MIG 1g.5gb × 7`."""
        what = self.model or (self.products[0] if self.products else "unknown GPU")
        count = f"{self.count} × " if self.count else ""
        mig = ""
        if self.mig_slices:
            parts = ", ".join(f"{p} × {n}" for p, n in sorted(self.mig_slices.items()))
            mig = f" MIG {self.mig_strategy}: {parts}"
        share = f" {self.sharing} × {self.replicas}" if self.sharing != "none" else ""
        return f"{count}{what}{mig}{share}"


@dataclass(frozen=True)
class GpuCount:
    """Physical GPUs, those of them split into MIG slices, and the slices; `unknown`: nodes
    whose GPUs no label or resource counts."""

    gpus: int = 0
    split: int = 0
    slices: int = 0
    unknown: int = 0

    def __add__(self, other: GpuCount) -> GpuCount:
        return GpuCount(*(a + b for a, b in zip(astuple(self), astuple(other))))

    def text(self) -> str:
        """`32 GPUs, 8 split into 56 MIG slices`: what is physical, MIG slices apart."""
        out = f"{self.gpus} GPU{'s' * (self.gpus != 1)}"
        if self.split:
            out += f", {self.split} split into {self.slices} MIG slice{'s' * (self.slices != 1)}"
        if self.unknown:
            out += f" (and the uncounted GPUs of {self.unknown} node{'s' * (self.unknown != 1)})"
        return out


@lru_cache(maxsize=1)
def instance_table() -> dict[str, tuple[str, int]]:
    """EC2 instance type → (model short name, GPUs), from the shipped table."""
    text = resources.files("gpuctl.data").joinpath("ec2_gpu_prices.json").read_text("utf-8")
    gpus = json.loads(text)["instances"]["gpus"]
    return {k: (str(v[0]), int(v[1])) for k, v in gpus.items()}


@lru_cache(maxsize=1)
def known_models() -> tuple[names.Named, ...]:
    return (*geometry.models(), *names.WITHOUT_MIG)


def by_short_name(short: str) -> names.Named | None:
    return next((m for m in known_models() if m.short_name == short), None)


def memory_of(model: names.Named) -> int | None:
    """MiB per GPU of a model gpuctl knows (its geometry, or what EC2 reports for it)."""
    mib = getattr(model, "memory_total_mib", None)
    if isinstance(mib, int):
        return mib
    return KARPENTER_MEMORY_MIB.get(model.short_name)


@lru_cache(maxsize=1024)  # a cluster's nodes carry a few product names, each many times
def model_named(text: str, memory_mib: int | None = None) -> str | None:
    """The model a GPU name means (a GFD product without its suffixes, a Karpenter or GKE
    name, a typed name), the memory choosing between a family's members; None: no one."""
    pool = known_models()
    whole = names.reported(text, pool)
    if whole is not None:
        return whole.short_name
    found = names.candidates(text, pool)
    if len(found) > 1 and memory_mib:
        sized = [(abs((memory_of(m) or 0) - memory_mib), m) for m in found]
        best = min(d for d, _ in sized)
        found = [m for d, m in sized if d == best]
    if len(found) > 1:
        plain = [m for m in found if not {"nvl"} & set(names.tokens(m.short_name))]
        found = plain if len(plain) == 1 else found
    return found[0].short_name if len(found) == 1 else None


def models_for(text: str) -> list[str]:
    """The models a job's gpu_type means: one model's name means it; a family's name means
    its plain member where it has one (`h100`: the 80 GB, not the NVL) and else all of it
    (`a100`: the 40 GB and the 80 GB); [] for a name gpuctl does not know."""
    whole = names.reported(text, known_models())
    if whole is not None:
        return [whole.short_name]
    found = names.candidates(text, known_models())
    plain = [m for m in found if not {"nvl"} & set(names.tokens(m.short_name))]
    if len(found) > 1 and len(plain) == 1 and not {"nvl"} & set(names.tokens(text)):
        found = plain
    return [m.short_name for m in found]


def _int(labels: Mapping[str, str], key: str) -> int | None:
    return whole_number(labels.get(key, ""))


def _gpu_resources(res: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in res.items() if k == GPU or k.startswith((GPU + ".", MIG_PREFIX))}


def identify(
    labels: Mapping[str, str],
    capacity: Mapping[str, int] | None = None,
    allocatable: Mapping[str, int] | None = None,
) -> NodeGpus:
    """The GPUs of a node with these labels and GPU resource counts."""
    cap = _gpu_resources(capacity or {})
    alloc = _gpu_resources(allocatable or {})
    model, scheme, selector, products = _model(labels)
    strategy, invalid, slices = _mig(labels, alloc, cap)
    sharing, replicas, renamed = _sharing(labels, alloc, cap)
    count = _int(labels, KARPENTER_COUNT)
    gfd_count = _int(labels, GFD_COUNT)
    if gfd_count is not None and strategy != "single":
        count = gfd_count  # in the single strategy GFD counts the slices
    if count is None and scheme == "instance-type":
        count = instance_table()[labels[INSTANCE_TYPE]][1]
    if count is None and strategy == "none" and sharing == "none":
        count = cap.get(GPU) or alloc.get(GPU) or None
    memory = _int(labels, KARPENTER_MEMORY)
    if strategy != "single" and _int(labels, GFD_MEMORY):
        memory = _int(labels, GFD_MEMORY)
    return NodeGpus(
        model=model,
        scheme=scheme,
        selector=selector,
        products=products,
        count=count,
        memory_mib=memory,
        mig_strategy=strategy,
        mig_invalid=invalid,
        mig_slices=slices,
        mig_config=labels.get(MIG_CONFIG),
        mig_state=labels.get(MIG_STATE),
        sharing=sharing,
        replicas=replicas,
        shared_resource=renamed,
        capacity=cap,
        allocatable=alloc,
    )


def _model(
    labels: Mapping[str, str],
) -> tuple[str | None, str | None, tuple[tuple[str, str], ...], tuple[str, ...]]:
    """(model, scheme, selector, products) from the first scheme that names a known GPU."""
    products: list[str] = []
    found: tuple[str | None, str | None, tuple[tuple[str, str], ...]] = (None, None, ())
    unnamed = found  # the first scheme that labels a GPU gpuctl cannot name
    for scheme in SCHEMES:
        model, selector, product = _by_scheme(scheme, labels)
        if product:
            products.append(product)
            if unnamed[1] is None:
                unnamed = (None, scheme, selector)
        if model is not None and found[0] is None:
            found = (model, scheme, selector)
    return (*(found if found[0] is not None else unnamed), tuple(dict.fromkeys(products)))


def _by_scheme(
    scheme: str, labels: Mapping[str, str]
) -> tuple[str | None, tuple[tuple[str, str], ...], str | None]:
    """(model, selector, product string) one scheme reads from the labels."""
    if scheme == "gfd":
        value = labels.get(GFD_PRODUCT)
        if not value:
            return None, (), None
        base = names.split_product(value)[0]
        return model_named(base), ((GFD_PRODUCT, value),), base
    if scheme == "gke":
        value = labels.get(GKE_ACCELERATOR)
        if not value:
            return None, (), None
        model = GKE_MODELS.get(value) or model_named(value)
        return model, ((GKE_ACCELERATOR, value),), value
    if scheme == "karpenter":
        value = labels.get(KARPENTER_NAME)
        if not value:
            return None, (), None
        memory = _int(labels, KARPENTER_MEMORY)
        model = model_named(value, memory)
        selector: tuple[tuple[str, str], ...] = ((KARPENTER_NAME, value),)
        if model and len(names.candidates(value, known_models())) > 1 and memory:
            selector += ((KARPENTER_MEMORY, str(memory)),)
        return model, selector, value
    if scheme == "aks":
        size = labels.get(INSTANCE_TYPE, "")
        if not labels.get(AKS_ACCELERATOR):
            return None, (), None
        model = next((m for pattern, m in AKS_SERIES if pattern.match(size)), None)
        return model, ((INSTANCE_TYPE, size),) if model else (), None
    if scheme == "gpuctl":
        value = labels.get(GPUCTL_TYPE)
        if not value:
            return None, (), None
        return model_named(value), ((GPUCTL_TYPE, value),), value
    size = labels.get(INSTANCE_TYPE, "")
    entry = instance_table().get(size)
    return (entry[0], ((INSTANCE_TYPE, size),), None) if entry else (None, (), None)


def _mig(
    labels: Mapping[str, str], alloc: Mapping[str, int], cap: Mapping[str, int]
) -> tuple[str, bool, dict[str, int]]:
    """(strategy, invalid, profile → slices offered)."""
    mixed = {
        k[len(MIG_PREFIX) :]: v
        for k, v in {**cap, **alloc}.items()
        if k.startswith(MIG_PREFIX) and not k.endswith(".shared")
    }
    if not mixed:  # GFD's labels while the plugin has not advertised them yet
        for key, value in labels.items():
            if key.startswith(MIG_PREFIX) and key.endswith(".count"):
                mixed[key[len(MIG_PREFIX) : -len(".count")]] = whole_number(value) or 0
    if mixed:
        return "mixed", False, {mig_profile(p): n for p, n in sorted(mixed.items())}
    _, profile, _ = names.split_product(labels.get(GFD_PRODUCT, ""))
    if profile == "invalid":
        return "single", True, {}
    partition = labels.get(GKE_PARTITION)
    if profile or partition:
        slices = alloc.get(GPU, cap.get(GPU, 0))
        return "single", False, {mig_profile(profile or partition or ""): slices}
    return "none", False, {}


def mig_profile(name: str) -> str:
    """A profile as the geometry names it: 1g.10gb.me (a resource or label) → 1g.10gb+me."""
    return re.sub(r"^([0-9]+g\.[0-9]+gb)\.", r"\1+", name.lower())


def _sharing(
    labels: Mapping[str, str], alloc: Mapping[str, int], cap: Mapping[str, int]
) -> tuple[str, int, str | None]:
    """(strategy, replicas per GPU, renamed resource or None)."""
    renamed = next((k for k in {**cap, **alloc} if k == SHARED_GPU), None)
    replicas = _int(labels, GFD_REPLICAS) or 1
    strategy = labels.get(GFD_SHARING, "")
    gke = labels.get(GKE_SHARING, "")
    if gke:
        strategy = "mps" if gke == "mps" else "time-slicing"
        replicas = _int(labels, "cloud.google.com/gke-max-shared-clients-per-gpu") or replicas
    elif strategy not in ("time-slicing", "mps"):
        shared = names.split_product(labels.get(GFD_PRODUCT, ""))[2]
        strategy = "time-slicing" if shared or renamed or replicas > 1 else "none"
    if strategy == "none":
        return "none", 1, None
    return strategy, replicas, renamed
