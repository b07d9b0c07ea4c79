"""The GPU Operator's MIG manager, simulated for `gpuctl sandbox`: it reads its ConfigMap
(default-mig-parted-config, the one the GPU Operator ships: crds/gpu-operator_0400_configmap.yaml,
NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml, served in gpu-operator),
and on a node whose `nvidia.com/mig.config` label changes it sets
`nvidia.com/mig.config.state` to pending, applies the named config a little later and sets
success; or failed when the config is not in the ConfigMap or a pod holds a GPU whose
layout would change (MIG changes need idle GPUs). Applying rewrites what GPU Feature
Discovery labels and the device plugin advertises (gpuctl.sim.cluster.describe).
Configs are read as mig-parted reads them (gpuctl.mig.core.migparted)."""

from __future__ import annotations

import functools
import pathlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpuctl.common.errors import GpuctlError
from gpuctl.gpus import geometry
from gpuctl.sim import cluster

CONFIGMAP = "default-mig-parted-config"
NAMESPACE = "gpu-operator"
SHIPPED = pathlib.Path(__file__).parent / "crds" / "gpu-operator_0400_configmap.yaml"
CONFIG_LABEL, STATE_LABEL = "nvidia.com/mig.config", "nvidia.com/mig.config.state"
APPLY_S = 2.0  # from pending to applied (a real manager takes tens of seconds)


def configmap() -> dict:
    """The GPU Operator's ConfigMap, in the namespace it runs in."""
    import yaml

    cm = yaml.safe_load(SHIPPED.read_text())
    cm["metadata"]["namespace"] = NAMESPACE
    return dict(cm)


def layouts_in(text: str) -> cluster.Layouts:
    """The layouts of a mig-parted config file's configs, as mig-parted would apply them."""
    from gpuctl.common.specfile import load_yaml
    from gpuctl.mig.core import migparted
    from gpuctl.mig.core.diff import GpuState

    configs = migparted.parse(load_yaml(text, CONFIGMAP))

    def layouts(name: str, model: geometry.GpuModel, count: int) -> list[cluster.GpuLayout] | None:
        gpus = [GpuState(i, model.nvml_name, "", model, (False, False)) for i in range(count)]
        try:
            desired = migparted.resolve(configs, configs.select(name), gpus)
        except GpuctlError:
            return None
        if any(d is None for d in desired.values()):
            return None
        return [
            cluster.GpuLayout(True, tuple(sorted(d.layout.items())))
            if d is not None and d.enabled
            else cluster.WHOLE
            for d in desired.values()
        ]

    return layouts


@functools.cache
def shipped_layouts() -> cluster.Layouts:
    return layouts_in(configmap()["data"]["config.yaml"])


@dataclass
class NodeGpus:
    """A node's physical GPUs as the simulation keeps them."""

    model: geometry.GpuModel
    strategy: str | None  # cluster.SINGLE, cluster.MIXED; None: MIG not managed
    layouts: list[cluster.GpuLayout]
    config: str | None  # the config applied last

    def devices(self) -> list[cluster.Device]:
        return cluster.devices(self.layouts, self.strategy)


def hardware(node: dict, layouts: cluster.Layouts) -> NodeGpus | None:
    """The GPUs of a node the sandbox made (None for a node without GPUs)."""
    from gpuctl.k8s.nodes import gpus_of

    labels = (node.get("metadata") or {}).get("labels") or {}
    found = gpus_of(node)
    model = geometry.known_model(found.model or "") if found else None
    if model is None:
        return None
    strategy = labels.get("nvidia.com/mig.strategy")
    config = labels.get(CONFIG_LABEL) if strategy else None
    first = layouts(config, model, cluster.GPUS_PER_NODE) if config else None
    return NodeGpus(model, strategy, first or [cluster.WHOLE] * cluster.GPUS_PER_NODE, config)


class MigManager:
    """One tick at a time: notices changed labels, applies them APPLY_S later."""

    def __init__(self, api, gpus: dict[str, NodeGpus], log: Callable[[str], None] = print):
        self.api, self.gpus, self.log = api, gpus, log
        self.pending: dict[str, tuple[str, float]] = {}  # node -> (config asked, since)

    def step(self, nodes: list[dict], held: Callable[[str], set[int]]) -> None:
        """HELD(node): the GPUs pods hold there."""
        for node in nodes:
            name = node["metadata"]["name"]
            hw = self.gpus.get(name)
            asked = (node["metadata"].get("labels") or {}).get(CONFIG_LABEL)
            if hw is None or hw.strategy is None or asked is None:
                continue
            if asked == hw.config and name not in self.pending:
                continue
            if self.pending.get(name, ("", 0.0))[0] != asked:
                self.pending[name] = (asked, time.time())
                self._label(name, {STATE_LABEL: "pending"})
            elif time.time() - self.pending[name][1] >= APPLY_S:
                del self.pending[name]
                self._apply(name, hw, asked, held(name))

    def _apply(self, name: str, hw: NodeGpus, config: str, held: set[int]) -> None:
        hw.config = config
        cm = self.api.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}")
        text = (cm.get("data") or {}).get("config.yaml") or ""
        try:
            wanted = layouts_in(text)(config, hw.model, len(hw.layouts)) if text else None
        except GpuctlError:
            wanted = None
        if wanted is None:
            self.log(f"MIG manager: {name}: no usable config {config!r} in {CONFIGMAP}")
            self._label(name, {STATE_LABEL: "failed"})
            return
        busy = sorted(g for g in held if wanted[g] != hw.layouts[g])
        if busy:
            self.log(f"MIG manager: {name}: GPUs {busy} are in use; {config} not applied")
            self._label(name, {STATE_LABEL: "failed"})
            return
        hw.layouts = wanted
        labels, resources = cluster.describe(hw.model, wanted, hw.strategy)
        node = self.api.get(f"/api/v1/nodes/{name}")
        capacity = (node.get("status") or {}).get("capacity") or {}
        gone = {k: None for k in capacity if k.startswith(cluster.GPU) or "nvidia.com/mig-" in k}
        status = {**gone, **resources}
        self.api.patch(f"/api/v1/nodes/{name}/status", {"status": {"capacity": status}})
        self.api.patch(f"/api/v1/nodes/{name}/status", {"status": {"allocatable": status}})
        self._label(name, {**labels, STATE_LABEL: "success"})
        self.log(f"MIG manager: {name}: applied {config}")

    def _label(self, name: str, labels: dict) -> None:
        self.api.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": labels}})
