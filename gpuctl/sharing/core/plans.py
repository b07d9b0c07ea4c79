"""What `gpuctl share timeslice` and `share off` will do, from where the device plugin
reads its configs and the nodes chosen: the keys written into its ConfigMap, the node
labels that change and why, and the question to ask first. Each plan offers its steps as
a gpuctl.common.plan.Plan. Pure: the ConfigMap and the nodes come in as read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuctl.common import selector as label_selector
from gpuctl.common.errors import GpuctlError
from gpuctl.common.plan import Plan, Step
from gpuctl.k8s import device_plugin
from gpuctl.k8s.objects import labels_of, name_of
from gpuctl.sharing.core import config as core

# Without a cluster: where the device plugin is taken to read its configs (-n, --config-map
# change it). The GPU Operator's namespace; the ConfigMap gpuctl creates when the plugin
# mounts none.
OFFLINE_NAMESPACE = "gpu-operator"


@dataclass
class Target:
    """Where the device plugin reads its configs from, and how it picks one for a node."""

    namespace: str
    config_map: str
    mounted: bool  # the DaemonSet mounts this ConfigMap
    data: dict[str, str] | None  # the ConfigMap's data, None if it does not exist yet
    # the plugin's DEFAULT_CONFIG and fallbacks; for a ConfigMap it does not read yet, what
    # the printed advice sets up
    selection: core.Selection = core.ADVISED


def config_map_step(t: Target, added: dict[str, str]) -> Step:
    """The step that writes ADDED into the ConfigMap: creates it, or adds the keys to it
    (its other keys stay)."""
    where = f"ConfigMap {t.namespace}/{t.config_map}"
    keys = ", ".join(repr(k) for k in added)
    if t.data is None:
        obj = core.config_map(t.config_map, t.namespace, added)
        return Step("create", where, f"the device plugin's configs {keys}", {"object": obj})
    return Step("patch", where, f"add {keys}", {"data": dict(added)})


def label_step(c: core.NodeChange) -> Step:
    """The step that sets (or removes) a node's config label."""
    if c.new is None:
        what = f"remove {device_plugin.CONFIG_LABEL}={c.old}"
    else:
        what = f"{device_plugin.CONFIG_LABEL}: {c.old or '(none)'} → {c.new}"
    return Step(
        "label",
        f"node {c.node}",
        what + (f" ({c.note})" if c.note else ""),
        {"object": core.node_label_patch(c.node, c.new), "old": c.old},
    )


def _steps(
    t: Target | None, added: dict[str, str], changes: list[core.NodeChange]
) -> tuple[Step, ...]:
    """The ConfigMap's keys first, then the labels: a node never points at a missing key."""
    first = [config_map_step(t, added)] if t is not None and added else []
    return (*first, *(label_step(c) for c in changes if c.changes))


@dataclass
class SharePlan:
    """`share timeslice`: the config NAME (its YAML TEXT) in the ConfigMap, and the nodes'
    labels pointing at it."""

    sharing: device_plugin.Sharing
    target: Target
    name: str  # the config key
    text: str  # the config YAML
    config_map_action: str  # "create", "add key", "unchanged"
    changes: list[core.NodeChange]
    extra: dict[str, str] = field(default_factory=dict)  # e.g. a non-sharing 'default'

    @property
    def added(self) -> dict[str, str]:
        """The keys this plan writes into the ConfigMap."""
        if self.config_map_action == "unchanged":
            return {}
        return {self.name: self.text, **self.extra}

    @property
    def changing(self) -> list[core.NodeChange]:
        return [c for c in self.changes if c.changes]

    def objects(self) -> list[dict[str, Any]]:
        out = []
        if self.config_map_action != "unchanged" or self.target.data is None:
            data = dict(self.target.data or {}) | self.added
            created = self.target.data is None
            out.append(
                core.config_map(self.target.config_map, self.target.namespace, data, created)
            )
        return out + [core.node_label_patch(c.node, c.new) for c in self.changing]

    @property
    def question(self) -> str:
        return (
            f"Apply {self.sharing.strategy} ×{self.sharing.replicas} to {len(self.changing)} "
            "node(s)? The device plugin restarts on them"
        )

    @property
    def plan(self) -> Plan:
        s = self.sharing
        return Plan(
            f"share GPUs ({s.strategy} ×{s.replicas}, config {self.name!r})",
            _steps(self.target, self.added, self.changes),
        )


