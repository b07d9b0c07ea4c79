"""Applying GPU sharing to a cluster: find the device plugin and its ConfigMap, plan the
node labels (gpuctl.sharing.config), then write the ConfigMap and label the nodes."""

from __future__ import annotations

from dataclasses import dataclass

from gpuctl.adapters.kube import Kube, NotFound
from gpuctl.common.errors import GpuctlError
from gpuctl.sharing import config as core


@dataclass
class Target:
    """Where the device plugin reads its configs from."""

    namespace: str
    config_map: str
    mounted: bool  # the DaemonSet mounts this ConfigMap
    data: dict[str, str] | None  # the ConfigMap's data, None if it does not exist yet


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
    plugin = core.find_device_plugin(daemonsets)
    if plugin is None and namespace is None:
        return None
    ns = namespace or ((plugin or {}).get("metadata") or {}).get("namespace") or kube.namespace
    if plugin is not None and (plugin["metadata"].get("namespace") or ns) != ns:
        plugin = None  # a plugin elsewhere does not read this namespace's ConfigMaps
    mounted_name = core.plugin_config_map(plugin) if plugin else None
    name = config_map or mounted_name or core.DEFAULT_CONFIG_MAP
    try:
        data = kube.read("ConfigMap", name, ns).get("data") or {}
    except NotFound:
        data = None
    return Target(ns, name, mounted_name == name, data)


def list_nodes(kube: Kube, selector_text: str | None) -> list[dict]:
    return kube.list_objects("Node", selector=selector_text or None)


@dataclass
class Plan:
    target: Target
    name: str  # the config key
    text: str  # the config YAML
    config_map_action: str  # "create", "add key", "unchanged"
    changes: list[core.NodeChange]

    def objects(self) -> list[dict]:
        data = dict(self.target.data or {})
        data[self.name] = self.text
        cm = core.config_map(
            self.target.config_map,
            self.target.namespace,
            data,
            created=self.config_map_action == "create",
        )
        return [cm] + [core.node_label_patch(c.node, c.new) for c in self.changes if c.changes]


def plan(
    kube: Kube,
    sharing: core.Sharing,
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
    configs = core.parse_configs(target.data)
    text = core.config_text(sharing)
    if target.data is None:
        action = "create"
    elif name not in target.data:
        action = "add key"
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
    changes = core.plan(chosen, sharing, name, configs, replace)
    return Plan(target, name, text, action, changes)


def apply(kube: Kube, p: Plan) -> None:
    """Write the config first, then the labels: a node never points at a missing key."""
    t = p.target
    if p.config_map_action == "create":
        kube.create(core.config_map(t.config_map, t.namespace, {p.name: p.text}))
    elif p.config_map_action == "add key":
        kube.patch("ConfigMap", t.config_map, t.namespace, {"data": {p.name: p.text}})
    apply_labels(kube, p.changes)


def apply_labels(kube: Kube, changes: list[core.NodeChange]) -> None:
    for c in changes:
        if c.changes:  # a None value removes the label
            kube.patch_node_labels(c.node, {core.CONFIG_LABEL: c.new})


def plan_off(
    kube: Kube, nodes: tuple[str, ...], selector_text: str | None
) -> list[core.NodeChange]:
    """Label removals that put the chosen nodes back on the device plugin's default config."""
    from gpuctl.common import selector

    parsed = selector.parse(selector_text) if selector_text is not None else ()
    chosen = core.select_nodes(
        list_nodes(kube, selector_text if not nodes else None), nodes, parsed
    )
    return [
        core.NodeChange(n["metadata"]["name"], core.labels_of(n).get(core.CONFIG_LABEL), None)
        for n in chosen
    ]


def show(
    kube: Kube, namespace: str | None, config_map: str | None
) -> tuple[Target | None, list[dict]]:
    target = locate(kube, namespace, config_map)
    rows = core.show_rows(
        list_nodes(kube, None), core.parse_configs(target.data if target else None)
    )
    return target, rows
