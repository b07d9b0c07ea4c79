"""What the reading commands of `gpuctl mig` answer, as data (the rows -o json|yaml prints
and the tables show): a model's profiles, a demand's plan, a layout's fit, a node's state
(through NVML, or a cluster node's from its labels and resources), whether a config holds
on the node. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuctl.common.errors import GpuctlError
from gpuctl.gpus.geometry import GpuModel
from gpuctl.gpus.mig_demand import DemandPlan, Fleet
from gpuctl.gpus.mig_layout import Placed, devices_of, place
from gpuctl.gpus.resources import requested
from gpuctl.k8s.nodes import GPU, gpus_of
from gpuctl.k8s.objects import labels_of, name_of
from gpuctl.mig.core.diff import GpuPlan, GpuState
from gpuctl.mig.core.rebalance_read import profile_of_resource, strategy_of


def profile_rows(models: Iterable[GpuModel]) -> list[dict[str, Any]]:
    return [
        {
            "gpu": m.short_name,
            "profile": p.name,
            "profile_id": p.profile_id,
            "compute_slices": p.slices,
            "memory_slices": p.size,
            "memory_mib": p.memory_mib,
            "sm_count": p.sm_count,
            "max_instances": p.max_instances,
            "placements": [{"start": s, "size": p.size} for s in p.starts],
            "resource": p.resource_name,
        }
        for m in models
        for p in m.profiles
    ]


def _placements(placed: Iterable[Placed]) -> list[dict[str, Any]]:
    return [{"profile": p.profile.name, "start": p.start, "size": p.profile.size} for p in placed]


def demand_data(result: DemandPlan) -> dict[str, Any]:
    return {
        "demand": result.demand,
        "gpus": result.gpus,
        "optimal": result.optimal,
        "lower_bound": result.lower_bound,
        "layouts": [
            {
                "gpu": g.model.short_name,
                "count": g.gpus,
                "layout": g.layout,
                "placements": _placements(g.placements),
                "free_memory_slices": g.free_slices,
            }
            for g in result.groups
        ],
    }


def layout_fits(fleet: Sequence[Fleet], counts: dict[str, int]) -> list[dict[str, Any]]:
    """Where one GPU of each model places the layout COUNTS (LayoutError: it cannot)."""
    return [
        {
            "gpu": f.model.short_name,
            "placements": _placements(place(f.model, devices_of(f.model, counts))),
        }
        for f in fleet
    ]


def state_data(g: GpuState) -> dict[str, Any]:
    """One GPU as `mig show` gives it: MIG mode, layout, instances and their processes."""
    by_gi: dict[int | None, list[Any]] = {}
    for p in g.processes:
        by_gi.setdefault(p.gi_id, []).append(p)
    instances = []
    for inst in g.instances:
        prof = g.profile_of(inst)
        instances.append(
            {
                "gi_id": inst.gi_id,
                "profile": prof.name if prof else None,
                "profile_id": inst.profile_id,
                "start": inst.start,
                "size": inst.size,
                "memory_mib": prof.memory_mib if prof else None,
                "compute_instances": [
                    {"ci_id": c.ci_id, "profile_id": c.profile_id} for c in inst.compute_instances
                ],
                "processes": [_process(p) for p in by_gi.get(inst.gi_id, [])],
            }
        )
    return {
        "index": g.index,
        "name": g.name,
        "uuid": g.uuid,
        "model": g.model.short_name if g.model else None,
        "mig": None if g.mig is None else {"current": g.mig[0], "pending": g.mig[1]},
        "layout": g.layout() if g.mig and g.mig[0] else {},
        "instances": instances,
        "processes": [_process(p) for p in g.processes if p.gi_id is None],
    }


def cluster_node(node: dict[str, Any], pods: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A cluster node's MIG as its labels and resources tell it (GPU Feature Discovery, the
    device plugin, the GPU Operator's mig-manager): the config asked and its state, and per
    GPU resource the MIG profile it counts, how many the plugin advertises, and how many
    the node's unfinished PODS hold. NVML's view (instances, processes) is on the node."""
    g = gpus_of(node)
    rows = []
    for resource in sorted(set(g.capacity) | set(g.allocatable)):
        profile = profile_of_resource(resource)
        if resource == GPU and strategy_of(labels_of(node), g) == "single":
            profile = g.single_profile
        rows.append(
            {
                "resource": resource,
                "profile": profile,  # None: whole GPUs (or a profile the labels do not name)
                "capacity": g.capacity.get(resource, 0),
                "allocatable": g.allocatable.get(resource, 0),
                "in_use": sum(requested(p, resource) for p in pods),
            }
        )
    return {
        "node": name_of(node),
        "model": g.model,
        "gpus": g.count,
        "mig_strategy": strategy_of(labels_of(node), g),  # GFD's label, else the resources'
        "mig_config": g.mig_config,
        "mig_config_state": g.mig_state,
        "resources": rows,
    }


def _process(p: Any) -> dict[str, Any]:
    return {
        "pid": p.pid,
        "name": p.name,
        "user": p.user,
        "used_memory_mib": p.used_memory_mib,
        "gi_id": p.gi_id,
        "ci_id": p.ci_id,
    }


@dataclass(frozen=True)
class Assessment:
    """Whether a config holds on the GPUs asked about (PLANS), as mig-parted's assert."""

    plans: tuple[GpuPlan, ...]

    @property
    def holds(self) -> bool:
        return all(p.holds for p in self.plans)

    def to_dict(self) -> dict[str, Any]:
        gpus = [
            {"gpu": p.state.label, "index": p.state.index, "difference": difference(p)}
            for p in self.plans
        ]
        return {"applied": self.holds, "gpus": gpus}

    def error(self) -> GpuctlError:
        differ = [f"{p.state.label}: {d}" for p in self.plans if (d := difference(p))]
        return GpuctlError(
            "the selected MIG configuration is not applied: " + "; ".join(differ),
            hint="see the steps with `gpuctl mig configure … --dry-run`"
            if any(p.steps for p in self.plans)
            else "mig-parted's assert fails on such a node too: give every GPU an entry that "
            "holds on it (e.g. its device-filter with mig-enabled: false)",
        )


def assess(plans: Iterable[GpuPlan], indexes: Sequence[int] | None) -> Assessment:
    """As mig-parted's assert: every GPU of the node must match an entry and be as it says
    (with INDEXES, the GPUs not named are not asked about)."""
    return Assessment(tuple(p for p in plans if indexes is None or p.state.index in indexes))


def difference(p: GpuPlan) -> str | None:
    """What keeps the config from holding on this GPU (None: it holds)."""
    if p.desired is None:
        return "matched by no entry of the config"
    if p.desired.skipped:
        return "no MIG, but the config enables MIG on it"
    if p.steps:
        return f"{len(p.steps)} step(s) needed"
    return None
