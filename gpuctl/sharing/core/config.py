"""GPU sharing through the NVIDIA device plugin (gpuctl.k8s.device_plugin): a sharing
config from options, the ConfigMap that holds named configs, which config the plugin runs
on a node, and which node may use which.

A node selects a config by the label ``nvidia.com/device-plugin.config=<key>``, where
<key> is a key of the ConfigMap the device plugin reads. Pure: nodes and ConfigMaps come in
as the API returns them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuctl.common import k8s_names
from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.common.numbers import whole_number
from gpuctl.gpus import geometry
from gpuctl.k8s.device_plugin import (
    CONFIG_LABEL,
    MPS,
    TIME_SLICING,
    Configs,
    Sharing,
    parse_configs,
)
from gpuctl.k8s.labels import MANAGED
from gpuctl.k8s.nodes import (
    GFD_PRESENT,
    GFD_REPLICAS,
    GFD_STRATEGY,
    GPU,
    MIG_PREFIX,
    allocatable,
    gpu_resources,
    gpus_of,
    is_gpu_node,
    mig_reason,
)
from gpuctl.k8s.objects import labels_of, name_of

if TYPE_CHECKING:
    from gpuctl.common.selector import Requirement

MAX_REPLICAS = 256  # per GPU; more is almost certainly a typo
MAX_MPS_REPLICAS = 48  # MPS clients per GPU (Volta and newer)


def make_sharing(
    strategy: str,
    replicas: int,
    rename_by_default: bool = False,
    fail_requests_greater_than_one: bool | None = None,
    resources: tuple[str, ...] = (GPU,),
) -> Sharing:
    """Validate options into a Sharing (UsageError on a bad combination). An unset
    `fail_requests_greater_than_one` is the plugin's default for the strategy."""
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
        if r != GPU and not (r.startswith(MIG_PREFIX) and _mig_profile(r)):
            raise UsageError(
                f"--resource {r!r} is not nvidia.com/gpu or a MIG resource "
                "(nvidia.com/mig-<profile>)"
            )
    if strategy == MPS and resources != (GPU,):
        raise UsageError("MPS can share only nvidia.com/gpu, not MIG resources")
    if fail_requests_greater_than_one is None:
        fail_requests_greater_than_one = strategy == MPS
    return Sharing(strategy, replicas, rename_by_default, fail_requests_greater_than_one, resources)


def _mig_profile(resource: str) -> bool:
    # as the plugin advertises them: nvidia.com/mig-1g.10gb.me for 1g.10gb+me
    names = {MIG_PREFIX + n.replace("+", ".") for n in geometry.all_profile_names()}
    return resource in names


def check_name(name: str) -> str:
    if not name or not k8s_names.label_value(name):
        raise UsageError(
            f"config name {name!r} must be 1-63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit (it is a node label value)"
        )
    return name


def config_map(
    name: str, namespace: str, data: dict[str, str], created: bool = True
) -> dict[str, Any]:
    """The ConfigMap of configs; `created` marks one gpuctl creates (an existing one, e.g. the
    Helm chart's, only gets keys added)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if created:
        meta["labels"] = dict(MANAGED)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


def node_label_patch(node: str, config: str | None) -> dict[str, Any]:
    """The Node fields gpuctl changes (a strategic-merge patch; None removes the label)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node, "labels": {CONFIG_LABEL: config}},
    }


# --- which config a node runs ------------------------------------------------------------
# The plugin's config-manager picks a node's config (cmd/config-manager/main.go,
# updateConfigName, k8s-device-plugin v0.20.0): the key its label names; else DEFAULT_CONFIG;
# else the fallback strategies in order: "named" takes the key "default", "single" the only
# key, "empty" no config at all. The Helm chart's defaults are ["named", "single"]: there a
# ConfigMap with one key is every unlabelled node's config. The GPU Operator sets "empty".
NAMED_FALLBACK = "default"
HELM_FALLBACKS = ("named", "single")
NO_SHARING_TEXT = (
    "# No sharing: written by gpuctl so that nodes without the\n"
    f"# {CONFIG_LABEL} label do not share their GPUs.\nversion: v1\n"
)


@dataclass(frozen=True)
class Selection:
    """The config-manager's DEFAULT_CONFIG and FALLBACK_STRATEGIES."""

    default: str | None = None
    fallbacks: tuple[str, ...] = HELM_FALLBACKS


# What the advice gpuctl prints for a plugin that reads none of its ConfigMaps sets up:
# config.name=<ConfigMap>, config.default=default.
ADVISED = Selection(NAMED_FALLBACK)


@dataclass(frozen=True)
class Chosen:
    """The config a node runs: a ConfigMap key, or None for no config file (the plugin's
    built-in defaults: no sharing); `error` when the config-manager fails instead."""

    key: str | None
    how: str  # "label", "DEFAULT_CONFIG", "fallback named|single|empty"
    error: str | None = None


