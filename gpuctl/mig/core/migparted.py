"""mig-parted ``version: v1`` config files: read them as mig-parted does, pick the config
for each GPU, export the node's state, render the GPU Operator's ConfigMap.

Reading follows mig-parted (api/spec/v1/spec.go, pkg/types): a file that is not a v1 spec is
refused whole; inside it each config stands alone, so a bad config (all counts 0, a negative
count, a device-filter that is no PCI id, …) is refused, with its line, when it is chosen,
and the file's other configs stay usable.

Choosing follows mig-parted too: the entries in file order, each for the GPUs matched by
``devices`` (``all``, or indexes; ``[]`` matches none) and ``device-filter`` (PCI device ids
``0x233010DE``, optionally with the board's subsystem id ``0x20B010DE:0x134F10DE``). Where
several entries match one GPU the last decides, as in mig-parted's apply and assert. A GPU
no entry matches is left alone (and fails `assert`, as it fails mig-parted's); under
``devices: all`` a GPU without MIG is skipped by an entry that enables MIG.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError, SpecError, UsageError
from gpuctl.common.specfile import Doc, Fields, Path, load_yaml_file
from gpuctl.gpus.geometry import GpuModel, models
from gpuctl.gpus.mig_layout import (
    LayoutError,
    devices_of,
    layout_text,
    parse_layout_text,
    parse_profile_name,
    place,
    uniform_layout,
)
from gpuctl.mig.core.diff import Desired, GpuState

VERSION = "v1"
ENTRY_FIELDS = ("device-filter", "devices", "mig-enabled", "mig-devices")
# strconv.ParseUint(s, 0, 32): 0x/0o/0b prefixes, a leading 0 for octal, '_' between digits
_GO_UINT = re.compile(
    r"(?:0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|0(?:_?[0-7])*"
    r"|[1-9](?:_?[0-9])*)\Z"
)


@dataclass(frozen=True)
class DeviceFilter:
    """One device-filter item: a PCI device id, and the board's subsystem id if given."""

    text: str
    device: int  # device << 16 | vendor, as NVML's pciDeviceId
    subsystem: int | None  # subsystem device << 16 | vendor, as NVML's pciSubSystemId

    def matches(self, gpu: GpuState) -> bool:
        if gpu.pci_id is None:  # known only by its model (from node labels): any of its ids
            return gpu.model is not None and self.device in _ids(gpu.model)
        return self.device == gpu.pci_id and self.subsystem in (None, gpu.pci_subsystem_id)


def _ids(model: GpuModel) -> set[int]:
    return {int(i, 16) for i in model.pci_device_ids}


def parse_device_filter(text: str) -> DeviceFilter | None:
    """``0x20B010DE`` or ``0x20B010DE:0x134F10DE`` as mig-parted reads it
    (types.NewDeviceIDFromString); None where mig-parted fails to read it."""
    parts = text.split(":")
    if len(parts) > 2:
        return None
    numbers = [_go_uint32(p) for p in parts]
    if None in numbers:
        return None
    return DeviceFilter(text, numbers[0], numbers[1] if len(numbers) == 2 else None)  # type: ignore[arg-type]


def _go_uint32(text: str) -> int | None:
    if not _GO_UINT.match(text):
        return None
    digits = text.replace("_", "")
    if len(digits) > 1 and digits[0] == "0" and digits[1] in "0123456789_":
        value = int(digits, 8)  # Go reads a leading 0 as octal
    else:
        value = int(digits, 0)
    return value if value < 1 << 32 else None


@dataclass(frozen=True)
class Entry:
    config: str
    index: int
    devices: str | tuple[int, ...]  # "all" or GPU indexes
    device_filter: tuple[DeviceFilter, ...]  # empty: any GPU
    enabled: bool
    mig_devices: dict[str, int]  # as written, zero counts included
    path: Path  # where it is in the file, for errors

    @property
    def layout(self) -> dict[str, int]:
        return {k: v for k, v in self.mig_devices.items() if v}

    def matches(self, gpu: GpuState) -> bool:
        if self.devices != "all" and gpu.index not in self.devices:
            return False
        return not self.device_filter or any(f.matches(gpu) for f in self.device_filter)


