"""MIG on this node: read every GPU's state through the NVML adapter, plan with the core,
check the plan against what the driver offers, and the NVML verbs of each step (the
service hands them to the executor in the plan's order).

Nothing is applied while any step is blocked (processes in the way), and nothing while a
step could not be carried out: before the first change (and in a dry run) each new GPU
instance is looked up on its GPU by NVML profile constant, as mig-parted does, and its
placement checked against the driver's. Each step is one NVML call (a new instance is two:
its GPU instance, then its compute instance); if one still fails, the steps done so far stay
done and the error says which step failed and whether running the command again can finish.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.gpus.geometry import known_model, model_by_pci_id
from gpuctl.gpus.mig_layout import LayoutError, slice_range
from gpuctl.mig.core.diff import Desired, GpuPlan, GpuState, Step, describe_process, diff


def read_gpu(nvml, index: int) -> GpuState:
    current, pending = nvml.mig_mode(index)
    name = nvml.gpu_name(index)
    pci_id, subsystem = nvml.pci_ids(index)
    mig = None if current is None else (bool(current), bool(pending))
    # By PCI id first: an H100 PCIe or H800 has the H100 80GB's geometry under another name.
    model = (model_by_pci_id(pci_id) if pci_id is not None else None) or known_model(name)
    return GpuState(
        index=index,
        name=name,
        uuid=nvml.gpu_uuid(index),
        model=model,
        mig=mig,
        instances=list(nvml.gpu_instances(index)) if mig else [],
        processes=list(nvml.processes(index)),
        pci_id=pci_id,
        pci_subsystem_id=subsystem,
    )


def read_node(nvml) -> list[GpuState]:
    return [read_gpu(nvml, i) for i in range(nvml.gpu_count())]


def desired(
    gpus: list[GpuState],
    file: str | None,
    config: str | None,
    layout: str | None,
    indexes: list[int] | None,
) -> dict[int, Desired | None]:
    """What each GPU should hold: config `config` of a mig-parted file, or a --layout
    shorthand (on the GPUs `indexes`, default all); `-c all-…` alone is a shorthand too."""
    from gpuctl.mig.core import migparted

    if file:
        if layout:
            raise UsageError("give either -f/-c or --layout, not both")
        if indexes is not None:
            raise UsageError("--gpus goes with --layout; in a config file use 'devices'")
        cfg = migparted.load(file)
        return migparted.resolve(cfg, cfg.select(config), gpus)
    if config and not layout and config.startswith("all-"):
        layout = config
    if not layout:
        raise UsageError(
            "say what to apply: -f config.yaml -c NAME, or --layout 3g.40gb=2 "
            "(or all-1g.10gb, all-disabled)"
        )
    return migparted.resolve_shorthand(layout, indexes, gpus)


def plan(gpus: list[GpuState], desired: Mapping[int, Desired | None]) -> list[GpuPlan]:
    return [diff(g, desired.get(g.index)) for g in gpus]


def check_steps(nvml, plans: list[GpuPlan]) -> None:
    """Refuse (LayoutError, exit 2) a plan whose new GPU instances the driver cannot make:
    a profile this GPU does not offer, or a placement it does not allow. A driver may list no
    profiles while MIG is off; such a GPU is asked again by `apply` once MIG is on, before
    any instance is made."""
    for p in plans:
        creates = [s for s in p.steps if s.kind == "create"]
        if creates:
            check_creates(nvml, p.state, creates, mig_on=bool(p.state.mig and p.state.mig[0]))


def check_creates(nvml, state: GpuState, creates: list[Step], mig_on: bool = True) -> None:
    for step in creates:
        profile = step.profile
        assert profile is not None and step.start is not None  # set on every create step
        offered = nvml.gi_profile(state.index, profile.index)
        if offered is None and not mig_on:
            continue  # not known before MIG is on: asked again then
        if offered is None:
            raise LayoutError(
                f"{state.label}: the driver offers no {profile.name} on this GPU "
                f"(NVML GPU-instance profile constant {profile.index} is not supported)",
                hint="see `nvidia-smi mig -lgip` for what this GPU and driver offer",
            )
        wanted = (step.start, profile.size)
        if offered.placements is not None and wanted not in offered.placements:
            allowed = ", ".join(slice_range(s, n) for s, n in offered.placements) or "nowhere"
            raise LayoutError(
                f"{state.label}: the driver places {profile.name} at slices {allowed}, "
                f"not at {slice_range(*wanted)} as gpuctl's geometry table has it",
                hint="report this with the output of `nvidia-smi mig -lgipp`",
            )


class Halted(GpuctlError):
    """Applying stopped before the end; the message says where and what to do next."""


def refuse_blocked(plans: list[GpuPlan]) -> None:
    """Nothing is applied while a step would destroy an instance, or change the mode of a
    GPU, with processes on it: the error names them."""
    blocked = [b for p in plans for b in p.blocked]
    if blocked:
        raise GpuctlError(
            "refusing to change MIG: " + " | ".join(blocked),
            hint="stop those processes (or choose a layout that keeps their "
            "instances), then run the same command again",
        )


def mode_active(nvml, index: int, enable: bool | None) -> bool:
    """Whether the MIG mode set is current; else it waits for a GPU reset (always so on some
    drivers and on the simulated node), and instances can only be made after it."""
    current, _ = nvml.mig_mode(index)
    return bool(current) == enable


def after_failure(e: GpuctlError, index: int) -> str:
    """What to do after a failed step: run the command again only where that can finish
    (the driver's refusal can pass: a process, root rights, a reset); else it would stop
    at the same step, so say how to see, and undo, what was done."""
    head = (e.hint + "; ") if e.hint else ""
    if getattr(e, "passes", False):
        return (
            head + "`gpuctl mig show` shows the state now; once that is fixed, run the same "
            "command again to finish"
        )
    return (
        head + "running the same command again would stop at the same step; `gpuctl mig "
        f"show` shows the state now, `gpuctl mig configure --gpus {index} --layout "
        "all-disabled` undoes what was done"
    )


def reset(nvml, index: int, report: Callable[[str], None], why: str) -> None:
    """Reset GPU INDEX (WHY: what for), only when nothing runs on it (a plan that may reset
    a GPU runs only with --reset: gpuctl.mig.service.check_resets)."""
    busy = nvml.processes(index)
    if busy:
        raise Halted(
            f"GPU {index}: cannot reset {why} while processes run on it: "
            + "; ".join(describe_process(p) for p in busy)
        )
    nvml.reset_gpu(index)
    report(f"GPU {index}: reset {why}")


def run_step(nvml, step: Step) -> None:
    """One step: one NVML call (a new instance: two, its GPU instance and its compute
    instance)."""
    i = step.gpu
    if step.kind == "set-mig-mode":
        nvml.set_mig_mode(i, step.enable)
    elif step.kind == "reset":
        reset(nvml, i, lambda line: None, why="to apply the pending MIG mode")
    elif step.kind == "destroy-ci":
        nvml.destroy_compute_instance(i, step.gi_id, step.ci_id)
    elif step.kind == "destroy-gi":
        nvml.destroy_gpu_instance(i, step.gi_id)
    elif step.kind == "create-ci":
        nvml.create_compute_instance(i, step.gi_id, step.ci_profile_id)
    elif step.kind == "create":
        assert step.profile is not None  # set on every create step
        # The id this GPU's driver gives the profile's NVML constant, as mig-parted asks it.
        offered = nvml.gi_profile(i, step.profile.index)
        if offered is None:
            raise GpuctlError(f"GPU {i}: the driver offers no {step.profile.name}")
        gi = nvml.create_gpu_instance(i, offered.id, step.start)
        nvml.create_compute_instance(i, gi, step.ci_profile_id)
    else:  # pragma: no cover
        raise AssertionError(step.kind)