def plugin_selection(ds: dict[str, Any]) -> Selection | None:
    """DEFAULT_CONFIG and FALLBACK_STRATEGIES of the DaemonSet's config-manager (the
    container watching the node label), or None if it runs none."""
    pod = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
        env = {e.get("name"): e.get("value") for e in c.get("env") or []}
        if env.get("NODE_LABEL") == CONFIG_LABEL:
            text = env.get("FALLBACK_STRATEGIES") or ""
            fallbacks = tuple(f.strip() for f in text.split(",") if f.strip())
            return Selection(env.get("DEFAULT_CONFIG") or None, fallbacks)
    return None


def chosen_config(label: str | None, keys: list[str], sel: Selection) -> Chosen:
    """The config-manager's choice for a node with this label value (None: no label)."""
    if not keys:
        return Chosen(None, "", "no configuration files available")
    if label:
        if label not in keys:
            return Chosen(None, "label", f"specified config {label} does not exist")
        return Chosen(label, "label")
    if sel.default:
        if sel.default not in keys:
            return Chosen(None, "DEFAULT_CONFIG", f"specified config {sel.default} does not exist")
        return Chosen(sel.default, "DEFAULT_CONFIG")
    for fallback in sel.fallbacks:
        if fallback == "named" and NAMED_FALLBACK in keys:
            return Chosen(NAMED_FALLBACK, "fallback named")
        if fallback == "single" and len(keys) == 1:
            return Chosen(keys[0], "fallback single")
        if fallback == "empty":
            return Chosen(None, "fallback empty")
        if fallback not in ("named", "single"):
            return Chosen(None, "fallback", f"unknown fallback strategy: {fallback}")
    return Chosen(
        None, "fallback", "no config was set, no default was provided, and all fallbacks failed"
    )


def shares(chosen: Chosen, configs: Configs) -> bool | None:
    """Whether a node on this config shares its GPUs; None when that cannot be told (the
    config-manager fails, or the config does not parse)."""
    if chosen.error:
        return None
    if chosen.key is None:
        return False
    s = configs.get(chosen.key)
    return None if isinstance(s, GpuctlError) else s is not None


def unshare_fallback(data: dict[str, str], sel: Selection) -> dict[str, str] | None:
    """Keys to add so that a node without the label runs no sharing: {} if it already does;
    a 'default' without sharing where the fallbacks reach that key; None if no key can do
    it (DEFAULT_CONFIG names a sharing config, a 'default' key shares, ...)."""
    if shares(chosen_config(None, sorted(data), sel), parse_configs(data)) is False:
        return {}
    if NAMED_FALLBACK not in data:
        extra = {NAMED_FALLBACK: NO_SHARING_TEXT}
        fixed = data | extra
        if shares(chosen_config(None, sorted(fixed), sel), parse_configs(fixed)) is False:
            return extra
    return None


def keep_unlabelled_unshared(
    before: dict[str, str], after: dict[str, str], sel: Selection
) -> dict[str, str]:
    """Keys to add beside a new sharing config (`after` = `before` + it) so that nodes
    without the label do not start sharing, or lose their config, because of it: with the
    chart's fallbacks a ConfigMap's only key is every unlabelled node's config. Refuses
    (GpuctlError) where no key can prevent that."""
    extra = unshare_fallback(after, sel)
    if extra is not None:
        return extra
    if before and shares(chosen_config(None, sorted(before), sel), parse_configs(before)):
        return {}  # unlabelled nodes share already, by the admin's choice of default
    now = chosen_config(None, sorted(after), sel)
    raise GpuctlError(
        "nodes without the sharing label would "
        + (f"fail to get a config ({now.error})" if now.error else f"share as {now.key!r}")
        + f" (DEFAULT_CONFIG={sel.default or 'unset'}, FALLBACK_STRATEGIES="
        f"{','.join(sel.fallbacks) or 'unset'})",
        hint="give the device plugin a default config without sharing (Helm: --set "
        f"config.default={NAMED_FALLBACK}, with a key {NAMED_FALLBACK!r} in its ConfigMap)",
    )


def describe(chosen: Chosen, configs: Configs) -> str:
    """`'ts-4' (fallback single, time-slicing ×4)`, for plans and tables."""
    if chosen.error:
        return f"no config (the config-manager fails: {chosen.error})"
    if chosen.key is None:
        return f"no config file ({chosen.how}: no sharing)"
    s = configs.get(chosen.key)
    what = (
        "no sharing"
        if s is None
        else "unreadable"
        if isinstance(s, GpuctlError)
        else f"{s.strategy} ×{s.replicas}"
    )
    return f"{chosen.key!r} ({chosen.how}, {what})"


