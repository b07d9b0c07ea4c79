"""The NVIDIA device plugin as a cluster runs it: its DaemonSet (GPU Operator or Helm
chart), the ConfigMap of named configs it mounts, the node label that picks one, and its
config file (``version: v1``) with time-slicing or MPS. Pure: DaemonSets and ConfigMap data
come in as the API returns them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError
from gpuctl.k8s.nodes import GPU
from gpuctl.k8s.objects import labels_of, name_of, namespace_of

CONFIG_LABEL = "nvidia.com/device-plugin.config"  # a key of the ConfigMap: the node's config
TIME_SLICING, MPS = "time-slicing", "mps"
DEFAULT_CONFIG_MAP = "gpuctl-sharing-config"  # the ConfigMap gpuctl makes when there is none
AVAILABLE_CONFIGS = "/available-configs"  # where the plugin's pods mount it


@dataclass(frozen=True)
class Sharing:
    strategy: str  # TIME_SLICING or MPS
    replicas: int
    rename_by_default: bool = False
    # What the plugin does: refuse a pod asking for more than one replica. Off by default
    # for time-slicing; on by default for MPS, which honours an explicit false from v0.20.0.
    fail_requests_greater_than_one: bool = False
    resources: tuple[str, ...] = (GPU,)

    @property
    def default_name(self) -> str:
        """A ConfigMap key derived from the content, so equal configs share one key."""
        name = ("ts" if self.strategy == TIME_SLICING else "mps") + f"-{self.replicas}"
        if self.rename_by_default:
            name += "-rename"
        if self.fail_requests_greater_than_one and self.strategy == TIME_SLICING:
            name += "-strict"
        if not self.fail_requests_greater_than_one and self.strategy == MPS:
            name += "-multi"
        if self.resources != (GPU,):
            name += "-" + hashlib.sha1(",".join(self.resources).encode()).hexdigest()[:6]
        return name


# ConfigMap key -> its sharing (None: no sharing), or the error that makes it unusable
Configs = dict[str, Sharing | None | GpuctlError]


def render_config(s: Sharing) -> dict[str, Any]:
    """The device plugin config file, as data."""
    section: dict[str, Any] = {"renameByDefault": s.rename_by_default}
    if s.strategy == TIME_SLICING or not s.fail_requests_greater_than_one:
        # Under mps only an explicit false is written: the plugin's default there is true
        # (before v0.20.0 it forced true whatever the file said).
        section["failRequestsGreaterThanOne"] = s.fail_requests_greater_than_one
    section["resources"] = [{"name": r, "replicas": s.replicas} for r in s.resources]
    key = "timeSlicing" if s.strategy == TIME_SLICING else "mps"
    return {"version": "v1", "sharing": {key: section}}


def config_text(s: Sharing) -> str:
    import yaml

    return yaml.safe_dump(render_config(s), sort_keys=False)


def parse_config(text: str) -> Sharing | None:
    """The sharing described by a device plugin config; None for a config without sharing.
    Raises GpuctlError on a config the device plugin would not load either (or that holds
    what gpuctl reads no YAML with: aliases, object tags)."""
    from gpuctl.common.errors import SpecError
    from gpuctl.common.specfile import load_yaml

    try:
        data = load_yaml(text, "config").data
    except SpecError as e:  # e.g. "config:2: nesting deeper than 64 levels"
        raise GpuctlError(e.message) from None
    if not isinstance(data, dict):
        raise GpuctlError("not a device plugin config (expected a mapping)")
    if data.get("version") != "v1":
        raise GpuctlError(f"unsupported config version {data.get('version')!r} (expected v1)")
    sharing = data.get("sharing") or {}
    if not isinstance(sharing, dict):
        raise GpuctlError("'sharing' must be a mapping")
    present = [k for k in ("timeSlicing", "mps") if sharing.get(k)]
    if len(present) > 1:
        raise GpuctlError("sets both timeSlicing and mps; they are exclusive")
    if not present:
        return None
    section = sharing[present[0]]
    resources = section.get("resources") if isinstance(section, dict) else None
    if (
        not isinstance(resources, list)
        or not resources
        or not all(
            isinstance(r, dict)
            and isinstance(r.get("name"), str)
            and isinstance(r.get("replicas"), int)
            and not isinstance(r.get("replicas"), bool)
            for r in resources
        )
    ):
        raise GpuctlError(f"sharing.{present[0]}.resources must list {{name, replicas}} entries")
    strategy = TIME_SLICING if present[0] == "timeSlicing" else MPS
    fail = section.get("failRequestsGreaterThanOne")
    return Sharing(
        strategy,
        max(r["replicas"] for r in resources),
        bool(section.get("renameByDefault")),
        strategy == MPS if fail is None else bool(fail),  # absent: the plugin's default
        tuple(r["name"] for r in resources),
    )


def parse_configs(data: dict[str, str] | None) -> Configs:
    """The sharing each ConfigMap key describes."""
    out: Configs = {}
    for key, text in (data or {}).items():
        try:
            out[key] = parse_config(text)
        except GpuctlError as e:
            out[key] = e
    return out


def find_device_plugin(daemonsets: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The NVIDIA device plugin DaemonSet (GPU Operator or Helm chart), if any."""

    def is_plugin(ds: dict[str, Any]) -> bool:
        name, labels = name_of(ds), labels_of(ds)
        if "mps-control-daemon" in name:
            return False  # the GPU Operator's MPS helper, not the plugin
        return (
            "nvidia-device-plugin" in name
            or labels.get("app.kubernetes.io/name") == "nvidia-device-plugin"
        )

    found = sorted(
        (ds for ds in daemonsets if is_plugin(ds)),
        key=lambda ds: (namespace_of(ds), name_of(ds)),
    )
    return found[0] if found else None


def plugin_config_map(ds: dict[str, Any]) -> str | None:
    """The ConfigMap the device plugin DaemonSet mounts its configs from, if it mounts one.
    Both the GPU Operator and the Helm chart mount it at /available-configs, where the
    plugin's config-manager picks the key a node's label names."""
    pod = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    by_name: dict[str, str | None] = {
        v.get("name"): (v.get("configMap") or {}).get("name")
        for v in pod.get("volumes") or []
        if v.get("configMap")
    }
    for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
        for m in c.get("volumeMounts") or []:
            mounted = by_name.get(m.get("name"))
            if mounted and m.get("mountPath", "").rstrip("/") == AVAILABLE_CONFIGS:
                return mounted
    return None
