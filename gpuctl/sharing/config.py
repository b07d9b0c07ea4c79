"""GPU sharing through the NVIDIA device plugin: its config (``version: v1``) for
time-slicing or MPS, the ConfigMap that holds named configs, and which node may use which.

A node selects a config by the label ``nvidia.com/device-plugin.config=<key>``, where
<key> is a key of the ConfigMap the device plugin reads. Pure: nodes and ConfigMaps come in
as the API returns them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuctl.common import k8s_names
from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.common.numbers import whole_number
from gpuctl.common.quantity import count
from gpuctl.gpus import geometry

if TYPE_CHECKING:
    from gpuctl.common.selector import Requirement

CONFIG_LABEL = "nvidia.com/device-plugin.config"
# Set by GPU Feature Discovery from the config the device plugin actually loaded.
GFD_REPLICAS = "nvidia.com/gpu.replicas"
GFD_STRATEGY = "nvidia.com/gpu.sharing-strategy"
GFD_PRESENT = "nvidia.com/gpu.present"
GFD_PRODUCT = "nvidia.com/gpu.product"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STRATEGY = "nvidia.com/mig.strategy"

TIME_SLICING, MPS = "time-slicing", "mps"
GPU = "nvidia.com/gpu"
DEFAULT_CONFIG_MAP = "gpuctl-sharing-config"
AVAILABLE_CONFIGS = "/available-configs"
MAX_REPLICAS = 256  # per GPU; more is almost certainly a typo
MAX_MPS_REPLICAS = 48  # MPS clients per GPU (Volta and newer)


@dataclass(frozen=True)
class Sharing:
    strategy: str  # TIME_SLICING or MPS
    replicas: int
    rename_by_default: bool = False
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
        if self.resources != (GPU,):
            name += "-" + hashlib.sha1(",".join(self.resources).encode()).hexdigest()[:6]
        return name


# ConfigMap key -> its sharing (None: no sharing), or the error that makes it unusable
Configs = dict[str, Sharing | None | GpuctlError]


def make_sharing(
    strategy: str,
    replicas: int,
    rename_by_default: bool = False,
    fail_requests_greater_than_one: bool = False,
    resources: tuple[str, ...] = (GPU,),
) -> Sharing:
    """Validate options into a Sharing (UsageError on a bad combination)."""
    if strategy not in (TIME_SLICING, MPS):
        raise UsageError(f"unknown sharing strategy {strategy!r}")
    limit = MAX_MPS_REPLICAS if strategy == MPS else MAX_REPLICAS
    if not 2 <= replicas <= limit:
        raise UsageError(
            f"--replicas must be between 2 and {limit} for {strategy}, got {replicas}",
            hint="replicas is how many pods may share each GPU",
        )
    resources = tuple(dict.fromkeys(resources or (GPU,)))
    for r in resources:
        if r != GPU and not (r.startswith("nvidia.com/mig-") and _mig_profile(r)):
            raise UsageError(
                f"--resource {r!r} is not nvidia.com/gpu or a MIG resource "
                "(nvidia.com/mig-<profile>)"
            )
    if strategy == MPS:
        if resources != (GPU,):
            raise UsageError("MPS can share only nvidia.com/gpu, not MIG resources")
        if fail_requests_greater_than_one:
            raise UsageError(
                "--fail-requests-greater-than-one applies to time-slicing; "
                "MPS always refuses requests for more than one replica"
            )
    return Sharing(strategy, replicas, rename_by_default, fail_requests_greater_than_one, resources)


def _mig_profile(resource: str) -> bool:
    names = {p.resource_name for m in geometry.models() for p in m.profiles}
    return resource in names


def check_name(name: str) -> str:
    if not name or not k8s_names.label_value(name):
        raise UsageError(
            f"config name {name!r} must be 1-63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit (it is a node label value)"
        )
    return name


def render_config(s: Sharing) -> dict[str, Any]:
    """The device plugin config file, as data."""
    section: dict[str, Any] = {"renameByDefault": s.rename_by_default}
    if s.strategy == TIME_SLICING:
        section["failRequestsGreaterThanOne"] = s.fail_requests_greater_than_one
    section["resources"] = [{"name": r, "replicas": s.replicas} for r in s.resources]
    key = "timeSlicing" if s.strategy == TIME_SLICING else "mps"
    return {"version": "v1", "sharing": {key: section}}


def config_text(s: Sharing) -> str:
    import yaml

    return yaml.safe_dump(render_config(s), sort_keys=False)


def parse_config(text: str) -> Sharing | None:
    """The sharing described by a device plugin config; None for a config without sharing.
    Raises GpuctlError on a config the device plugin would not load either."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise GpuctlError(f"not valid YAML: {str(e).splitlines()[0]}") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise GpuctlError("not valid YAML: nested too deeply") from None
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
    return Sharing(
        TIME_SLICING if present[0] == "timeSlicing" else MPS,
        max(r["replicas"] for r in resources),
        bool(section.get("renameByDefault")),
        bool(section.get("failRequestsGreaterThanOne")),
        tuple(r["name"] for r in resources),
    )