@dataclass
class MigConfigFile:
    doc: Doc
    configs: dict[str, list[Entry]]
    problems: dict[str, SpecError]  # configs that cannot be used, and why

    @property
    def names(self) -> list[str]:
        """Every config of the file, usable or not, in file order."""
        return list(self.doc.data["mig-configs"])

    def select(self, name: str | None) -> list[Entry]:
        if name is None:
            if len(self.names) == 1:
                name = self.names[0]
            else:
                raise UsageError(
                    f"{self.doc.file} has {len(self.names)} configs: choose one with -c",
                    hint="configs: " + ", ".join(self.names),
                )
        if name in self.problems:
            raise self.problems[name]
        if name not in self.configs:
            raise SpecError(
                f"no config {name!r} under mig-configs",
                file=self.doc.file,
                line=self.doc.line(("mig-configs",)),
                hint="configs: " + ", ".join(self.names),
            )
        return self.configs[name]

    def check_models(self, name: str) -> None:
        """Check config `name`'s layouts on the models its device-filters name, for a file
        meant for no GPU in particular (a rendered ConfigMap)."""
        for entry in self.select(name):
            for model in _filtered_models(entry):
                _check(self.doc, entry, model)

    def error(
        self, entry: Entry, key: str | None, message: str, hint: str | None = None
    ) -> SpecError:
        return self.doc.error(entry.path + ((key,) if key else ()), message, hint)


# Makes the error for a field of one entry: (key or sub-path, message).
_ErrorAt = Callable[[str | Path | None, str], SpecError]


def load(path: str) -> MigConfigFile:
    return parse(load_yaml_file(path))


def parse(doc: Doc) -> MigConfigFile:
    """The file's configs. Refuses the whole file only where mig-parted cannot read it as a
    v1 spec; a config mig-parted would refuse is kept in ``problems``."""
    root = doc.root()
    for key in root.data:
        if key not in ("version", "mig-configs"):
            root.reject_unknown(["version", "mig-configs"])
    version = root.text("version", required=True)
    if version != VERSION:
        raise root.error(
            "version",
            f"unsupported version {version!r}; gpuctl reads mig-parted config version {VERSION!r}",
        )
    configs_field = root.data.get("mig-configs")
    if not isinstance(configs_field, dict) or not configs_field:
        raise root.error(
            "mig-configs" if root.has("mig-configs") else None,
            "at least one config under 'mig-configs' is required (a mapping of names to "
            "lists of entries)",
        )
    configs: dict[str, list[Entry]] = {}
    problems: dict[str, SpecError] = {}
    for name, value in configs_field.items():
        path: Path = ("mig-configs", name)
        try:
            if not isinstance(value, list) or not value:
                raise doc.error(
                    path, "expected a non-empty list of entries (devices, mig-enabled, mig-devices)"
                )
            configs[name] = [_entry(doc, name, i, path + (i,)) for i in range(len(value))]
        except SpecError as e:
            problems[name] = e
    return MigConfigFile(doc, configs, problems)


def _entry(doc: Doc, config: str, index: int, path: Path) -> Entry:
    item = doc.data
    for p in path:
        item = item[p]
    if not isinstance(item, dict):
        raise doc.error(path, "expected a mapping with devices, mig-enabled and mig-devices")

    def error(key: str | Path | None, message: str, hint: str | None = None) -> SpecError:
        rel = () if key is None else key if isinstance(key, tuple) else (key,)
        return doc.error(path + rel, message, hint)

    Fields(doc, path).reject_unknown(ENTRY_FIELDS)
    for key in ("devices", "mig-enabled"):
        if key not in item:
            raise error(None, f"missing required field {key!r}")
    devices = _devices(item["devices"], error)
    filters = _filters(doc, path, item.get("device-filter"))
    enabled = item["mig-enabled"]
    if enabled is None:
        enabled = False  # as JSON null reads into Go's bool
    if not isinstance(enabled, bool):
        raise error("mig-enabled", f"expected true or false, got {enabled!r}")
    mig_devices = item.get("mig-devices")
    if mig_devices is not None and not isinstance(mig_devices, dict):
        raise error("mig-devices", "expected a mapping of MIG profiles to counts (e.g. 3g.40gb: 2)")
    counts: dict[str, int] = {}
    for name, count in (mig_devices or {}).items():
        parsed = parse_profile_name(name)
        if isinstance(parsed, str):
            raise doc.error(
                path + ("mig-devices", name),
                f"{name!r} is not a MIG profile name (like 3g.40gb): {parsed}",
            )
        if isinstance(count, bool) or not isinstance(count, int):
            raise doc.error(path + ("mig-devices", name), f"expected a count, got {count!r}")
        if count < 0:
            raise doc.error(path + ("mig-devices", name), f"expected a count >= 0, got {count}")
        counts[name] = count
    if counts and not any(counts.values()):
        raise error("mig-devices", "all counts are 0 (mig-parted refuses such a config)")
    if enabled and mig_devices is None:
        raise error(None, "missing required field 'mig-devices' when 'mig-enabled' is true")
    if not enabled and counts:
        raise error("mig-devices", "MIG devices given while 'mig-enabled' is false")
    return Entry(config, index, devices, filters, enabled, counts, path)