def no_sharing_key(data: dict[str, str]) -> tuple[str, dict[str, str]]:
    """A key of the ConfigMap whose config shares nothing, and the keys to add for it."""
    configs = parse_configs(data)
    for key in (NAMED_FALLBACK, "no-sharing"):
        if key not in data:
            return key, {key: NO_SHARING_TEXT}
        if configs[key] is None:
            return key, {}
    raise GpuctlError(
        f"the ConfigMap's keys {NAMED_FALLBACK!r} and 'no-sharing' both share GPUs",
        hint="add a config without sharing to it, and label the nodes with its key",
    )


# --- nodes ---------------------------------------------------------------------------


def node_config(node: dict[str, Any], configs: Configs, sel: Selection | None) -> Chosen | None:
    """The config the node runs (None where the plugin's way of choosing is not known)."""
    label = labels_of(node).get(CONFIG_LABEL)
    if sel is None:
        return Chosen(label, "label") if label in configs else None
    return chosen_config(label, sorted(configs), sel)


def current_strategy(
    node: dict[str, Any], configs: Configs, sel: Selection | None = None
) -> tuple[str | None, int | None]:
    """(strategy, replicas) the node is set to: from the config it runs (its label's, or
    the one the plugin falls back to), else from what GPU Feature Discovery reports."""
    labels = labels_of(node)
    chosen = node_config(node, configs, sel)
    if chosen is not None and not chosen.error:
        s = configs.get(chosen.key) if chosen.key else None
        if isinstance(s, Sharing):
            return s.strategy, s.replicas
        if s is None:
            return None, None
    gfd = labels.get(GFD_STRATEGY)
    replicas = whole_number(labels.get(GFD_REPLICAS, "")) or None
    if gfd in (TIME_SLICING, MPS):
        return gfd, replicas
    seen = gpus_of(node)  # what the labels say otherwise (-SHARED, replicas, GKE's sharing)
    if seen.sharing in (TIME_SLICING, MPS):
        return seen.sharing, seen.replicas
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
        by_name = {name_of(n): n for n in nodes}
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
    nodes: list[dict[str, Any]],
    sharing: Sharing,
    name: str,
    configs: Configs,
    replace: bool,
    sel: Selection | None = None,
) -> list[NodeChange]:
    """Label changes for the chosen nodes; refuses (GpuctlError) what the plugin cannot do."""
    refusals, out = [], []
    for node in nodes:
        node_name = name_of(node)
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
        strategy, _ = current_strategy(node, configs, sel)
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
            and any(k.startswith(MIG_PREFIX) for k in allocatable(node))
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
                "share off --node NODE` first), or pick other nodes"
            )
            if exclusive
            else "pick other nodes (--node / --selector)",
        )
    return out


def show_rows(
    nodes: list[dict[str, Any]],
    configs: Configs,
    sel: Selection | None = None,
    reads: bool = True,
) -> list[dict[str, Any]]:
    """One row per GPU node: its config label, the config it really runs (the label's, or
    the one the plugin falls back to without it), the strategy and replicas that asks for,
    and what GPU Feature Discovery reports as applied. `reads`: whether the device plugin
    reads configs at all; one that mounts none runs no config-manager (the GPU Operator
    removes it without devicePlugin.config, the Helm chart adds it only with config.name or
    config.map): its nodes run its built-in defaults, no problem but for a node labelled
    for a config, which nothing reads."""
    rows = []
    for node in sorted(nodes, key=name_of):
        if not is_gpu_node(node):
            continue
        labels, physical = labels_of(node), gpus_of(node).physical
        label = labels.get(CONFIG_LABEL)
        running = node_config(node, configs, sel)
        strategy, replicas = current_strategy(node, configs, sel)
        problem = None
        if not reads:
            if label is not None:
                problem = (
                    f"labelled for config {label!r}, but the device plugin reads no config: "
                    "the label has no effect"
                )
        elif label is not None and label not in configs:
            problem = (
                f"config {label!r} not in the ConfigMap"
                if configs
                else "no ConfigMap of device plugin configs"
            )
        elif running is not None and running.error:
            problem = f"the plugin's config-manager fails: {running.error}"
        elif running is not None and isinstance(configs.get(running.key or ""), GpuctlError):
            problem = f"config {running.key!r}: {configs[running.key or '']}"
        rows.append(
            {
                "node": name_of(node),
                "gpu": gpus_of(node).name,
                # what is physical (None: no label or resource counts the GPUs), apart
                # from the units the device plugin offers (a MIG slice, a time-shared replica)
                "gpus": None if physical.unknown else physical.gpus,
                "mig_split_gpus": physical.split,
                "mig_slices": physical.slices,
                "allocatable": gpu_resources(node),
                "config": label,
                "running_config": running.key if running and not running.error else None,
                "config_source": running.how if running else None,
                "strategy": strategy or "none",
                "replicas": replicas or 1,
                "applied_strategy": labels.get(GFD_STRATEGY),
                "applied_replicas": whole_number(labels.get(GFD_REPLICAS, "")) or None,
                "mig": mig_reason(node) is not None,
                "problem": problem,
            }
        )
    return rows