def config_map(
    name: str, namespace: str, data: dict[str, str], created: bool = True
) -> dict[str, Any]:
    """The ConfigMap of configs; `created` marks one gpuctl creates (an existing one, e.g. the
    Helm chart's, only gets keys added)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if created:
        meta["labels"] = {"app.kubernetes.io/managed-by": "gpuctl"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


def node_label_patch(node: str, config: str | None) -> dict[str, Any]:
    """The Node fields gpuctl changes (a strategic-merge patch; None removes the label)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node, "labels": {CONFIG_LABEL: config}},
    }


# --- the device plugin -------------------------------------------------------------


def find_device_plugin(daemonsets: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The NVIDIA device plugin DaemonSet (GPU Operator or Helm chart), if any."""

    def is_plugin(ds: dict[str, Any]) -> bool:
        meta = ds.get("metadata") or {}
        name, labels = meta.get("name") or "", meta.get("labels") or {}
        if "mps-control-daemon" in name:
            return False  # the GPU Operator's MPS helper, not the plugin
        return (
            "nvidia-device-plugin" in name
            or labels.get("app.kubernetes.io/name") == "nvidia-device-plugin"
        )

    found = sorted(
        (ds for ds in daemonsets if is_plugin(ds)),
        key=lambda ds: (ds["metadata"].get("namespace") or "", ds["metadata"]["name"]),
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


# --- nodes ---------------------------------------------------------------------------


def labels_of(node: dict[str, Any]) -> dict[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def allocatable(node: dict[str, Any]) -> dict[str, Any]:
    return (node.get("status") or {}).get("allocatable") or {}


def is_gpu_node(node: dict[str, Any]) -> bool:
    alloc = allocatable(node)
    return labels_of(node).get(GFD_PRESENT) == "true" or any(
        count(v) > 0
        for k, v in alloc.items()
        if k == GPU or k.startswith("nvidia.com/mig-") or k == GPU + ".shared"
    )


def mig_reason(node: dict[str, Any]) -> str | None:
    """Why this node counts as a MIG node (None if it does not)."""
    labels, alloc = labels_of(node), allocatable(node)
    mig = sorted(k for k, v in alloc.items() if k.startswith("nvidia.com/mig-") and count(v) > 0)
    if mig:
        return f"it advertises {mig[0]}"
    if labels.get(MIG_CONFIG) not in (None, "", "all-disabled"):
        return f"{MIG_CONFIG}={labels[MIG_CONFIG]}"
    if "-MIG-" in labels.get(GFD_PRODUCT, ""):
        return f"{GFD_PRODUCT}={labels[GFD_PRODUCT]}"
    if labels.get(MIG_STRATEGY) in ("single", "mixed") and any(
        k.startswith("nvidia.com/mig-") and k.endswith(".count") for k in labels
    ):
        return f"{MIG_STRATEGY}={labels[MIG_STRATEGY]} with MIG devices"
    return None


def parse_configs(data: dict[str, str] | None) -> Configs:
    """The sharing each ConfigMap key describes."""
    out: Configs = {}
    for key, text in (data or {}).items():
        try:
            out[key] = parse_config(text)
        except GpuctlError as e:
            out[key] = e
    return out


def current_strategy(node: dict[str, Any], configs: Configs) -> tuple[str | None, int | None]:
    """(strategy, replicas) the node is set to: from its config label if the ConfigMap has
    that key, else from what GPU Feature Discovery reports."""
    labels = labels_of(node)
    chosen = labels.get(CONFIG_LABEL)
    if chosen in configs:
        s = configs[chosen]
        if isinstance(s, Sharing):
            return s.strategy, s.replicas
        if s is None:
            return None, None
    gfd = labels.get(GFD_STRATEGY)
    replicas = whole_number(labels.get(GFD_REPLICAS, "")) or None
    if gfd in (TIME_SLICING, MPS):
        return gfd, replicas
    return None, None


@dataclass(frozen=True)
class NodeChange:
    node: str
    old: str | None  # config label before
    new: str | None
    note: str = ""

    @property
    def changes(self) -> bool:
        return self.old != self.new


def select_nodes(
    nodes: list[dict[str, Any]], names: tuple[str, ...], selector: tuple[Requirement, ...]
) -> list[dict[str, Any]]:
    """The nodes named (all must exist), or those matching the selector, or all GPU nodes."""
    from gpuctl.common import selector as sel

    if names:
        by_name = {(n.get("metadata") or {}).get("name"): n for n in nodes}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise GpuctlError(
                "no such node: " + ", ".join(missing), hint="see the nodes with `gpuctl share show`"
            )
        return [by_name[n] for n in dict.fromkeys(names)]
    picked = [n for n in nodes if is_gpu_node(n)]
    if selector:
        picked = [n for n in picked if sel.matches(selector, labels_of(n))]
    return picked


def plan(
    nodes: list[dict[str, Any]], sharing: Sharing, name: str, configs: Configs, replace: bool
) -> list[NodeChange]:
    """Label changes for the chosen nodes; refuses (GpuctlError) what the plugin cannot do."""
    refusals, out = [], []
    for node in nodes:
        node_name = node["metadata"]["name"]
        old = labels_of(node).get(CONFIG_LABEL)
        if not is_gpu_node(node):
            refusals.append(
                f"{node_name}: no NVIDIA GPU (no {GPU} allocatable, no {GFD_PRESENT}=true label)"
            )
            continue
        why_mig = mig_reason(node)
        if sharing.strategy == MPS and why_mig:
            refusals.append(f"{node_name}: MPS is not supported on MIG nodes ({why_mig})")
            continue
        strategy, _ = current_strategy(node, configs)
        if old != name and strategy and strategy != sharing.strategy and not replace:
            refusals.append(
                f"{node_name}: uses {strategy}"
                + (f" (config {old})" if old else "")
                + "; time-slicing and MPS are exclusive on a node"
            )
            continue
        note = ""
        if old == name:
            note = "unchanged"
        elif strategy and strategy != sharing.strategy:
            note = f"switches from {strategy}"
        elif old is not None and old not in configs:
            note = f"old config {old!r} is not in the ConfigMap"
        if (
            sharing.strategy == TIME_SLICING
            and sharing.resources == (GPU,)
            and any(k.startswith("nvidia.com/mig-") for k in allocatable(node))
        ):
            note = (note + "; " if note else "") + (
                "MIG slices are not shared; add --resource nvidia.com/mig-<profile> to share them"
            )
        out.append(NodeChange(node_name, old, name, note))
    if refusals:
        exclusive = any("exclusive" in r for r in refusals)
        raise GpuctlError(
            f"refusing to change sharing on {len(refusals)} node(s):",
            details=refusals,
            hint=(
                "pass --replace to switch a node between time-slicing and MPS (or `gpuctl "
                "share off --nodes NODE` first), or pick other nodes"
            )
            if exclusive
            else "pick other nodes (--nodes / --selector)",
        )
    return out


def show_rows(nodes: list[dict[str, Any]], configs: Configs) -> list[dict[str, Any]]:
    """One row per GPU node: its config label, the strategy and replicas it asks for, and
    what GPU Feature Discovery reports as applied."""
    rows = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        if not is_gpu_node(node):
            continue
        labels, alloc = labels_of(node), allocatable(node)
        chosen = labels.get(CONFIG_LABEL)
        strategy, replicas = current_strategy(node, configs)
        problem = None
        if chosen is not None and chosen not in configs:
            problem = (
                f"config {chosen!r} not in the ConfigMap"
                if configs
                else "no ConfigMap of device plugin configs"
            )
        elif chosen is not None and isinstance(configs[chosen], GpuctlError):
            problem = f"config {chosen!r}: {configs[chosen]}"
        rows.append(
            {
                "node": node["metadata"]["name"],
                "gpus": count(alloc.get(GPU, 0)),
                "shared_gpus": count(alloc.get(GPU + ".shared", 0)),
                "mig_devices": sum(
                    count(v) for k, v in alloc.items() if k.startswith("nvidia.com/mig-")
                ),
                "config": chosen,
                "strategy": strategy or "none",
                "replicas": replicas or 1,
                "applied_strategy": labels.get(GFD_STRATEGY),
                "applied_replicas": whole_number(labels.get(GFD_REPLICAS, "")) or None,
                "mig": mig_reason(node) is not None,
                "problem": problem,
            }
        )
    return rows