def _devices(value: object, error: _ErrorAt) -> str | tuple[int, ...]:
    if value == "all":
        return "all"
    if not isinstance(value, list):
        raise error("devices", f"expected 'all' or a list of GPU indexes, got {value!r}")
    for i, d in enumerate(value):
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            # mig-parted reads a negative index and matches no GPU with it
            raise error(("devices", i), f"expected a GPU index (0, 1, ...), got {d!r}")
    return tuple(value)  # [] is allowed, and matches no GPU


def _filters(doc: Doc, path: Path, raw: object) -> tuple[DeviceFilter, ...]:
    if raw is None or raw == "":
        return ()
    listed = isinstance(raw, list)
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for i, item in enumerate(items):
        where = path + ("device-filter",) + ((i,) if listed else ())
        if not isinstance(item, str) or where in doc.not_plain:  # 0x… unquoted is a number
            written = item if isinstance(item, str) else doc.written.get(where, repr(item))
            raise doc.error(
                where,
                f"expected a quoted PCI device id, got the number {written}",
                hint=f'write "{written}": unquoted, YAML reads it as a number, which '
                "mig-parted refuses",
            )
        parsed = parse_device_filter(item)
        if parsed is None:
            raise doc.error(
                where,
                f"{item!r} is not a PCI device id like 0x233010DE (or 0x20B010DE:0x134F10DE "
                "with the board's subsystem id); mig-parted would match no GPU with it",
            )
        out.append(parsed)
    return tuple(out)


def _filtered_models(entry: Entry) -> list[GpuModel]:
    if not entry.enabled or not entry.device_filter:
        return []
    wanted = {f.device for f in entry.device_filter}
    return [m for m in models() if _ids(m) & wanted]


def _check(doc: Doc, entry: Entry, model: GpuModel, gpu: int | None = None) -> None:
    try:
        place(model, devices_of(model, entry.layout))
    except LayoutError as e:
        who = f"GPU {gpu} ({model.short_name})" if gpu is not None else model.short_name
        # Point at the profile's own line when the reason is about one profile.
        named = [n for n in entry.layout if e.message.startswith(f"{n} ×") or f"{n!r}" in e.message]
        where = entry.path + ("mig-devices",) + (tuple(named[:1]) if len(named) == 1 else ())
        raise doc.error(where, f"{who}: {e.message}", e.hint) from None


def resolve(
    cfg: MigConfigFile, entries: Sequence[Entry], gpus: Sequence[GpuState]
) -> dict[int, Desired | None]:
    """The desired state of each GPU under the chosen config (None: no entry matches it).
    Every entry that matches a GPU is checked on it, as mig-parted applies each in turn."""
    out: dict[int, Desired | None] = {}
    for gpu in gpus:
        matched = [e for e in entries if e.matches(gpu)]
        if not matched:
            out[gpu.index] = None
            continue
        last = matched[-1]
        for entry in matched:
            _check_on(cfg, entry, gpu)
        source = f"{cfg.doc.file}:{cfg.doc.line(last.path)} ({last.config}[{last.index}])"
        notes: tuple[str, ...] = ()
        overridden = [
            e for e in matched[:-1] if (e.enabled, e.layout) != (last.enabled, last.layout)
        ]
        if overridden:
            lines = ", ".join(str(cfg.doc.line(e.path)) for e in overridden)
            notes = (
                f"also matched by the entry at line {lines}; the last matching entry "
                "decides, as in mig-parted",
            )
        skipped = None
        if gpu.mig is None and last.enabled:
            skipped = (
                "no MIG on this GPU: left as is (mig-parted's apply skips it too; "
                "its assert fails on it)"
            )
        out[gpu.index] = Desired(last.enabled, last.layout, source, notes, skipped)
    return out


