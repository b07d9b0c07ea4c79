"""Who a node's accelerator is when it is not NVIDIA's: the model, as the labels its vendor's
tools write name it, from the sourced tables of gpuctl/data/accelerators.json. Pure.

| vendor | labels read, most precise first | written by |
|---|---|---|
| amd | `amd.com/gpu.product-name` (sysfs product_name, spaces → `_`), else `amd.com/gpu.device-id` (PCI ID without 0x: a VF or an AKS node has no product name) through the device-ID table; `amd.com/gpu.vram` (`192G`); `amd.com/gpu.compute-memory-partition`; each also as `beta.amd.com/gpu.<prop>` or `<prop>.<value>=<count>`; else the VM size (`Standard_ND96isr_MI300X_v5`, `BM.GPU.MI300X.8`) | AMD's node labeller (ROCm/k8s-device-plugin cmd/k8s-node-labeller); AKS, OCI |
| aws | `karpenter.k8s.aws/instance-accelerator-name` (`trainium2`), else `node.kubernetes.io/instance-type` (`inf2.48xlarge`) through the instance table | Karpenter; the cloud's node controller |
| google | `cloud.google.com/gke-tpu-accelerator` (`tpu-v5-lite-podslice`) and `cloud.google.com/gke-tpu-topology` (`2x4`, the slice's) | GKE |
| intel | `habana.ai/device.type` (`GAUDI2`), else `habana.ai/device.id` (`1020`), else the instance type (`dl1.24xlarge`) | Habana feature discovery; the node controller |

A job spec's `accelerator:` names a model the same tables know (`models_named`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

GIB = 1 << 30
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
OLD_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
KARPENTER_ACCELERATOR = "karpenter.k8s.aws/instance-accelerator-name"
TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
GKE_ACCELERATOR_COUNT = "cloud.google.com/gke-accelerator-count"
AMD_PARTITION = "amd.com/gpu.compute-memory-partition"
GAUDI_TYPE = "habana.ai/device.type"
GAUDI_ID = "habana.ai/device.id"
_AMD_MODEL = re.compile(r"MI\d{3}[A-Z]?", re.I)


@dataclass(frozen=True)
class Named:
    """What a node's labels say of one vendor's accelerator."""

    model: str | None = None
    product: str | None = None  # as the labels wrote it
    memory_bytes: int | None = None  # per device
    scheme: str | None = None  # the labels that named it
    partition: str | None = None  # an AMD compute/memory partition, a TPU slice's topology


@lru_cache(maxsize=1)
def _catalogue() -> dict[str, Any]:
    text = resources.files("gpuctl.data").joinpath("accelerators.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _table(name: str) -> dict[str, Any]:
    table: dict[str, Any] = _catalogue()[name]["table"]
    return table


def models() -> dict[str, str]:
    """Every model the tables know → its vendor."""
    return {m: row[0] for m, row in _table("models").items()}


def memory_of(model: str | None) -> int | None:
    """Bytes per device of MODEL; None: not one the tables know."""
    row = _table("models").get(model or "")
    return int(row[1]) * GIB if row else None


def instance(labels: Mapping[str, str]) -> tuple[str, int, int, int] | None:
    """The node's instance type as the table knows it: (model, devices, NeuronCores, EFA)."""
    size = labels.get(INSTANCE_TYPE) or labels.get(OLD_INSTANCE_TYPE) or ""
    row = _table("instances").get(size)
    return (str(row[0]), int(row[1]), int(row[2]), int(row[3])) if row else None


def instance_types(model: str) -> list[str]:
    """The instance types (or VM sizes) that have MODEL."""
    return [size for size, row in _table("instances").items() if row[0] == model]


def _canonical(text: str) -> str:
    return re.sub(r"[\s_\-.]", "", text).lower()


@lru_cache(maxsize=256)
def models_named(text: str) -> tuple[str, ...]:
    """The models a job spec's accelerator name means (`mi300x`, `trainium2`, `trn2`,
    `tpu-v5e`, `v6e`, `gaudi2`; case, dashes and underscores do not matter); () for a name
    the tables do not know (an NVIDIA GPU's is gpuctl.gpus.identity's)."""
    wanted = _canonical(text)
    out = []
    for model, row in _table("models").items():
        names = {_canonical(model), *(_canonical(a) for a in row[2])}
        if model.startswith("TPU"):
            names.add(_canonical(model.removeprefix("TPU-")))
        if wanted in names:
            out.append(model)
    return tuple(out)


def spec_vendors(spec: str) -> set[str]:
    """The vendors a node spec such as `8xMI300X` or `2xH200,2xA30` names (`amd`, …;
    `nvidia` for a model these tables do not know: NVIDIA's are gpuctl.gpus.identity's)."""
    vendors = set()
    for part in spec.split(","):
        found = models_named(part.strip().partition("x")[2])
        vendors |= {models()[m] for m in found} or {"nvidia"}
    return vendors


def accelerator_values(model: str) -> list[str]:
    """GKE's accelerator label values for a TPU model."""
    return [v for v, m in tpu_accelerators().items() if m == model]


def tpu_accelerators() -> dict[str, str]:
    """GKE's TPU accelerator label values → the model each names."""
    return dict(_table("tpus"))


