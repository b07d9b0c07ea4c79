"""MIG on this node: read every GPU's state through the NVML adapter, plan with the core,
apply the plan step by step.

Nothing is applied while any step is blocked (processes in the way). Each step is one NVML
call (a new instance is two: its GPU instance, then its compute instance); if one fails,
the steps done so far stay done, the error says which step failed, and re-running the
same command plans again from the real state and completes the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.gpus.geometry import known_model
from gpuctl.mig.diff import Desired, GpuPlan, GpuState, Step, describe_process, diff


def read_gpu(nvml, index: int) -> GpuState:
    current, pending = nvml.mig_mode(index)
    name = nvml.gpu_name(index)
    mig = None if current is None else (bool(current), bool(pending))
    return GpuState(
        index=index,
        name=name,
        uuid=nvml.gpu_uuid(index),
        model=known_model(name),
        mig=mig,
        instances=list(nvml.gpu_instances(index)) if mig else [],
        processes=list(nvml.processes(index)),
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
    from gpuctl.mig import migparted

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
    done = 0
    while steps:
        step = steps.pop(0)
        try:
            _run(nvml, step, allow_reset, report)
        except Halted:
            raise
        except GpuctlError as e:
            raise Halted(
                f"GPU {index}: step {done + 1} of {len(plan.steps)} failed ({step.text}): "
                f"{e.message}",
                hint=(e.hint + "; " if e.hint else "")
                + "`gpuctl mig show` shows the state now; run the same command again to finish",
            ) from None
        done += 1
        if step.kind == "set-mig-mode":
            current, pending = nvml.mig_mode(index)
            if bool(current) != step.enable:
                # The new mode waits for a GPU reset (always so on some drivers and on the
                # simulated node); instances can only be made after it.
                _reset(nvml, index, allow_reset, report, why="to activate the new MIG mode")


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
        if step.profile_id is None:
            raise GpuctlError(
                f"the NVML profile id of this profile on GPU {i} is not known "
                "to gpuctl (unconfirmed in its geometry table)"
            )
        gi = nvml.create_gpu_instance(i, step.profile_id, step.start)
        nvml.create_compute_instance(i, gi, step.ci_profile_id)
    else:  # pragma: no cover
        raise AssertionError(step.kind)
    report(step.text)