def aliases_used(entries: Sequence[Entry], model: GpuModel) -> list[tuple[str, str]]:
    """(name written, today's name) for profile names only an earlier driver of this model
    used (GB200 3g.95gb for 3g.93gb)."""
    out = []
    for entry in entries:
        for name in entry.layout:
            parsed = parse_profile_name(name)
            if isinstance(parsed, str):
                continue
            profile = next((p for p in model.profiles if parsed.gi_name in p.aliases), None)
            if profile is not None:
                out.append((name, profile.name))
    return out


def _check_on(cfg: MigConfigFile, entry: Entry, gpu: GpuState) -> None:
    if gpu.mig is None:
        if entry.enabled and entry.devices != "all":
            raise cfg.error(entry, "devices", f"GPU {gpu.index} ({gpu.name}) does not support MIG")
        return
    if entry.enabled:
        if gpu.model is None:
            raise cfg.error(
                entry,
                "mig-devices",
                f"GPU {gpu.index} is a {gpu.name!r}, which is not in gpuctl's MIG geometry table",
            )
        _check(cfg.doc, entry, gpu.model, gpu.index)


def resolve_shorthand(
    layout: str, indexes: Sequence[int] | None, gpus: Sequence[GpuState]
) -> dict[int, Desired | None]:
    """``--layout 3g.40gb=2`` / ``all-1g.10gb`` / ``all-disabled`` / ``all-enabled`` on the
    GPUs given by index (all GPUs when None)."""
    known = {g.index for g in gpus}
    if indexes is not None:
        missing = sorted(set(indexes) - known)
        if missing:
            raise UsageError(
                f"no GPU {', '.join(map(str, missing))} on this node "
                f"(GPUs: {', '.join(map(str, sorted(known))) or 'none'})"
            )
    out: dict[int, Desired | None] = {}
    for gpu in gpus:
        if indexes is not None and gpu.index not in indexes:
            out[gpu.index] = None
            continue
        if gpu.mig is None and indexes is None:  # like mig-parted's "all"
            enabled = layout.strip() != "all-disabled"
            skipped = "no MIG on this GPU: left as is" if enabled else None
            out[gpu.index] = Desired(enabled, {}, f"--layout {layout.strip()}", skipped=skipped)
            continue
        out[gpu.index] = shorthand_desired(layout, gpu)
    return out


def shorthand_desired(layout: str, gpu: GpuState) -> Desired:
    text = layout.strip()
    source = f"--layout {text}"
    if text == "all-disabled":
        return Desired(False, {}, source)
    if text == "all-enabled":
        return Desired(True, {}, source)
    if gpu.mig is None:
        raise UsageError(f"GPU {gpu.index} ({gpu.name}) does not support MIG")
    if gpu.model is None:
        raise GpuctlError(
            f"GPU {gpu.index} is a {gpu.name!r}, which is not in gpuctl's MIG geometry table"
        )
    try:
        if text.startswith("all-"):
            counts = uniform_layout(gpu.model, text[4:])
        else:
            counts = parse_layout_text(text)
            place(gpu.model, devices_of(gpu.model, counts))
    except LayoutError as e:
        raise LayoutError(f"{gpu.label}: {e.message}", hint=e.hint) from None
    return Desired(True, counts, source)


def shorthand_config(
    name: str, layout: str, indexes: Sequence[int] | None = None, model: GpuModel | None = None
) -> dict[str, Any]:
    """A v1 config holding one shorthand layout, for the GPU Operator (``all-<profile>``
    becomes one entry per GPU model that has the profile, filtered by PCI id)."""
    devices = list(indexes) if indexes else "all"
    text = layout.strip()
    if text in ("all-disabled", "all-enabled"):
        return _config(
            name, [{"devices": devices, "mig-enabled": text == "all-enabled", "mig-devices": {}}]
        )
    if text.startswith("all-"):
        targets = (
            [model]
            if model
            else [m for m in models() if any(p.name == text[4:] for p in m.profiles)]
        )
        if not targets:
            raise UsageError(f"no GPU model has a MIG profile {text[4:]!r}")
        entries = []
        for m in targets:
            counts = uniform_layout(m, text[4:])
            entries.append(
                {
                    "device-filter": list(m.pci_device_ids),
                    "devices": devices,
                    "mig-enabled": True,
                    "mig-devices": counts,
                }
            )
        return _config(name, entries)
    counts = parse_layout_text(text)
    if model is not None:
        place(model, devices_of(model, counts))
    else:
        _check_held_somewhere(counts)
    entry: dict[str, Any] = {"devices": devices, "mig-enabled": True, "mig-devices": counts}
    if model is not None:
        entry = {"device-filter": list(model.pci_device_ids), **entry}
    return _config(name, [entry])


