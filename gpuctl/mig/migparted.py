"""mig-parted ``version: v1`` config files: parse strictly, pick a config for each GPU,
export the current state, render the GPU Operator's ConfigMap.

Semantics follow mig-parted: an entry applies to the GPUs matched by ``devices`` (``all``
or indexes) and ``device-filter`` (PCI device ids such as ``0x233010DE``); GPUs no entry
matches are left alone; an ``all`` entry skips GPUs without MIG. Where mig-parted would
silently let a later entry override an earlier one for the same GPU, gpuctl refuses and
names both lines.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError, SpecError, UsageError
from gpuctl.common.specfile import Doc, Fields, Path, load_yaml_file
from gpuctl.gpus.geometry import GpuModel, models
from gpuctl.mig.diff import Desired, GpuState
from gpuctl.mig.layout import (
    LayoutError,
    devices_of,
    layout_text,
    parse_layout_text,
    place,
    uniform_layout,
)

VERSION = "v1"
_PCI_ID = re.compile(r"^0x[0-9a-fA-F]{8}\Z")
_PROFILE_NAME = re.compile(r"^(?:\d+c\.)?\d+g\.\d+gb(?:[+-][a-z][a-z0-9.,]*)?\Z")


@dataclass(frozen=True)
class Entry:
    config: str
    index: int
    devices: str | tuple[int, ...]  # "all" or GPU indexes
    device_filter: tuple[str, ...]  # upper-case PCI device ids; empty: any GPU
    enabled: bool
    mig_devices: dict[str, Any]
    path: Path  # where it is in the file, for errors

    def matches(self, gpu: GpuState) -> bool:
        if self.devices != "all" and gpu.index not in self.devices:
            return False
        if not self.device_filter:
            return True
        return gpu.model is not None and bool(
            {i.upper() for i in gpu.model.pci_device_ids} & set(self.device_filter)
        )


@dataclass
class MigConfigFile:
    doc: Doc
    configs: dict[str, list[Entry]]

    def select(self, name: str | None) -> list[Entry]:
        if name is None:
            if len(self.configs) == 1:
                return next(iter(self.configs.values()))
            raise UsageError(
                f"{self.doc.file} has {len(self.configs)} configs: choose one with -c",
                hint="configs: " + ", ".join(self.configs),
            )
        if name not in self.configs:
            raise SpecError(
                f"no config {name!r} under mig-configs",
                file=self.doc.file,
                line=self.doc.line(("mig-configs",)),
                hint="configs: " + ", ".join(self.configs),
            )
        return self.configs[name]

    def check_models(self, name: str) -> None:
        """Check config `name`'s layouts on the models its device-filters name, for a file
        meant for no GPU in particular (a rendered ConfigMap). Not done when the file is read:
        NVIDIA's own default config names GB200 profiles as one driver did (1g.24gb), another
        not, and that must not stop using its other configs."""
        for entry in self.select(name):
            for model in _filtered_models(entry):
                _check(self.doc, entry, model)

    def error(
        self, entry: Entry, key: str | None, message: str, hint: str | None = None
    ) -> SpecError:
        return self.doc.error(entry.path + ((key,) if key else ()), message, hint)


def load(path: str) -> MigConfigFile:
    return parse(load_yaml_file(path))


def parse(doc: Doc) -> MigConfigFile:
    root = doc.root()
    root.reject_unknown(["version", "mig-configs"])
    version = root.text("version", required=True)
    if version != VERSION:
        raise root.error(
            "version",
            f"unsupported version {version!r}; gpuctl reads mig-parted config version {VERSION!r}",
        )
    configs_field = root.child("mig-configs")
    if configs_field is None or not configs_field.data:
        raise root.error(
            "mig-configs" if root.has("mig-configs") else None,
            "at least one config under 'mig-configs' is required",
        )
    configs: dict[str, list[Entry]] = {}
    for name, value in configs_field.data.items():
        path = ("mig-configs", name)
        if not isinstance(value, list) or not value:
            raise doc.error(
                path, "expected a non-empty list of entries (devices, mig-enabled, mig-devices)"
            )
        configs[str(name)] = [_entry(doc, str(name), i, path + (i,)) for i in range(len(value))]
    return MigConfigFile(doc, configs)


def _entry(doc: Doc, config: str, index: int, path: Path) -> Entry:
    item = doc.data
    for p in path:
        item = item[p]
    if not isinstance(item, dict):
        raise doc.error(path, "expected a mapping with devices, mig-enabled and mig-devices")
    f = Fields(doc, path)
    f.reject_unknown(["devices", "device-filter", "mig-enabled", "mig-devices"])
    if "devices" not in f.data:
        raise f.error(None, "missing required field 'devices' (all, or a list of GPU indexes)")
    devices = f.data["devices"]
    if devices == "all":
        pass
    elif isinstance(devices, list) and devices:
        for i, d in enumerate(devices):
            if isinstance(d, bool) or not isinstance(d, int) or d < 0:
                raise doc.error(
                    path + ("devices", i), f"expected a GPU index (0, 1, ...), got {d!r}"
                )
        if len(set(devices)) != len(devices):
            raise f.error("devices", "a GPU index is listed twice")
        devices = tuple(devices)
    else:
        raise f.error("devices", f"expected 'all' or a list of GPU indexes, got {devices!r}")
    raw = f.data.get("device-filter")
    if isinstance(raw, list):
        f.data["device-filter"] = [_pci_id_text(d) for d in raw]
    elif raw is not None:
        f.data["device-filter"] = _pci_id_text(raw)
    filters = f.str_list("device-filter", [], allow_scalar=True)
    listed = isinstance(f.data.get("device-filter"), list)
    for i, d in enumerate(filters):
        if not _PCI_ID.match(d):
            raise doc.error(
                path + ("device-filter",) + ((i,) if listed else ()),
                f"{d!r} is not a PCI device id like 0x233010DE",
            )
    if "mig-enabled" not in f.data:
        raise f.error(None, "missing required field 'mig-enabled' (true or false)")
    enabled = f.flag("mig-enabled")
    mig_devices = f.data.get("mig-devices")
    if enabled and mig_devices is None:
        raise f.error(None, "missing required field 'mig-devices' when 'mig-enabled' is true")
    if mig_devices is None:
        mig_devices = {}
    if not isinstance(mig_devices, dict):
        raise f.error(
            "mig-devices", "expected a mapping of MIG profiles to counts (e.g. 3g.40gb: 2)"
        )
    for name, count in mig_devices.items():
        where = path + ("mig-devices", name)
        if not isinstance(name, str) or not _PROFILE_NAME.match(name):
            raise doc.error(where, f"{name!r} is not a MIG profile name (like 3g.40gb)")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise doc.error(where, f"expected a count >= 0, got {count!r}")
    if not enabled and any(mig_devices.values()):
        raise f.error("mig-devices", "MIG devices given while 'mig-enabled' is false")
    return Entry(
        config, index, devices, tuple(d.upper() for d in filters), enabled, dict(mig_devices), path
    )


def _pci_id_text(value: object) -> object:
    """YAML reads an unquoted 0x233010DE as a number: take it as the id it spells."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 32:
        return f"0x{value:08X}"
    return value


