"""MIG on a cluster through the GPU Operator: its node labels, the nodes asked about, and
the plan of `gpuctl mig configure --node/--selector` (one label patch per node, with the
value it replaces so that undoing restores it). Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuctl.common.errors import SpecError
from gpuctl.common.plan import Step
from gpuctl.gpus.geometry import GpuModel
from gpuctl.k8s.nodes import GFD_COUNT, MIG_CONFIG
from gpuctl.mig.core import migparted
from gpuctl.mig.core.diff import GpuState

CONFIG_LABEL = MIG_CONFIG  # the GPU Operator's MIG manager applies the config it names
STATE_LABEL = "nvidia.com/mig.config.state"
COUNT_LABEL = GFD_COUNT
# The operator's shipped config, then the usual name of a custom one.
OPERATOR_CONFIGMAP = "default-mig-parted-config"


CLUSTER_POLICIES = "/apis/nvidia.com/v1/clusterpolicies"


def mig_configmap(policies: list[dict[str, Any]]) -> str:
    """The ConfigMap the MIG manager reads: the ClusterPolicy's spec.migManager.config.name
    (NVIDIA/gpu-operator api/nvidia/v1 MIGPartedConfigSpec, defaulted to
    default-mig-parted-config), the operator's default without one."""
    for policy in policies:
        config = ((policy.get("spec") or {}).get("migManager") or {}).get("config") or {}
        name = config.get("name")
        if isinstance(name, str) and name:
            return name
    return OPERATOR_CONFIGMAP


@dataclass
class NodeTarget:
    name: str
    config: str | None  # current value of the config label
    state: str | None
    model: GpuModel | None
    gpu_count: int
    gpu_pods: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LabelPlan:
    """Config CONFIG for the nodes TARGETS; NOTES: what checking the config found."""

    targets: tuple[NodeTarget, ...]
    config: str
    notes: tuple[str, ...] = ()

    @property
    def pending(self) -> list[NodeTarget]:
        """The nodes whose label changes."""
        return [t for t in self.targets if t.config != self.config]

    @property
    def empty(self) -> bool:
        """No node's label changes."""
        return not self.pending

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(
            Step(
                "label",
                f"node {t.name}",
                f"{CONFIG_LABEL}: {t.config or '(none)'} -> {self.config}",
                {"node": t.name, "label": CONFIG_LABEL, "from": t.config, "to": self.config},
            )
            for t in self.pending
        )

    def lines(self) -> list[str]:
        lines = [f"note: {n}" for n in self.notes]
        for t in self.targets:
            change = (
                "already set"
                if t.config == self.config
                else f"{t.config or '(none)'} -> {self.config}"
            )
            lines.append(f"node {t.name}: {CONFIG_LABEL}: {change} (state: {t.state or 'none'})")
            if t.gpu_pods:
                lines.append(
                    f"  WARNING: pods using GPUs there will lose them: {', '.join(t.gpu_pods)}"
                )
        return lines

    def to_dict(self, dry_run: bool) -> dict[str, Any]:
        rows = [
            {
                "node": t.name,
                "from": t.config,
                "to": self.config,
                "state": t.state,
                "gpuPods": list(t.gpu_pods),
            }
            for t in self.targets
        ]
        return {"nodes": rows, "dryRun": dry_run}


def check_config(cfg: migparted.MigConfigFile, config: str, nodes: list[NodeTarget]) -> list[str]:
    """Where a node's GPU model is known from its labels, check the config's layouts on it.
    Refuses a file with any config mig-parted refuses: mig-manager reads the whole file, so
    then it can use none of them. Returns notes: names that only some drivers use."""
    entries = cfg.select(config)
    for name, problem in cfg.problems.items():
        raise SpecError(
            f"{problem.message} (config {name!r}): mig-parted refuses the whole file for it, "
            f"so mig-manager cannot apply {config!r} either",
            hint="fix or remove that config in the ConfigMap",
        )
    notes = []
    for t in nodes:
        if t.model is None:
            continue
        gpus = [
            GpuState(i, t.model.nvml_name, "", t.model, (True, True))
            for i in range(max(t.gpu_count, 1))
        ]
        desired = migparted.resolve(cfg, entries, gpus)
        if all(d is None for d in desired.values()):
            raise SpecError(
                f"config {config!r} has no entry for node {t.name}'s GPUs "
                f"({t.model.short_name}): its device-filters name other GPUs, so mig-manager "
                "would leave the node as it is and report success",
                hint=f"choose a config written for the {t.model.short_name}, or add an "
                "entry without a device-filter",
            )
        for alias, name in migparted.aliases_used(entries, t.model):
            notes.append(
                f"node {t.name}: {alias} is what an earlier {t.model.short_name} driver called "
                f"{name}; mig-manager resolves names on the GPU, so this config works only "
                "where the driver still uses that name"
            )
    return list(dict.fromkeys(notes))
