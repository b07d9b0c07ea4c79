"""Applying GPU sharing to a cluster: find the device plugin and its ConfigMap, plan the
node labels (gpuctl.sharing.core.config), then write the ConfigMap and label the nodes."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuctl.adapters.kube import Kube, NotFound
from gpuctl.common.errors import GpuctlError
from gpuctl.k8s import device_plugin
from gpuctl.k8s.nodes import labels_of
from gpuctl.sharing.core import config as core


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


def list_daemonsets(kube: Kube) -> list[dict]:
    return kube.list_objects("DaemonSet")


def locate(
    kube: Kube,
    namespace: str | None,
    config_map: str | None,
    daemonsets: list[dict] | None = None,
) -> Target | None:
    """The device plugin's namespace and config ConfigMap (None if there is no plugin and
    no namespace is given)."""
    if daemonsets is None:
        daemonsets = list_daemonsets(kube)
    plugin = device_plugin.find_device_plugin(daemonsets)
    if plugin is None and namespace is None:
        return None
    ns = namespace or ((plugin or {}).get("metadata") or {}).get("namespace") or kube.namespace
    if plugin is not None and (plugin["metadata"].get("namespace") or ns) != ns:
        plugin = None  # a plugin elsewhere does not read this namespace's ConfigMaps
    mounted_name = device_plugin.plugin_config_map(plugin) if plugin else None
    name = config_map or mounted_name or device_plugin.DEFAULT_CONFIG_MAP
    try:
        data = kube.read("ConfigMap", name, ns).get("data") or {}
    except NotFound:
        data = None
    mounted = mounted_name == name
    selection = core.ADVISED
    if plugin is not None and mounted:
        # no config-manager environment: its own defaults (no default, no fallbacks)
        selection = core.plugin_selection(plugin) or core.Selection(None, ())
    return Target(ns, name, mounted, data, selection)


def list_nodes(kube: Kube, selector_text: str | None) -> list[dict]:
    return kube.list_objects("Node", selector=selector_text or None)


@dataclass
class Plan:
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

    def objects(self) -> list[dict]:
        out = []
        if self.config_map_action != "unchanged" or self.target.data is None:
            data = dict(self.target.data or {}) | self.added
            created = self.target.data is None
            out.append(
                core.config_map(self.target.config_map, self.target.namespace, data, created)
            )
        return out + [core.node_label_patch(c.node, c.new) for c in self.changes if c.changes]


def plan(
    kube: Kube,
    sharing: device_plugin.Sharing,
    name: str | None,
    nodes: tuple[str, ...],
    selector_text: str | None,
    namespace: str | None,
    config_map: str | None,
    replace: bool,
) -> Plan:
    from gpuctl.common import selector

    parsed = selector.parse(selector_text) if selector_text is not None else ()
    name = core.check_name(name or sharing.default_name)
    target = locate(kube, namespace, config_map)
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
    chosen = core.select_nodes(
        list_nodes(kube, selector_text if not nodes else None), nodes, parsed
    )
    if not chosen:
        raise GpuctlError(
            "no GPU node matches" + (f" {selector_text!r}" if selector_text else ""),
            hint="see the GPU nodes with `gpuctl share show`",
        )
    changes = core.plan(chosen, sharing, name, configs, replace, target.selection)
    return Plan(target, name, text, action, changes, extra)


# Without a cluster: where the device plugin is taken to read its configs (-n, --config-map
# change it). The GPU Operator's namespace; the ConfigMap gpuctl creates when the plugin
# mounts none.
OFFLINE_NAMESPACE = "gpu-operator"


def plan_offline(
    sharing: device_plugin.Sharing,
    name: str | None,
    nodes: tuple[str, ...],
    namespace: str | None,
    config_map: str | None,
) -> Plan:
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
    return Plan(target, name, text, "create", changes, extra)


def apply(kube: Kube, p: Plan) -> None:
    """Write the config first, then the labels: a node never points at a missing key."""
    write_keys(kube, p.target, p.added)
    apply_labels(kube, p.changes)


def write_keys(kube: Kube, t: Target, added: dict[str, str]) -> None:
    """Create the ConfigMap with these keys, or add them to it (its other keys stay)."""
    if not added:
        return
    if t.data is None:
        kube.create(core.config_map(t.config_map, t.namespace, added))
    else:
        kube.patch("ConfigMap", t.config_map, t.namespace, {"data": added})


def apply_labels(kube: Kube, changes: list[core.NodeChange]) -> None:
    for c in changes:
        if c.changes:  # a None value removes the label
            kube.patch_node_labels(c.node, {device_plugin.CONFIG_LABEL: c.new})


@dataclass
class OffPlan:
    target: Target | None
    changes: list[core.NodeChange]
    added: dict[str, str]  # keys to add to the ConfigMap first (a config without sharing)

    @property
    def todo(self) -> bool:
        return bool(self.added) or any(c.changes for c in self.changes)

    def objects(self) -> list[dict]:
        """The ConfigMap with the keys added (if any are), then the node labels."""
        out = []
        if self.added and self.target is not None:
            t = self.target
            data = dict(t.data or {}) | self.added
            out.append(core.config_map(t.config_map, t.namespace, data, t.data is None))
        return out + [core.node_label_patch(c.node, c.new) for c in self.changes if c.changes]


def plan_off(
    kube: Kube,
    nodes: tuple[str, ...],
    selector_text: str | None,
    namespace: str | None = None,
    config_map: str | None = None,
) -> OffPlan:
    """Stop sharing on the chosen nodes. Removing the label puts a node on the config the
    plugin falls back to, which shares too where that is a sharing config (with the Helm
    chart's fallbacks, a ConfigMap's only key): then the node is labelled with a config
    without sharing instead (added to the ConfigMap if it has none)."""
    from gpuctl.common import selector

    parsed = selector.parse(selector_text) if selector_text is not None else ()
    chosen = core.select_nodes(
        list_nodes(kube, selector_text if not nodes else None), nodes, parsed
    )
    target = locate(kube, namespace, config_map)
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
        changes.append(core.NodeChange(n["metadata"]["name"], old, new_label, note))
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


def apply_off(kube: Kube, p: OffPlan) -> None:
    if p.target is not None:
        write_keys(kube, p.target, p.added)
    apply_labels(kube, p.changes)


def show(
    kube: Kube, namespace: str | None, config_map: str | None
) -> tuple[Target | None, list[dict]]:
    target = locate(kube, namespace, config_map)
    rows = core.show_rows(
        list_nodes(kube, None),
        device_plugin.parse_configs(target.data if target else None),
        target.selection if target else None,
    )
    return target, rows