def _filtered_models(entry: Entry) -> list[GpuModel]:
    if not entry.enabled or not entry.device_filter:
        return []
    return [m for m in models() if {i.upper() for i in m.pci_device_ids} & set(entry.device_filter)]


def _check(doc: Doc, entry: Entry, model: GpuModel, gpu: int | None = None) -> None:
    try:
        place(model, devices_of(model, entry.mig_devices))
    except LayoutError as e:
        who = f"GPU {gpu} ({model.short_name})" if gpu is not None else model.short_name
        # Point at the profile's own line when the reason is about one profile.
        named = [
            n for n in entry.mig_devices if e.message.startswith(f"{n} ×") or f"{n!r}" in e.message
        ]
        where = entry.path + ("mig-devices",) + (tuple(named[:1]) if len(named) == 1 else ())
        raise doc.error(where, f"{who}: {e.message}", e.hint) from None


def resolve(
    cfg: MigConfigFile, entries: Sequence[Entry], gpus: Sequence[GpuState]
) -> dict[int, Desired | None]:
    """The desired state of each GPU under the chosen config (None: left alone)."""
    out: dict[int, Desired | None] = {}
    for gpu in gpus:
        matched = [e for e in entries if e.matches(gpu)]
        if not matched:
            out[gpu.index] = None
            continue
        first = matched[0]
        for other in matched[1:]:
            if (other.enabled, other.mig_devices) != (first.enabled, first.mig_devices):
                a, b = cfg.doc.line(first.path), cfg.doc.line(other.path)
                raise cfg.error(
                    other,
                    None,
                    f"GPU {gpu.index} is matched by two entries with "
                    f"different layouts (lines {a} and {b})",
                )
        if gpu.mig is None:
            if first.devices == "all" or not first.enabled:
                out[gpu.index] = None
                continue
            raise cfg.error(first, "devices", f"GPU {gpu.index} ({gpu.name}) does not support MIG")
        if first.enabled:
            if gpu.model is None:
                raise cfg.error(
                    first,
                    "mig-devices",
                    f"GPU {gpu.index} is a {gpu.name!r}, which "
                    "is not in gpuctl's MIG geometry table",
                )
            _check(cfg.doc, first, gpu.model, gpu.index)
        source = f"{cfg.doc.file}:{cfg.doc.line(first.path)} ({first.config}[{first.index}])"
        out[gpu.index] = Desired(
            first.enabled, {k: v for k, v in first.mig_devices.items() if v}, source
        )
    return out


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
        if gpu.mig is None and indexes is None:
            out[gpu.index] = None  # like mig-parted's "all": skip GPUs without MIG
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
    """The node's current layout as a v1 config (``devices: all`` when every MIG GPU agrees)."""
    groups: dict[tuple[bool, tuple[tuple[str, int], ...]], list[int]] = {}
    for gpu in gpus:
        if gpu.mig is None:
            continue
        enabled = bool(gpu.mig[0])
        layout = gpu.layout() if enabled else {}
        key = (enabled, tuple(layout.items()))
        groups.setdefault(key, []).append(gpu.index)
    capable = [g.index for g in gpus if g.mig is not None]
    entries = []
    for (enabled, counts), indexes in groups.items():
        devices = "all" if len(groups) == 1 and indexes == capable else indexes
        entries.append({"devices": devices, "mig-enabled": enabled, "mig-devices": dict(counts)})
    if not entries:
        raise GpuctlError("no GPU on this node supports MIG: nothing to export")
    return _config(name, entries)


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