def plan_share(
    target: Target | None,
    nodes: list[dict[str, Any]],
    sharing: device_plugin.Sharing,
    name: str | None,
    names: tuple[str, ...],
    selector: str | None,
    replace: bool,
) -> SharePlan:
    """Share the GPUs of the nodes NAMES (else those of NODES matching SELECTOR, else every
    GPU node) under config NAME (default: named after the sharing), in the ConfigMap TARGET
    says. Refuses (GpuctlError) what would change other nodes or what the plugin cannot do."""
    name = core.check_name(name or sharing.default_name)
    if target is None:
        raise GpuctlError(
            "no NVIDIA device plugin DaemonSet found in the cluster",
            hint="install the GPU Operator or the nvidia-device-plugin Helm chart, "
            "or pass --namespace where it runs",
        )
    configs = device_plugin.parse_configs(target.data)
    text = device_plugin.config_text(sharing)
    extra: dict[str, str] = {}
    if target.data is None or name not in target.data:
        action = "create" if target.data is None else "add key"
        before = dict(target.data or {})
        extra = core.keep_unlabelled_unshared(before, before | {name: text}, target.selection)
    elif configs[name] == sharing:
        action = "unchanged"
        text = target.data[name]  # keep the stored text when it means the same
    else:
        raise GpuctlError(
            f"ConfigMap {target.namespace}/{target.config_map} already has a config {name!r} "
            "with different content; nodes using it would change too",
            hint="choose another --name",
        )
    chosen = core.select_nodes(nodes, names, _parsed(selector))
    if not chosen:
        raise GpuctlError(
            "no GPU node matches" + (f" {selector!r}" if selector else ""),
            hint="see the GPU nodes with `gpuctl share show`",
        )
    changes = core.plan(chosen, sharing, name, configs, replace, target.selection)
    return SharePlan(sharing, target, name, text, action, changes, extra)


def _parsed(selector: str | None) -> tuple[label_selector.Requirement, ...]:
    return label_selector.parse(selector) if selector is not None else ()


def plan_offline(
    sharing: device_plugin.Sharing,
    name: str | None,
    nodes: tuple[str, ...],
    namespace: str | None,
    config_map: str | None,
) -> SharePlan:
    """What `share timeslice` would apply to a cluster that has no ConfigMap of configs
    yet and whose nodes carry no config label, told by the options alone (a dry run without
    a cluster, for manifests kept in Git). Beside the new config, the ConfigMap gets the
    'default' config without sharing the plugin is to fall back to."""
    name = core.check_name(name or sharing.default_name)
    target = Target(
        namespace or OFFLINE_NAMESPACE,
        config_map or device_plugin.DEFAULT_CONFIG_MAP,
        mounted=True,
        data=None,
    )
    text = device_plugin.config_text(sharing)
    extra = core.keep_unlabelled_unshared({}, {name: text}, target.selection)
    changes = [core.NodeChange(n, None, name) for n in nodes]
    return SharePlan(sharing, target, name, text, "create", changes, extra)


@dataclass
class OffPlan:
    """`share off`: the nodes' labels removed (or pointed at a config without sharing),
    after the keys that make that config exist."""

    target: Target | None
    changes: list[core.NodeChange]
    added: dict[str, str]  # keys to add to the ConfigMap first (a config without sharing)

    @property
    def changing(self) -> list[core.NodeChange]:
        return [c for c in self.changes if c.changes]

    def objects(self) -> list[dict[str, Any]]:
        """The ConfigMap with the keys added (if any are), then the node labels."""
        out = []
        if self.added and self.target is not None:
            t = self.target
            data = dict(t.data or {}) | self.added
            out.append(core.config_map(t.config_map, t.namespace, data, t.data is None))
        return out + [core.node_label_patch(c.node, c.new) for c in self.changing]

    @property
    def question(self) -> str:
        return f"Stop sharing on {len(self.changes)} node(s)? The device plugin restarts on them"

    @property
    def plan(self) -> Plan:
        return Plan("stop sharing GPUs", _steps(self.target, self.added, self.changes))


def plan_off(
    target: Target | None,
    nodes: list[dict[str, Any]],
    names: tuple[str, ...],
    selector: str | None,
) -> OffPlan:
    """Stop sharing on the chosen nodes. Removing the label puts a node on the config the
    plugin falls back to, which shares too where that is a sharing config (with the Helm
    chart's fallbacks, a ConfigMap's only key): then the node is labelled with a config
    without sharing instead (added to the ConfigMap if it has none)."""
    chosen = core.select_nodes(nodes, names, _parsed(selector))
    data = dict((target.data if target else None) or {})
    added: dict[str, str] = {}
    new_label = None  # remove the label
    if target is not None:
        fix = core.unshare_fallback(data, target.selection)
        if fix is None:  # the plugin's default config shares: point the nodes elsewhere
            new_label, added = core.no_sharing_key(data)
        else:
            added = fix
    configs, after = device_plugin.parse_configs(data), device_plugin.parse_configs(data | added)
    changes, moved = [], False
    for n in chosen:
        old = labels_of(n).get(device_plugin.CONFIG_LABEL)
        note = ""
        if target is not None:
            was = core.chosen_config(old, sorted(data), target.selection)
            now = core.chosen_config(new_label, sorted(data | added), target.selection)
            moved = moved or (was.key, was.error) != (now.key, now.error)
            if core.shares(was, configs) is not False:
                note = f"runs {core.describe(was, configs)}; then {core.describe(now, after)}"
        changes.append(core.NodeChange(name_of(n), old, new_label, note))
    if not moved:
        added = {}
    return OffPlan(target, changes, added)


def fallback_change(target: Target | None, added: dict[str, str]) -> tuple[str, str] | None:
    """What nodes without the label run before and after `added` is written, if it differs
    (they stop falling back to a sharing config)."""
    if target is None or not added:
        return None
    before = dict(target.data or {})
    after = before | added
    was = core.chosen_config(None, sorted(before), target.selection)
    now = core.chosen_config(None, sorted(after), target.selection)
    if (was.key, was.error) == (now.key, now.error):
        return None
    return (
        core.describe(was, device_plugin.parse_configs(before)),
        core.describe(now, device_plugin.parse_configs(after)),
    )
