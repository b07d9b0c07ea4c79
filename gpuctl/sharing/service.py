"""Applying GPU sharing to a cluster: find the device plugin and its ConfigMap, read the
nodes, plan (gpuctl.sharing.core.plans), then write the ConfigMap's keys and label the
nodes through the one executor (undone on a failure, read back at the end)."""

from __future__ import annotations

from collections.abc import Callable

from gpuctl.adapters import kube_atomic
from gpuctl.adapters.kube import Kube, NotFound
from gpuctl.common import selector
from gpuctl.common.errors import GpuctlError
from gpuctl.k8s import device_plugin, objects
from gpuctl.runtime.workflow import Action, Progress, execute
from gpuctl.sharing.core import config as core
from gpuctl.sharing.core import plans
from gpuctl.sharing.core.plans import OffPlan, SharePlan, Target, config_map_step, label_step


def locate(
    kube: Kube,
    namespace: str | None,
    config_map: str | None,
    daemonsets: list[dict] | None = None,
) -> Target | None:
    """The device plugin's namespace and config ConfigMap (None if there is no plugin and
    no namespace is given)."""
    if daemonsets is None:
        daemonsets = kube.list_objects("DaemonSet")
    plugin = device_plugin.find_device_plugin(daemonsets)
    if plugin is None and namespace is None:
        return None
    ns = namespace or objects.namespace_of(plugin) or kube.namespace
    if plugin is not None and (objects.namespace_of(plugin) or ns) != ns:
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


def plan_share(
    kube: Kube,
    sharing: device_plugin.Sharing,
    name: str | None,
    nodes: tuple[str, ...],
    selector_text: str | None,
    namespace: str | None,
    config_map: str | None,
    replace: bool,
) -> SharePlan:
    """What `share timeslice` would do on this cluster."""
    if selector_text is not None:
        selector.parse(selector_text)  # a bad selector is refused before any request
    target = locate(kube, namespace, config_map)
    listed = list_nodes(kube, selector_text if not nodes else None) if target else []
    return plans.plan_share(target, listed, sharing, name, nodes, selector_text, replace)


def plan_off(
    kube: Kube,
    nodes: tuple[str, ...],
    selector_text: str | None,
    namespace: str | None = None,
    config_map: str | None = None,
) -> OffPlan:
    """What `share off` would do on this cluster."""
    if selector_text is not None:
        selector.parse(selector_text)
    listed = list_nodes(kube, selector_text if not nodes else None)
    return plans.plan_off(locate(kube, namespace, config_map), listed, nodes, selector_text)


def apply(kube: Kube, p: SharePlan | OffPlan, progress: Progress | None = None) -> None:
    """Write the config first, then the labels: a node never points at a missing key. On a
    failure or Ctrl-C the labels get their old values back and the keys are taken out
    again; at the end the ConfigMap and the labels are read back."""
    actions = [_write_keys(kube, p.target, p.added)] if p.target is not None and p.added else []
    actions += [_label(kube, c) for c in p.changing]
    execute(
        actions,
        progress=progress,
        verify=lambda: _verify(kube, p),
        undone_as="the changes made before the failure were undone",
        left_as="change(s) left in the cluster",
    )


def _write_keys(kube: Kube, t: Target, added: dict[str, str]) -> Action:
    """Create the ConfigMap with these keys, or add them to it (its other keys stay)."""
    step = config_map_step(t, added)

    def add() -> None:
        kube.patch("ConfigMap", t.config_map, t.namespace, {"data": added})

    def take_out() -> str | None:  # a null removes the key (the keys added were new)
        body = {"data": dict.fromkeys(added)}
        return _undone(lambda: kube.patch("ConfigMap", t.config_map, t.namespace, body))

    if t.data is None:  # made with this attempt's token: a rollback removes only ours
        obj = step.detail["object"]
        return kube_atomic.create_action(kube, obj, kube_atomic.new_token(), step)
    return Action(step, add, take_out, name=f"keys {', '.join(added)} of ConfigMap/{t.config_map}")


def _label(kube: Kube, c: core.NodeChange) -> Action:
    def put(value: str | None) -> None:  # a None value removes the label
        kube.patch_node_labels(c.node, {device_plugin.CONFIG_LABEL: value})

    return Action(
        label_step(c),
        lambda: put(c.new),
        lambda: _undone(lambda: put(c.old)),
        name=f"label of node {c.node}",
    )


def _undone(undo: Callable[[], object]) -> str | None:
    try:
        undo()
    except NotFound:
        return None
    except GpuctlError as e:
        return f"undoing it failed: {e.message}"
    return ""


def _verify(kube: Kube, p: SharePlan | OffPlan) -> None:
    """The keys written hold what was written; the nodes carry the labels planned."""
    wrong = []
    if p.target is not None and p.added:
        t = p.target
        data = kube.read("ConfigMap", t.config_map, t.namespace).get("data") or {}
        wrong += [
            f"ConfigMap {t.namespace}/{t.config_map}: key {k!r} is not what was written"
            for k, text in p.added.items()
            if data.get(k) != text
        ]
    if p.changing:
        labels = {
            objects.name_of(n): objects.labels_of(n).get(device_plugin.CONFIG_LABEL)
            for n in list_nodes(kube, None)
        }
        wrong += [
            f"node {c.node}: {device_plugin.CONFIG_LABEL} is {labels.get(c.node)!r}, not {c.new!r}"
            for c in p.changing
            if labels.get(c.node) != c.new
        ]
    if wrong:
        raise GpuctlError(
            "sharing does not read back as planned (changed meanwhile?)", details=wrong
        )


def show(
    kube: Kube, namespace: str | None, config_map: str | None
) -> tuple[Target | None, list[dict]]:
    target = locate(kube, namespace, config_map)
    reads = target is None or target.mounted  # no plugin found: how it chooses is not known
    rows = core.show_rows(
        list_nodes(kube, None),
        device_plugin.parse_configs(target.data if target and reads else None),
        target.selection if target and reads else None,
        reads,
    )
    return target, rows