def _check_held_somewhere(counts: dict[str, int]) -> None:
    """A layout for no particular model must fit at least one; else say why on the models
    that have its profiles (mig-parted would only fail on each node when applying it)."""
    reasons = []
    for m in models():
        try:
            place(m, devices_of(m, counts))
            return
        except LayoutError as e:
            if "has no MIG profile" not in e.message and "not a MIG profile" not in e.message:
                reasons.append(f"{m.short_name}: {e.message}")
    if reasons:
        raise LayoutError("no GPU model can hold this layout: " + "; ".join(reasons))
    raise LayoutError(
        f"no GPU model has all of the MIG profiles {', '.join(counts)}",
        hint="see `gpuctl mig profiles --gpu all`",
    )


def _config(name: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": VERSION, "mig-configs": {name: entries}}


def export(gpus: Sequence[GpuState], name: str = "current") -> dict[str, Any]:
    """The node's current state as a v1 config, shaped as mig-parted's export shapes it
    (export/config.go): every GPU, those without MIG as ``mig-enabled: false``; GPUs in the
    same state merged into one entry; PCI device ids as filters when the node has several
    kinds of GPU; ``devices: all`` where an entry covers every GPU of its filters."""
    if not gpus:
        raise GpuctlError("no GPU on this node: nothing to export")
    known = all(_primary(g) for g in gpus)
    merged: list[dict[str, Any]] = []
    by_filter: dict[str, set[int]] = {}
    for gpu in gpus:
        enabled = gpu.mig is not None and bool(gpu.mig[0])
        layout = gpu.layout() if enabled else {}
        pci = _primary(gpu) if known else ""
        by_filter.setdefault(pci, set()).add(gpu.index)
        for m in merged:
            if (m["mig-enabled"], m["mig-devices"]) == (enabled, layout):
                m["devices"].add(gpu.index)
                m["device-filter"].add(pci)
                break
        else:
            merged.append(
                {
                    "device-filter": {pci},
                    "devices": {gpu.index},
                    "mig-enabled": enabled,
                    "mig-devices": layout,
                }
            )
    entries = []
    for m in merged:
        filters = sorted(m["device-filter"])
        devices = sorted(m["devices"])
        covered = sorted(set().union(*(by_filter[f] for f in filters)))
        entry: dict[str, Any] = {}
        if len(by_filter) > 1 and len(merged) > 1:
            entry["device-filter"] = filters[0] if len(filters) == 1 else filters
        entry["devices"] = "all" if devices == covered else devices
        entry["mig-enabled"] = m["mig-enabled"]
        entry["mig-devices"] = dict(m["mig-devices"])
        entries.append(entry)
    return _config(name, entries)


def _primary(gpu: GpuState) -> str:
    """The GPU's PCI device id as mig-parted writes a filter (subsystem stripped)."""
    if gpu.pci_id is not None:
        return f"0x{gpu.pci_id:08X}"
    return gpu.model.pci_device_ids[0].upper().replace("0X", "0x") if gpu.model else ""


def render_configmap(
    config: dict[str, Any], name: str = "custom-mig-config", namespace: str = "gpu-operator"
) -> dict[str, Any]:
    """The ConfigMap the GPU Operator's mig-manager reads (``migManager.config.name``)."""
    import yaml

    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"config.yaml": yaml.safe_dump(config, sort_keys=False)},
    }


def summary(desired: Desired | None) -> str:
    if desired is None:
        return "left as is"
    if not desired.enabled:
        return "MIG disabled"
    return layout_text(Counter(desired.layout)) or "MIG enabled, no instances"