def karpenter_names(model: str) -> list[str]:
    return [v for v, m in _table("karpenter_accelerator_names").items() if m == model]


def amd_device_ids(model: str) -> list[str]:
    return [i for i, m in _table("amd_device_ids").items() if m == model]


def gaudi_device_ids(model: str) -> list[str]:
    return [i for i, m in _table("gaudi_device_ids").items() if m == model]


def _amd(labels: Mapping[str, str], prop: str) -> list[str]:
    """The values the node labeller wrote for PROP, in either of its forms and prefixes."""
    out = []
    for prefix in ("amd.com/gpu.", "beta.amd.com/gpu."):
        key = prefix + prop
        if labels.get(key):
            out.append(labels[key])
        out += [k[len(key) + 1 :] for k in labels if k.startswith(key + ".")]
    return list(dict.fromkeys(out))


def _one(values: list[str | None]) -> str | None:
    found = set(values)
    return found.pop() if len(found) == 1 else None


def amd(labels: Mapping[str, str], resource: str) -> Named:
    products = _amd(labels, "product-name")
    ids = [i.lower().removeprefix("0x") for i in _amd(labels, "device-id")]
    table = _table("amd_device_ids")
    model = None
    if products:
        model = _one([amd_model(p) for p in products])
    if model is None and ids:
        model = _one([table.get(i) for i in ids])
    scheme = "amd-labeller" if model else None
    if model is None and (row := instance(labels)) and models().get(row[0]) == "amd":
        model, scheme = row[0], "instance-type"
    vram = [int(v[:-1]) for v in _amd(labels, "vram") if re.fullmatch(r"[0-9]{1,6}G", v)]
    memory = vram[0] * GIB if len(set(vram)) == 1 else memory_of(model)
    partition = labels.get(AMD_PARTITION) if resource == "amd.com/gpu" else None
    if partition and partition.lower().startswith("spx"):
        partition = None  # one partition of a whole GPU is the GPU
    if partition:
        memory = None  # a partition's share of the GPU's memory
    product = products[0] if len(products) == 1 else None
    return Named(model, product, memory, scheme, partition.lower() if partition else None)


def amd_model(product: str) -> str | None:
    """The model an AMD product name is (`AMD_Instinct_MI300X_OAM`: MI300X)."""
    m = _AMD_MODEL.search(product)
    model = m.group(0).upper() if m else None
    return model if model in models() else None


def neuron(labels: Mapping[str, str], resource: str) -> Named:
    name = labels.get(KARPENTER_ACCELERATOR, "")
    model = _table("karpenter_accelerator_names").get(name)
    scheme, product = ("karpenter", name) if model else (None, None)
    row = instance(labels)
    if model is None and row and models().get(row[0]) == "aws":
        model, scheme = row[0], "instance-type"
        product = labels.get(INSTANCE_TYPE) or labels.get(OLD_INSTANCE_TYPE)
    memory = memory_of(model) if resource != "aws.amazon.com/neuroncore" else None
    return Named(model, product, memory, scheme)


def tpu(labels: Mapping[str, str], resource: str) -> Named:
    value = labels.get(TPU_ACCELERATOR)
    if not value:
        return Named()
    model = _table("tpus").get(value)
    return Named(model, value, memory_of(model), "gke", labels.get(TPU_TOPOLOGY) or None)


def gaudi_model(name: str) -> str | None:
    """The model a Gaudi's name is (`Gaudi2`, `GAUDI2`, `Gaudi`: the first)."""
    m = re.match(r"GAUDI([0-9]?)", name.upper())
    if m is None:
        return None
    return "Gaudi" + (m.group(1) if m.group(1) not in ("", "1") else "")


def gaudi(labels: Mapping[str, str], resource: str) -> Named:
    if not resource.startswith("habana.ai/"):
        return Named()  # Intel's GPUs (gpu.intel.com/) are not named here
    kind = labels.get(GAUDI_TYPE, "")
    model = gaudi_model(kind)
    if model is None:
        model = _table("gaudi_device_ids").get(labels.get(GAUDI_ID, "").lower())
    scheme = "hfd" if model else None
    row = instance(labels)
    if model is None and row and models().get(row[0]) == "intel":
        model, scheme = row[0], "instance-type"
    return Named(model, kind or None, memory_of(model), scheme)


NAMERS = {"amd": amd, "aws": neuron, "google": tpu, "intel": gaudi}


def named(vendor: str, labels: Mapping[str, str], resource: str) -> Named:
    """What the labels say of VENDOR's accelerator offered as RESOURCE."""
    namer = NAMERS.get(vendor)
    return namer(labels, resource) if namer else Named()


def chips_per_host(topology: str, machine_type: str | None = None) -> int:
    """TPU chips on each host of a slice of TOPOLOGY (`2x4`): the machine type's own count
    (`ct5lp-hightpu-4t`: 4) when known, else xpk's rule (4 per VM unless the slice is one
    chip)."""
    if machine_type and (m := re.search(r"-(\d+)t$", machine_type)):
        return int(m.group(1))
    return 1 if slice_chips(topology) == 1 else 4


def slice_chips(topology: str) -> int:
    """The chips of a TPU slice of TOPOLOGY: the product of its dimensions."""
    chips = 1
    for dim in topology.lower().split("x"):
        chips *= int(dim)
    return chips
