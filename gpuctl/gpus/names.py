"""GPU model names as people, drivers and node labels write them, resolved to a model.

- Typed by a person (`resolve`): `H100`, `a100-80gb`, `H100 80GB HBM3`, `NVIDIA-H100-80GB-HBM3`,
  `H100-SXM5 80GB`: case, spaces, dashes and underscores do not matter, nor does the vendor
  word (NVIDIA, Tesla); a shortened name is fine while it names one model. A family name
  alone means its plain part (`H100` is the 80 GB one; `H100 NVL` names the other), and is
  refused, with the candidates, where the family has no plain part (`A100`: 40 or 80 GB).
- Reported by a GPU (NVML's name, DCGM's modelName) (`reported`): a whole name, never a
  shortened one, so that a GPU gpuctl does not know is not taken for one it does.
- Written by GPU Feature Discovery in the `nvidia.com/gpu.product` node label
  (`split_product`): the NVML name with dashes for spaces, then `-MIG-<profile>` (a `+` in the
  profile written as `.`) in the single MIG strategy, then `-SHARED` for a time-sliced GPU
  that is not renamed (k8s-device-plugin internal/lm/resource.go, productLabel).
- Given as a job's `gpu_type` (`gpu_type_warning`): compared with what those labels hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, TypeVar

from gpuctl.common.errors import UsageError

GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
MAX_NAME = 100  # longer than any GPU name; a longer text is refused, not searched

# Names NVML gives other boards with a model's MIG geometry: GPU Feature Discovery labels
# NVIDIA-A100-PCIE-40GB, NVIDIA-A100-80GB-PCIe, NVIDIA-H100-PCIe(-MIG-2g.20gb) and
# NVIDIA-GB200 on public clusters; NVIDIA's MIG guide gives the PCIe boards the profiles of
# the SXM ones.
OTHER_REPORTED = {
    "A100-40GB": ("NVIDIA A100-PCIE-40GB",),
    "A100-80GB": ("NVIDIA A100 80GB PCIe",),
    "H100-80GB": ("NVIDIA H100 PCIe",),
    "GB200": ("NVIDIA GB200",),
}
# The product names of NVIDIA's MIG guide ("Supported GPUs"), as people type them.
PRODUCT_NAMES = {
    "A100-40GB": ("A100-SXM4 40GB", "A100-PCIE 40GB"),
    "A100-80GB": ("A100-SXM4 80GB", "A100-PCIE 80GB"),
    "A30": ("A30 24GB",),
    "H100-80GB": ("H100-SXM5 80GB", "H100-PCIE 80GB"),
    "H100-NVL": ("H100-SXM5 94GB", "H100-PCIE 94GB"),
    "GH200-480GB": ("H100 on GH200 96GB",),
    "H20": ("H20 96GB",),
    "H200": ("H200-SXM5 141GB",),
    "H200-NVL": ("H200 NVL 141GB",),
    "B200": ("B200 180GB",),
    "GB200": ("GB200 186GB",),
}
# Words that set a part apart from the plain member of its family.
_VARIANTS = frozenset({"nvl"})
_VENDORS = frozenset({"nvidia", "tesla"})
_TYPED = re.compile(r"[A-Za-z0-9 _.\-]+")


class Named(Protocol):
    """A GPU model as names see it (gpuctl.gpus.geometry.GpuModel is one)."""

    @property
    def nvml_name(self) -> str: ...

    @property
    def short_name(self) -> str: ...


class MigNamed(Named, Protocol):
    """A GPU model with MIG profiles, as names see it (GpuModel is one)."""

    def has_profile(self, name: str) -> bool: ...


@dataclass(frozen=True)
class OtherGpu:
    """A GPU without MIG that gpuctl knows by name."""

    nvml_name: str
    short_name: str


# The GPUs of the EC2 instance families gpuctl prices (g4dn, g5, g6, g6e, p3, p3dn), by the
# names GPU Feature Discovery labels them with on public clusters.
WITHOUT_MIG = (
    OtherGpu("Tesla T4", "T4"),
    OtherGpu("NVIDIA A10G", "A10G"),
    OtherGpu("NVIDIA L4", "L4"),
    OtherGpu("NVIDIA L40S", "L40S"),
    OtherGpu("Tesla V100-SXM2-16GB", "V100-16GB"),
    OtherGpu("Tesla V100-SXM2-32GB", "V100-32GB"),
)

M = TypeVar("M", bound=Named)


@lru_cache(maxsize=4096)  # every node, model and name is compared word by word, often
def tokens(text: str) -> tuple[str, ...]:
    """The words of a GPU name, lower-case, without the vendor: `NVIDIA A100-SXM4-80GB` and
    `a100 sxm 80 GB` are both (a100, sxm, 80gb)."""
    out: list[str] = []
    for word in re.split(r"[^a-z0-9]+", text.lower()):
        if not word or word in _VENDORS:
            continue
        if word in ("gb", "g") and out and out[-1].isdigit():
            out[-1] += "gb"
            continue
        if re.fullmatch(r"[0-9]+g", word):
            word += "b"
        elif re.fullmatch(r"sxm[0-9]*", word):
            word = "sxm"  # the SXM generation goes with the GPU: A100 is SXM4, H100 SXM5
        out.append(word)
    return tuple(out)


def reported_names(model: Named) -> tuple[str, ...]:
    """What NVML calls GPUs of this model (GPU Feature Discovery's label, with dashes)."""
    own = () if model.nvml_name.startswith("unconfirmed") else (model.nvml_name,)
    return own + OTHER_REPORTED.get(model.short_name, ())


def _names(model: Named) -> tuple[str, ...]:
    return (
        model.short_name,
        *reported_names(model),
        *PRODUCT_NAMES.get(model.short_name, ()),
    )


def family(model: Named) -> tuple[str, ...]:
    """The words every name of the model has: its short name less memory and variant."""
    return tuple(w for w in tokens(model.short_name) if w not in _VARIANTS and not _is_memory(w))


def _is_memory(word: str) -> bool:
    return re.fullmatch(r"[0-9]+gb", word) is not None


def _plain(model: Named) -> bool:
    return not _VARIANTS & set(tokens(model.short_name))


def reported(name: str, models: Iterable[M]) -> M | None:
    """The model a GPU's own name (NVML, DCGM) is a whole name of, or None."""
    words = tokens(name)
    if not words or len(name) > MAX_NAME:
        return None
    return next((m for m in models if any(tokens(n) == words for n in _names(m))), None)


def candidates(text: str, models: Iterable[M]) -> list[M]:
    """Every model that TEXT names, whole or shortened (a GFD label's -MIG-/-SHARED parts
    aside): all of a family for its bare name."""
    words = tokens(split_product(text, exact=False)[0])
    if not words:
        return []
    pool = list(models)
    whole = [m for m in pool if any(tokens(n) == words for n in _names(m))]
    if whole:
        return whole
    given = set(words)
    return [
        m
        for m in pool
        if set(family(m)) <= given and any(given <= set(tokens(n)) for n in _names(m))
    ]


def resolve(text: str, models: Sequence[M]) -> M:
    """The one model a name typed by a person means; UsageError, with the candidates, for
    a name that means none or more than one."""
    name = text.strip()
    if not name:
        raise UsageError("no GPU model given", hint="known models: " + _listed(models))
    if len(name) > MAX_NAME:
        raise UsageError(f"GPU model name {name[:40]!r}… is too long ({len(name)} characters)")
    if not _TYPED.fullmatch(name):
        raise UsageError(
            f"unknown GPU model {name!r}",
            hint="a GPU model name has only letters, digits, spaces, '-', '_' and '.'",
        )
    found = candidates(name, models)
    if len(found) > 1 and not _VARIANTS & set(tokens(name)):
        plain = [m for m in found if _plain(m)]
        found = plain if len(plain) == 1 else found
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(
            f"GPU model {name!r} is ambiguous: it could be {_listed(found, ' or ')}",
            hint=f"name one, e.g. {found[-1].short_name}",
        )
    words = set(tokens(name))
    kin = [m for m in models if set(family(m)) & words]
    raise UsageError(
        f"unknown GPU model {name!r}",
        hint=("models like it: " if kin else "known models: ")
        + _listed(kin or models)
        + _without_mig_note(name),
    )


def _listed(models: Iterable[Named], sep: str = ", ") -> str:
    return sep.join(m.short_name for m in models)


def _without_mig_note(name: str) -> str:
    other = candidates(name, WITHOUT_MIG)
    return (
        f"; {_listed(other, ' and ')} {'has' if len(other) == 1 else 'have'} no MIG"
        if other
        else ""
    )


def split_product(value: str, exact: bool = True) -> tuple[str, str | None, bool]:
    """A GPU Feature Discovery product label → (GPU name part, MIG profile or None, shared):
    NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED → (NVIDIA-A100-SXM4-40GB, 1g.5gb, True). The
    profile is written back with its `+` (1g.10gb.me → 1g.10gb+me). `exact=False` takes the
    MIG and SHARED words in any case and with spaces or underscores, as people type them."""
    flags = 0 if exact else re.IGNORECASE
    sep = "-" if exact else "[-_ ]"
    shared = re.search(f"{sep}SHARED$", value, flags)
    if shared:
        value = value[: shared.start()]
    mig = re.search(f"{sep}MIG{sep}(.+)$", value, flags)
    profile = None
    if mig:
        value, profile = value[: mig.start()], mig.group(1)
        profile = re.sub(r"^([0-9]+g\.[0-9]+gb)\.", r"\1+", profile.lower())
    return value, profile, shared is not None


def product_label(model: Named) -> str:
    """The `nvidia.com/gpu.product` value GPU Feature Discovery gives a whole GPU of this
    model (its NVML name with dashes); the model's short name where NVML's is unknown."""
    names = reported_names(model)
    return (names[0] if names else model.short_name).replace(" ", "-")


def gpu_type_warning(value: str, label_key: str, models: Sequence[MigNamed]) -> str | None:
    """Why a job's gpu_type value may match no node, or None.

    With GPU Feature Discovery's key the value must be a product label GFD writes for a GPU
    gpuctl knows. With any other key (gpuctl's gpu-type, a site's own) it may be any
    spelling of a known GPU: gpuctl's own are lower-case (`h100`, `a100-80gb`, as its
    examples and `provision` write them), GFD's as GFD writes them. Either way a value that
    differs from one of those only in case is flagged: node labels are case-sensitive."""
    known: list[Named] = [*models, *WITHOUT_MIG]
    gfd = label_key == GFD_PRODUCT_LABEL
    products = {n.replace(" ", "-"): m for m in known for n in reported_names(m)}
    base, profile, _ = split_product(value)
    if base in products:
        model = products[base]
        mig = next((m for m in models if m is model), None)
        if profile is not None and mig is not None and not mig.has_profile(profile):
            return (
                f"{value!r}: {mig.short_name} has no MIG profile {profile!r}, so "
                "GPU Feature Discovery labels no node with this value"
            )
        return None
    plain = {n for m in known for n in (m.short_name.lower(), "-".join(family(m)))}
    if not gfd and value in plain:
        return None
    fixed = _case_fixed(value, products, set() if gfd else plain)
    if fixed is not None:
        return (
            f"{value!r} differs only in case from {fixed!r}: node labels are "
            f"case-sensitive, so nodes labelled {label_key}={fixed} do not match"
        )
    meant = candidates(value, known)
    if gfd and meant:
        return (
            f"{value!r} is not a value GPU Feature Discovery writes in {label_key}; "
            "for this GPU it writes " + " or ".join(_labels_like(value, meant))
        )
    if gfd:
        return (
            f"{value!r} is not a {label_key} value gpuctl knows (GPU Feature "
            f"Discovery writes e.g. {product_label(known[0])}): check the nodes' labels"
        )
    if meant:
        return None
    return (
        f"{value!r} matches no GPU name gpuctl knows: the job only runs on nodes "
        f"labelled {label_key}={value} exactly"
    )


def _labels_like(value: str, models: list[Named]) -> list[str]:
    """The product labels of MODELS, those whose words include VALUE's first."""
    labels = [n.replace(" ", "-") for m in models for n in reported_names(m)]
    words = set(tokens(value))
    return [n for n in labels if words <= set(tokens(n))] or labels


def _case_fixed(value: str, products: dict[str, Named], plain: set[str]) -> str | None:
    """The known spelling VALUE differs from only in case, or None."""
    if value.lower() in plain:
        return value.lower()
    base, profile, shared = split_product(value, exact=False)
    name = next((n for n in products if n.lower() == base.lower()), None)
    if name is None:
        return None
    mig = f"-MIG-{profile.replace('+', '.')}" if profile else ""
    fixed = name + mig + ("-SHARED" if shared else "")
    return fixed if fixed.lower() == value.lower() else None
