"""MIG on this node: read every GPU's state through the NVML adapter, plan with the core,
check the plan against what the driver offers, apply it step by step.

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
            _check_creates(nvml, p.state, creates, mig_on=bool(p.state.mig and p.state.mig[0]))


def _check_creates(nvml, state: GpuState, creates: list[Step], mig_on: bool = True) -> None:
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


class ResetNeeded(Halted):
    """A MIG mode change waits for a GPU reset that was not allowed (no --reset)."""


def apply(
    nvml,
    plans: list[GpuPlan],
    *,
    allow_reset: bool,
    report: Callable[[str], None] = lambda line: None,
) -> None:
    blocked = [b for p in plans for b in p.blocked]
    if blocked:
        raise GpuctlError(
            "refusing to change MIG: " + " | ".join(blocked),
            hint="stop those processes (or choose a layout that keeps their "
            "instances), then run the same command again",
        )
    waiting = []
    for p in plans:
        if p.steps:
            try:
                _apply_gpu(nvml, p, allow_reset, report)
            except ResetNeeded:
                waiting.append(p.state.index)  # the other GPUs can still go ahead
    if waiting:
        gpus = ", ".join(map(str, waiting))
        raise ResetNeeded(
            f"GPU {gpus}: the MIG mode change is pending a GPU reset",
            hint=f"when nothing runs on GPU {gpus}, run the same command with "
            "--reset (or reboot the node), then it continues",
        )


def _apply_gpu(nvml, plan: GpuPlan, allow_reset: bool, report) -> None:
    index = plan.state.index
    steps = list(plan.steps)
    creates = [s for s in steps if s.kind == "create"]
    checked = bool(plan.state.mig and plan.state.mig[0])  # else: once MIG is on
    done = 0
    while steps:
        step = steps.pop(0)
        try:
            if step.kind == "create" and not checked:
                _check_creates(nvml, plan.state, creates)
                checked = True
            _run(nvml, step, allow_reset, report)
        except Halted:
            raise
        except GpuctlError as e:
            raise Halted(
                f"GPU {index}: step {done + 1} of {len(plan.steps)} failed ({step.text}): "
                f"{e.message}",
                hint=_after_failure(e, index),
            ) from None
        done += 1
        if step.kind == "set-mig-mode":
            current, pending = nvml.mig_mode(index)
            if bool(current) != step.enable:
                # The new mode waits for a GPU reset (always so on some drivers and on the
                # simulated node); instances can only be made after it.
                _reset(nvml, index, allow_reset, report, why="to activate the new MIG mode")


def _after_failure(e: GpuctlError, index: int) -> str:
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


def _reset(nvml, index: int, allow_reset: bool, report, why: str) -> None:
    if not allow_reset:
        raise ResetNeeded(f"GPU {index}: the MIG mode change is pending a GPU reset")
    busy = nvml.processes(index)
    if busy:
        raise Halted(
            f"GPU {index}: cannot reset {why} while processes run on it: "
            + "; ".join(describe_process(p) for p in busy)
        )
    nvml.reset_gpu(index)
    report(f"GPU {index}: reset {why}")


def _run(nvml, step: Step, allow_reset: bool, report) -> None:
    i = step.gpu
    if step.kind == "set-mig-mode":
        nvml.set_mig_mode(i, step.enable)
    elif step.kind == "reset":
        _reset(nvml, i, allow_reset, report, why="to apply the pending MIG mode")
        return
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
    report(step.text)
