"""MIG on a cluster: ask the GPU Operator's mig-manager for a named config by labelling
nodes ``nvidia.com/mig.config=NAME``, then follow ``nvidia.com/mig.config.state``
(pending → success | failed) until every node is done or the time is up."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from gpuctl.adapters.kube import Kube, NotFound
from gpuctl.common import selector as label_selector
from gpuctl.common.errors import BackendError, GpuctlError, SpecError, UsageError
from gpuctl.common.specfile import load_yaml
from gpuctl.gpus.geometry import GpuModel, models
from gpuctl.gpus.resources import DONE_PHASES, gpu_resources
from gpuctl.k8s.nodes import gpus_of
from gpuctl.k8s.objects import labels_of, name_of, namespace_of
from gpuctl.mig.core import migparted
from gpuctl.mig.core.operator import (
    CONFIG_LABEL,
    STATE_LABEL,
    NodeTarget,
)


def _model_of(node: dict) -> tuple[GpuModel | None, int]:
    """The node's GPU model with MIG geometry, whatever labelled it, and its GPUs."""
    gpus = gpus_of(node)
    model = next((m for m in models() if m.short_name == gpus.model), None)
    return model, gpus.count or 0


def config_to_render(
    file: str | None, config: str | None, layout: str | None, indexes: list[int] | None
) -> dict:
    """The mig-parted config to put in a GPU Operator ConfigMap: config `config` of `file`
    (every config without -c), or a --layout shorthand named `config` or after itself."""
    if file:
        cfg = migparted.load(file)
        data = cfg.doc.data
        # mig-parted reads the whole file before choosing: one config it refuses makes the
        # ConfigMap unusable to mig-manager, so a file rendered whole must be good throughout
        for name in [config] if config else cfg.names:
            cfg.check_models(name)
        if config:
            data = {
                "version": data["version"],
                "mig-configs": {config: data["mig-configs"][config]},
            }
        return data
    if layout:
        return migparted.shorthand_config(config or _config_name(layout), layout, indexes)
    raise UsageError("--render-configmap needs -f config.yaml or --layout")


def _config_name(layout: str) -> str:
    if layout.startswith("all-"):
        return layout
    return "custom-" + re.sub(r"[^a-z0-9.]+", "-", layout.lower()).strip("-")


def targets(kube: Kube, nodes: tuple[str, ...], selector: str | None) -> list[NodeTarget]:
    if bool(nodes) == bool(selector):
        raise UsageError("give exactly one of --node or --selector")
    if nodes:
        items = [kube.read_node(node) for node in nodes]
    else:
        assert selector  # exactly one of the two, checked above
        wanted = label_selector.parse(selector)
        items = kube.list_objects("Node", selector=selector)
        items = [n for n in items if label_selector.matches(wanted, labels_of(n))]
        if not items:
            raise GpuctlError(f"no node matches the selector {selector!r}")
    pods = kube.unfinished_pods()
    out = []
    for n in items:
        labels = labels_of(n)
        model, count = _model_of(n)
        t = NodeTarget(name_of(n), labels.get(CONFIG_LABEL), labels.get(STATE_LABEL), model, count)
        for p in pods:
            if (p.get("spec") or {}).get("nodeName") != t.name:
                continue
            if (p.get("status") or {}).get("phase") in DONE_PHASES:
                continue
            if gpu_resources(p):
                t.gpu_pods.append(f"{namespace_of(p) or 'default'}/{name_of(p)}")
        out.append(t)
    return out


def follow(
    kube: Kube,
    nodes: list[NodeTarget],
    config: str,
    timeout: float,
    report: Callable[[str, str, float], None],
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, str | None]:
    """Wait until each node's state is success or failed after our change; report every
    state seen as (node, state, seconds). Nodes already on this config and in success are
    done at once. Raises on failure or timeout, naming the nodes."""
    start = clock()
    states = {t.name: t.state for t in nodes}
    # A node whose label changed must first go through pending: an old "success" is stale.
    # One that already had this config and settled stays as it is (relabelling the same
    # value does not make mig-manager try again).
    settled = {t.name for t in nodes if t.config == config and t.state in ("success", "failed")}
    seen_pending = {t.name: t.name in settled for t in nodes}
    done = set(settled)
    for t in nodes:
        if t.name in done:
            report(t.name, f"{t.state} (already on this config)", 0.0)
    names = {t.name for t in nodes}
    while len(done) < len(nodes):
        left = timeout - (clock() - start)
        if left <= 0:
            break
        for event in kube.watch("Node", timeout_seconds=max(1, min(int(left), 30))):
            node = event["object"]
            name = name_of(node)
            if name not in names or name in done:
                continue
            labels = labels_of(node)
            state = labels.get(STATE_LABEL)
            if labels.get(CONFIG_LABEL) != config:  # gpuctl set it: another client changed it
                raise BackendError(
                    f"another client set {CONFIG_LABEL}={labels.get(CONFIG_LABEL)} on node "
                    f"{name} while the GPU Operator applied {config!r}; left to them",
                    hint=f"see who changes it (kubectl get node {name} --show-labels) "
                    "before running this again",
                )
            if state != states[name]:
                states[name] = state
                report(name, state or "(no state yet)", clock() - start)
            if state in ("pending", "rebooting"):
                seen_pending[name] = True
            elif state in ("success", "failed") and seen_pending[name]:
                done.add(name)
            if len(done) == len(nodes) or clock() - start >= timeout:
                break
    failed = sorted(n for n in done if states[n] == "failed")
    waiting = sorted(names - done)
    if failed:
        raise BackendError(
            f"the GPU Operator failed to apply MIG config {config!r} on {', '.join(failed)}",
            hint="see the nvidia-mig-manager pod's log on that node (kubectl logs "
            "-n gpu-operator -l app=nvidia-mig-manager); to retry, label the "
            "node with another config and back",
        )
    if waiting:
        raise BackendError(
            f"timed out after {timeout:g}s waiting for MIG config {config!r} on "
            + ", ".join(f"{n} (state: {states[n] or 'none'})" for n in waiting),
            hint="is the GPU Operator's mig-manager running on those nodes? "
            "Raise --timeout for slow reconfigurations",
        )
    return states


def operator_config(
    kube: Kube, namespace: str, config: str, names: list[str]
) -> tuple[migparted.MigConfigFile | None, str | None]:
    """The mig-parted config (from the GPU Operator's ConfigMaps) that defines ``config``:
    (file, None); (None, note) when there is nothing readable to check against. A config
    name that none of the found ConfigMaps defines is an error listing the names they do."""
    found, notes = [], []
    for name in dict.fromkeys(names):
        try:
            cm = kube.read("ConfigMap", name, namespace)
        except NotFound:
            continue
        except BackendError as e:
            notes.append(e.message)
            continue
        text = (cm.get("data") or {}).get("config.yaml")
        if not text:
            continue
        cfg = migparted.parse(load_yaml(text, f"ConfigMap {namespace}/{name} config.yaml"))
        if config in cfg.names:
            return cfg, None
        found.append((name, cfg))
    if found:
        raise SpecError(
            f"no MIG config {config!r} in ConfigMap "
            + ", ".join(f"{namespace}/{n}" for n, _ in found),
            hint="configs: " + ", ".join(c for _, cfg in found for c in cfg.names),
        )
    return None, "; ".join(notes) or (
        f"no mig-parted ConfigMap found in {namespace} ({', '.join(dict.fromkeys(names))})"
    )
