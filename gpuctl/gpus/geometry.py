"""MIG geometry of each GPU model, from the sourced table shipped as package data.

The JSON (``gpuctl/data/mig_geometry.json``) keeps its sources' raw shapes: some values are
lists (one per observed driver) or the string ``"unconfirmed"``. This module turns it into
plain, typed records once; everything else in gpuctl reads only these records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from gpuctl.common.errors import GpuctlError
from gpuctl.gpus import names

# Short names used in specs and on the command line (``8xH100-80GB``), and the total
# framebuffer memory NVML reports for the whole GPU (MiB, as nvidia-smi prints it).
_MODELS = {
    "NVIDIA A100-SXM4-40GB": ("A100-40GB", 40960),
    "NVIDIA A100-SXM4-80GB": ("A100-80GB", 81920),
    "NVIDIA A30": ("A30", 24576),
    "NVIDIA H100 80GB HBM3": ("H100-80GB", 81559),
    "NVIDIA H100 NVL": ("H100-NVL", 95830),
    "NVIDIA GH200 480GB": ("GH200-480GB", 97871),
    "NVIDIA H20": ("H20", 97871),
    "NVIDIA H200": ("H200", 143771),
    "NVIDIA H200 NVL": ("H200-NVL", 143771),
    "NVIDIA GH200 144G HBM3e": ("GH200-144GB", 146931),
    "NVIDIA B200": ("B200", 183359),
    "unconfirmed (GB200)": ("GB200", 189471),
    # Derived from the names of their 7g profiles (see the entries' notes in the JSON).
    "NVIDIA B300 SXM6 AC": ("B300", 275040),
    "NVIDIA GB300": ("GB300", 284416),
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": ("RTX-PRO-6000", 97887),
}


# NVML_COMPUTE_INSTANCE_PROFILE_* by compute slices (nvml.h).
CI_PROFILE_BY_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
# ... and back, _1_SLICE_REV1 (7) included: the driver's default compute instance in a 1g
# REV2 GPU instance on Hopper.
CI_PROFILE_SLICES = {i: s for s, i in CI_PROFILE_BY_SLICES.items()} | {7: 1}


@dataclass(frozen=True)
class Profile:
    """One GPU-instance profile of one GPU model."""

    name: str  # e.g. "1g.10gb", "1g.10gb+me"
    index: int  # NVML_GPU_INSTANCE_PROFILE_* constant value (what GetGpuInstanceProfileInfo takes)
    # The id NVML returns for that constant and Create*/Placements take; None if unconfirmed.
    # gpuctl asks the GPU for it (as mig-parted does); the table's value is for display.
    profile_id: int | None
    slices: int  # compute (SM) slices
    memory_slices: int
    memory_mib: int | None  # None if unconfirmed
    sm_count: int | None
    max_instances: int
    starts: tuple[int, ...]  # valid placement starts, in placement units
    size: int  # placement size, in placement units
    ci_profile_id: int | None  # default compute-instance profile, where sourced
    aliases: tuple[str, ...] = ()  # the names other drivers give this profile (GB200 3g.95gb)

    @property
    def resource_name(self) -> str:
        """The Kubernetes extended resource the device plugin advertises (mixed strategy)."""
        return "nvidia.com/mig-" + self.name.replace("+", ".")


@dataclass(frozen=True)
class GpuModel:
    nvml_name: str
    short_name: str
    memory_total_mib: int
    memory_slices: int  # placement units on the GPU (8 on data-center GPUs, 4 on A30)
    compute_slices: int
    max_gpu_instances: int
    architecture: str
    compute_capability: str
    profiles: tuple[Profile, ...]
    pci_device_ids: tuple[str, ...] = ()  # as mig-parted's device-filter writes them

    def profile(self, name: str) -> Profile:
        """The profile called `name`, by this driver's name or an older one's (an alias)."""
        for p in self.profiles:
            if p.name == name:
                return p
        for p in self.profiles:
            if name in p.aliases:
                return p
        raise GpuctlError(
            f"{self.short_name} has no MIG profile {name!r}",
            hint=f"{self.short_name} profiles: " + ", ".join(p.name for p in self.profiles),
        )

    def gpus_for(self, slices: Mapping[str, int]) -> int:
        """The fewest GPUs of this model that hold these MIG slices (profile -> how many):
        none holds more instances of a profile than its maximum, more compute or memory
        slices than it has. Exact for the layouts mig-parted's configs make (all-1g.10gb:
        7 a GPU; all-3g.40gb: 2; one GPU of 3g, 2g and two 1g)."""
        profiles = [(self.profile(name), n) for name, n in slices.items() if n > 0]
        bounds = [-(-n // p.max_instances) for p, n in profiles]
        for used, total in (
            (sum(p.slices * n for p, n in profiles), self.compute_slices),
            (sum(p.memory_slices * n for p, n in profiles), self.memory_slices),
        ):
            bounds.append(-(-used // total))
        return max(bounds, default=0)

    def has_profile(self, name: str) -> bool:
        return any(name in (p.name, *p.aliases) for p in self.profiles)

    def profile_by_id(self, profile_id: int) -> Profile | None:
        return next((p for p in self.profiles if p.profile_id == profile_id), None)

    def profile_by_index(self, index: int) -> Profile | None:
        """The profile of NVML constant `index` (NVML_GPU_INSTANCE_PROFILE_*)."""
        return next((p for p in self.profiles if p.index == index), None)


def _first_int(value: object) -> int | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@lru_cache(maxsize=1)
def models() -> tuple[GpuModel, ...]:
    raw = json.loads(resources.files("gpuctl.data").joinpath("mig_geometry.json").read_text())
    out = []
    for g in raw:
        short, total = _MODELS[g["nvml_name"]]
        profiles = tuple(
            Profile(
                name=p["name"],
                index=p["nvml_profile_constant_value"],
                profile_id=_first_int(p["profile_id"]),
                slices=p["slices"],
                memory_slices=p["memory_slices"],
                memory_mib=_first_int(p["memory_mib"]),
                sm_count=_first_int(p.get("sm_count")),
                max_instances=p["max_instances"],
                starts=tuple(p["placements_start"]),
                size=p["placement_size"],
                ci_profile_id=_first_int(p.get("default_ci_profile_id")),
                aliases=tuple(p.get("name_aliases", ())),
            )
            for p in g["profiles"]
        )
        out.append(
            GpuModel(
                nvml_name=g["nvml_name"],
                short_name=short,
                memory_total_mib=total,
                memory_slices=g["memory_slices_total"],
                compute_slices=g["compute_slices_total"],
                max_gpu_instances=g["max_gpu_instances"],
                architecture=g["architecture"],
                compute_capability=g["compute_capability"],
                profiles=profiles,
                pci_device_ids=tuple(g.get("pci_device_ids_mig_parted", ())),
            )
        )
    return tuple(out)


def find_model(name: str) -> GpuModel:
    """The model a name typed by a person means (``H100``, ``a100-80gb``,
    ``NVIDIA-H100-80GB-HBM3``; see gpuctl.gpus.names); UsageError for none or several."""
    return names.resolve(name, models())


def known_model(name: str) -> GpuModel | None:
    """The model of a GPU by the name it reports (NVML, DCGM), or None for a GPU gpuctl
    has no MIG geometry for."""
    return names.reported(name, models())


def model_by_pci_id(pci_id: int) -> GpuModel | None:
    """The model whose MIG geometry a GPU of this PCI device id (device << 16 | vendor, as
    NVML's pciDeviceId) has: an H100 PCIe or an H800 has the H100 80GB's, as NVIDIA's own
    mig-parted config groups them."""
    return next((m for m in models() if pci_id in {int(i, 16) for i in m.pci_device_ids}), None)


def all_profile_names() -> frozenset[str]:
    """Every profile name of every model, the names older drivers used included."""
    return frozenset(n for m in models() for p in m.profiles for n in (p.name, *p.aliases))


def media_conflict(names: Sequence[str]) -> tuple[str, list[str]] | None:
    """Which media-engine rule (nvml.h) GPU instances of these profiles on one GPU break, or
    None. A GPU has one set of media engines: ("+me", the +me instances) when there are two
    or more; ("+me.all", the others) when a +me.all instance has any but -me ones beside it."""
    media = [n for n in names if _has_attr(n, "+me")]
    if len(media) > 1:
        return "+me", media
    me_all = [n for n in names if _has_attr(n, "+me.all")]
    if me_all:
        others = [n for n in names if not _has_attr(n, "-me")]
        others.remove(me_all[0])
        if others:
            return "+me.all", others
    return None


def _has_attr(name: str, attr: str) -> bool:
    # "+me" must not match "+me.all"; "-me" is its own attribute.
    tail = name[name.find("gb") + 2 :]
    return tail == attr
