"""MIG layouts of one GPU: parse, validate against the GPU's real geometry, place.

A *layout* is a multiset of MIG devices, written as mig-parted writes it: ``{"3g.40gb": 2}``.
Each MIG device is one GPU instance (GI) of a profile with one compute instance (CI) in it;
``1c.3g.40gb`` asks for a 3g GI holding a 1-slice CI, ``3g.40gb`` for one CI over the whole GI.

Validation rejects what the hardware rejects and says why in words: unknown profiles (listing
the GPU's own), more than a profile's max instances, two media-extension (+me) instances,
more instances, compute slices or memory slices than the GPU has, and layouts whose
instances cannot all be placed at the fixed starts NVML allows without overlap.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.common.numbers import whole_number
from gpuctl.gpus import geometry
from gpuctl.gpus.geometry import CI_PROFILE_BY_SLICES, GpuModel, Profile

_NUMBER = re.compile(r"[+-]?[0-9]+\Z")  # what Go's strconv.Atoi reads
_ATTRIBUTE = re.compile(r"[A-Za-z][A-Za-z0-9.]*\Z")


class LayoutError(UsageError):
    """A layout the GPU cannot hold; the message says why."""


@dataclass(frozen=True)
class Device:
    """One MIG device a layout asks for: a GI of ``profile`` with one CI of ``ci_slices``."""

    profile: Profile
    ci_slices: int

    @property
    def name(self) -> str:
        if self.ci_slices == self.profile.slices:
            return self.profile.name
        return f"{self.ci_slices}c.{self.profile.name}"

    @property
    def ci_profile_id(self) -> int:
        if self.ci_slices == self.profile.slices and self.profile.ci_profile_id is not None:
            return self.profile.ci_profile_id
        return CI_PROFILE_BY_SLICES[self.ci_slices]


@dataclass(frozen=True)
class Placed:
    """A device at a placement: ``start`` and ``profile.size`` are in placement units."""

    device: Device
    start: int

    @property
    def profile(self) -> Profile:
        return self.device.profile

    @property
    def end(self) -> int:  # exclusive
        return self.start + self.profile.size

    @property
    def mask(self) -> int:
        return ((1 << self.profile.size) - 1) << self.start

    def slices_text(self) -> str:
        return slice_range(self.start, self.profile.size)


def slice_range(start: int, size: int) -> str:
    return str(start) if size == 1 else f"{start}-{start + size - 1}"


# ---------- names ----------


@dataclass(frozen=True)
class ProfileName:
    """A MIG profile name read as mig-parted reads one (go-nvlib's parseMigProfile):
    ``[<C>c.]<G>g.<GB>gb``, then ``+attr[,attr...]`` or ``-attr``."""

    c: int
    g: int
    gb: int
    attributes: tuple[str, ...] = ()
    negative: bool = False

    @property
    def gi_name(self) -> str:
        """The GPU-instance profile: ``3g.40gb`` of ``1c.3g.40gb``, ``1g.10gb+me``."""
        # go-nvlib compares attributes as a set
        attributes = ",".join(sorted(self.attributes))
        tail = ("-" if self.negative else "+") + attributes if attributes else ""
        return f"{self.g}g.{self.gb}gb{tail}"


def parse_profile_name(name: object) -> ProfileName | str:
    """The parsed name, or why it is not one (the checks go-nvlib makes, in its order)."""
    if not isinstance(name, str) or not name:
        return "a profile name must be a non-empty string"
    plus, minus = name.split("+", 1), name.split("-", 1)
    if len(plus) == 2 and len(minus) == 2:
        return "it has both '+' and '-' attributes"
    parts = plus if len(plus) == 2 else minus
    fields = parts[0].split(".", 2)
    if len(fields) not in (2, 3):
        return "expected <G>g.<GB>gb or <C>c.<G>g.<GB>gb"
    suffixes = ("c", "g", "gb") if len(fields) == 3 else ("g", "gb")
    numbers = []
    for text, suffix in zip(fields, suffixes):
        number = text[: -len(suffix)] if text.endswith(suffix) else None
        if number is None or not _NUMBER.match(number):
            return f"{text!r} is not a number followed by {suffix!r}"
        numbers.append(int(number))
    g, gb = numbers[-2:]
    c = numbers[0] if len(numbers) == 3 else g
    if len(parts) == 1:
        return ProfileName(c, g, gb)
    attributes = parts[1].split(",")
    if len(set(attributes)) != len(attributes):
        return "an attribute is given twice"
    for a in attributes:
        if not _ATTRIBUTE.match(a) or a.endswith("."):
            return f"attribute {a!r} is not letters, digits and dots starting with a letter"
    return ProfileName(c, g, gb, tuple(attributes), negative=len(plus) == 1)


def parse_device(model: GpuModel, name: str) -> Device:
    """``3g.40gb`` or ``1c.3g.40gb`` on this model → Device; unknown names list the model's."""
    parsed = parse_profile_name(name)
    if isinstance(parsed, str):
        raise LayoutError(
            f"{name!r} is not a MIG profile name (like 3g.40gb or 1c.3g.40gb): {parsed}",
            hint=profiles_hint(model),
        )
    try:
        profile = model.profile(parsed.gi_name)
    except GpuctlError as e:
        raise LayoutError(e.message, hint=e.hint) from None
    ci = parsed.c
    if ci != profile.slices:
        # mig-parted packs several such compute instances into one GPU instance; gpuctl
        # creates one compute instance over each whole GPU instance.
        raise LayoutError(
            f"{name!r}: compute-instance sub-profiles ({ci}c. of a "
            f"{profile.slices}g instance) are not supported; use {profile.name}"
        )
    return Device(profile, ci)


def profiles_hint(model: GpuModel) -> str:
    return f"{model.short_name} profiles: " + ", ".join(p.name for p in model.profiles)


def parse_layout_text(text: str | None) -> dict[str, int]:
    """``3g.40gb=2,1g.10gb`` (a missing count means 1) → ``{"3g.40gb": 2, "1g.10gb": 1}``."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, count = part.partition("=")
        name = name.strip()
        if sep:
            n = whole_number(count.strip())
            if n is None:
                raise UsageError(f"{part!r}: the count after '=' must be a whole number")
        else:
            n = 1
        if not name:
            raise UsageError(f"{part!r}: missing a profile name before '='")
        out[name] = out.get(name, 0) + n
    if not out:
        raise UsageError("empty layout: give profiles like 3g.40gb=2,1g.10gb=1")
    return out


def uniform_layout(model: GpuModel, name: str) -> dict[str, int]:
    """The ``1g.10gb`` of ``all-1g.10gb``: as many of it as fit on this model."""
    device = parse_device(model, name)
    n = max_count(model, device)
    return {device.name: n}


def max_count(model: GpuModel, device: Device) -> int:
    n = device.profile.max_instances
    while n > 0:
        try:
            place(model, {device.name: n})
            return n
        except LayoutError:
            n -= 1
    return 0


# ---------- validation and placement ----------


def devices_of(model: GpuModel, layout: Mapping[str, int]) -> list[Device]:
    out = []
    for name, count in layout.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise LayoutError(f"{name}: count must be a whole number >= 0, got {count!r}")
        device = parse_device(model, name)
        if count > model.max_gpu_instances:  # refuse before building a list of `count`
            _check_max(model, device.profile, count)
        out += [device] * count
    return out


def place(
    model: GpuModel, layout: Mapping[str, int] | Sequence[Device], fixed: Sequence[Placed] = ()
) -> list[Placed]:
    """Concrete placements for the layout (next to ``fixed`` ones, which stay where they
    are), or LayoutError saying why none exists. Returned in placement order."""
    devices = devices_of(model, layout) if isinstance(layout, Mapping) else list(layout)
    check_counts(model, [d.profile for d in devices] + [f.profile for f in fixed])
    found = search_placement(devices, fixed)
    if found is None:
        raise LayoutError(_no_placement(devices, fixed))
    return sorted(found, key=lambda p: p.start)


def check_counts(model: GpuModel, profiles: Sequence[Profile]) -> None:
    """Every rule that does not depend on positions; raises LayoutError with the reason."""
    media = _media_reason([p.name for p in profiles])
    if media:
        raise LayoutError(media)
    for p, n in Counter(profiles).items():
        _check_max(model, p, n)
    if len(profiles) > model.max_gpu_instances:
        raise LayoutError(
            f"{len(profiles)} instances: each {model.short_name} holds at most "
            f"{model.max_gpu_instances} GPU instances"
        )
    compute = sum(p.slices for p in profiles)
    if compute > model.compute_slices:
        raise LayoutError(
            f"{_fmt(Counter(p.name for p in profiles))} need {compute} compute "
            f"slices; each {model.short_name} has {model.compute_slices}"
        )
    units = sum(p.size for p in profiles)
    if units > model.memory_slices:
        raise LayoutError(_over_memory(model, profiles))


def _media_reason(names: Sequence[str]) -> str | None:
    """Why these instances cannot share one GPU's media engines, in words, or None."""
    conflict = geometry.media_conflict(names)
    if conflict is None:
        return None
    rule, culprits = conflict
    if rule == "+me":
        return (
            f"{_fmt(Counter(culprits))}: a GPU has one set of media engines, so at most one "
            "+me instance"
        )
    return (
        f"a +me.all instance takes every media engine; only -me profiles can share "
        f"the GPU with it, not {_join(sorted(set(culprits)))}"
    )


def _check_max(model: GpuModel, p: Profile, n: int) -> None:
    if n > p.max_instances:
        where = (
            f"its only placement is slices {slice_range(p.starts[0], p.size)}"
            if len(p.starts) == 1
            else f"it can start only at {_join(p.starts)}"
        )
        raise LayoutError(
            f"{p.name} ×{n}: each {model.short_name} holds at most "
            f"{p.max_instances} {p.name} ({where})"
        )


def _over_memory(model: GpuModel, profiles: Sequence[Profile]) -> str:
    total = model.memory_slices
    ordered = sorted(profiles, key=lambda p: -p.size)
    fit: Counter[str] = Counter()
    rest: Counter[str] = Counter()
    used = 0
    for p in ordered:
        if not rest and used + p.size <= total:
            fit[p.name] += 1
            used += p.size
        else:
            rest[p.name] += 1
    need = sum(p.size for p in profiles) - total
    verb = "uses" if sum(fit.values()) == 1 else "use"
    amount = f"all {total}" if used == total else f"{used} of the {total}"
    verb2 = "needs" if sum(rest.values()) == 1 else "need"
    more = "one more" if need == 1 else f"{need} more"
    return (
        f"{_fmt(fit)} {verb} {amount} memory slices; {_fmt(rest)} {verb2} {more}"
        f" (each {model.short_name} has {total})"
    )


def _no_placement(devices: Sequence[Device], fixed: Sequence[Placed]) -> str:
    wanted = Counter(d.profile.name for d in devices)
    profiles = {d.profile.name: d.profile for d in devices}
    where = "; ".join(
        f"{name} only at slices " + _join([slice_range(s, p.size) for s in p.starts])
        for name, p in sorted(profiles.items(), key=lambda kv: -kv[1].size)
    )
    text = f"{_fmt(wanted)} fit by count but cannot be placed without overlap: {where}"
    if fixed:
        kept = ", ".join(f"{f.profile.name} at {f.slices_text()}" for f in fixed)
        text += f" (next to the instances kept in place: {kept})"
    return text


def search_placement(devices: Sequence[Device], fixed: Sequence[Placed]) -> list[Placed] | None:
    mask = 0
    for f in fixed:
        if mask & f.mask:
            return None
        mask |= f.mask
    # Biggest and least flexible first; equal devices in increasing starts (no symmetric retries).
    order = sorted(devices, key=lambda d: (-d.profile.size, len(d.profile.starts), d.name))
    chosen: list[Placed] = []

    def go(i: int, mask: int) -> bool:
        if i == len(order):
            return True
        d = order[i]
        low = chosen[-1].start + 1 if i and order[i - 1] == d else -1
        for s in d.profile.starts:
            if s < low:
                continue
            p = Placed(d, s)
            if mask & p.mask:
                continue
            chosen.append(p)
            if go(i + 1, mask | p.mask):
                return True
            chosen.pop()
        return False

    return list(fixed) + chosen if go(0, mask) else None


def _join(items: Iterable[object]) -> str:
    texts = [str(i) for i in items]
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " or " + texts[-1]


def _fmt(counts: Mapping[str, int]) -> str:
    return " + ".join(f"{name} ×{n}" for name, n in counts.items())


def layout_text(counts: Mapping[str, int]) -> str:
    """``{"3g.40gb": 2, "1g.10gb": 1}`` → ``3g.40gb=2,1g.10gb=1`` (the shorthand form)."""
    return ",".join(f"{k}={v}" for k, v in counts.items() if v)
