"""Current MIG state of a GPU vs the desired one → the fewest steps between them.

Instances that already match stay untouched (running work keeps running); a GPU instance
left without its compute instance by an interrupted run is completed, not recreated.
Steps that would destroy an instance with processes, or change the MIG mode of (or reset)
a GPU with processes, are *blocked*, naming the processes; nothing is applied then.

The state records are duck-typed on the NVML adapter's: instances have ``gi_id``,
``profile_id``, ``start``, ``size`` and ``compute_instances`` (``ci_id``, ``profile_id``);
processes have ``pid``, ``name``, ``user``, ``used_memory_mib``, ``gi_id``, ``ci_id``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.gpus.geometry import CI_PROFILE_SLICES, GpuModel, Profile
from gpuctl.gpus.mig_layout import (
    Device,
    LayoutError,
    Placed,
    devices_of,
    place,
    slice_range,
)


@dataclass
class GpuState:
    index: int
    name: str
    uuid: str
    model: GpuModel | None  # None: not in gpuctl's geometry table
    mig: tuple[bool, bool] | None  # (current, pending); None: the GPU has no MIG
    instances: list[Any] = field(default_factory=list)
    processes: list[Any] = field(default_factory=list)
    pci_id: int | None = None  # device << 16 | vendor, e.g. 0x233010DE; None if not read
    pci_subsystem_id: int | None = None

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.model.short_name if self.model else self.name})"

    def profile_of(self, inst: Any) -> Profile | None:
        """The profile of an instance: by the NVML constant it was listed under (the id a
        driver gives a profile differs between models), else by the table's id."""
        if self.model is None:
            return None
        index = getattr(inst, "profile_index", None)
        if index is not None:
            return self.model.profile_by_index(index)
        return self.model.profile_by_id(inst.profile_id)

    def layout(self) -> dict[str, int]:
        """The current layout as mig-parted names: a GI with one whole-GI compute instance (or
        none yet) is its profile (``3g.40gb``); smaller compute instances count one each
        (``1c.3g.40gb``), as mig-parted counts them."""
        out: Counter[str] = Counter()
        for inst in self.instances:
            p = self.profile_of(inst)
            name = p.name if p else f"profile-{inst.profile_id}"
            cis = list(inst.compute_instances)
            if not cis or p is None:
                out[name] += 1
                continue
            for ci in cis:
                slices = ci_slices(ci.profile_id)
                out[name if slices in (None, p.slices) else f"{slices}c.{name}"] += 1
        return dict(sorted(out.items(), key=lambda kv: _sort_key(kv[0])))


def ci_slices(ci_profile_id: int) -> int | None:
    return CI_PROFILE_SLICES.get(ci_profile_id)


def _sort_key(name: str) -> tuple[int, str]:
    g = name.split(".")[-2] if name.count(".") >= 2 else name.split(".")[0]
    try:
        return (-int(g.rstrip("g")), name)
    except ValueError:
        return (0, name)


@dataclass(frozen=True)
class Desired:
    """What one GPU should look like. ``source`` says where that was asked (file:line);
    ``notes`` are remarks for the plan; ``skipped`` says why the GPU is left as it is although
    an entry names it (a GPU without MIG under ``devices: all``, as mig-parted's apply skips
    it; its assert fails on such a GPU, and so does gpuctl's)."""

    enabled: bool
    layout: Mapping[str, int]
    source: str = ""
    notes: tuple[str, ...] = ()
    skipped: str | None = None


@dataclass(frozen=True)
class Step:
    kind: str  # set-mig-mode | reset | destroy-ci | destroy-gi | create-ci | create
    gpu: int
    text: str
    why: str = ""
    gi_id: int | None = None
    ci_id: int | None = None
    profile: Profile | None = None  # of a new GPU instance
    start: int | None = None
    ci_profile_id: int | None = None
    enable: bool | None = None


@dataclass
class GpuPlan:
    state: GpuState
    desired: Desired | None  # None: the config does not touch this GPU
    steps: list[Step] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    @property
    def applied(self) -> bool:
        return self.desired is None or not self.steps

    @property
    def holds(self) -> bool:
        """Whether the GPU is as the config asks (what `assert` checks): false for a GPU no
        entry matches and for one the config skips, as in mig-parted."""
        return self.desired is not None and self.desired.skipped is None and not self.steps


def describe_process(p: Any) -> str:
    mem = f", {p.used_memory_mib} MiB" if getattr(p, "used_memory_mib", None) is not None else ""
    user = f"user {p.user}" if getattr(p, "user", None) else "user ?"
    return f"pid {p.pid} {p.name or '?'} ({user}{mem})"


def diff(state: GpuState, desired: Desired | None) -> GpuPlan:
    plan = GpuPlan(state, desired)
    if desired is None or desired.skipped:
        return plan
    if state.mig is None:
        if desired.enabled:
            raise UsageError(f"GPU {state.index} ({state.name}) does not support MIG")
        return plan
    current, pending = state.mig
    busy_gpu = [describe_process(p) for p in state.processes]

    def gpu_step(kind: str, text: str, why: str, enable: bool | None = None) -> None:
        plan.steps.append(Step(kind, state.index, text, why, enable=enable))
        if busy_gpu:
            plan.blocked.append(
                f"{state.label}: cannot {text.split(' on GPU')[0]} while "
                f"processes run on it: {'; '.join(busy_gpu)}"
            )

    if not desired.enabled:
        if current:
            for inst in state.instances:
                _destroy_instance(plan, inst, "MIG goes off on this GPU")
            if pending:
                gpu_step(
                    "set-mig-mode",
                    f"disable MIG mode on GPU {state.index}",
                    "the config turns MIG off",
                    enable=False,
                )
            else:
                gpu_step(
                    "reset",
                    f"reset GPU {state.index} to apply the pending MIG disable",
                    _RESET_WHY,
                )
        elif pending:
            gpu_step(
                "set-mig-mode",
                f"cancel the pending MIG enable on GPU {state.index}",
                "the config keeps MIG off",
                enable=False,
            )
        return plan

    model = state.model
    if model is None:
        raise GpuctlError(
            f"GPU {state.index} is a {state.name!r}, which is not in gpuctl's MIG "
            "geometry table, so its layouts cannot be checked"
        )
    try:
        wanted = devices_of(model, desired.layout)
        place(model, wanted)
    except LayoutError as e:
        raise LayoutError(f"{state.label}: {e.message}", hint=e.hint) from None
    if not current:
        if pending:
            gpu_step(
                "reset", f"reset GPU {state.index} to apply the pending MIG enable", _RESET_WHY
            )
        else:
            gpu_step(
                "set-mig-mode",
                f"enable MIG mode on GPU {state.index}",
                "the layout needs MIG on",
                enable=True,
            )
        for p in place(model, wanted):
            _create(plan, p)
        return plan
    if not pending:
        gpu_step(
            "set-mig-mode",
            f"cancel the pending MIG disable on GPU {state.index}",
            "the layout keeps MIG on",
            enable=True,
        )
    _diff_instances(plan, model, wanted)
    return plan


_RESET_WHY = "a MIG mode change takes effect after a GPU reset"


def _busy(state: GpuState, gi_id: int, ci_id: int | None = None) -> list[str]:
    return [
        describe_process(p)
        for p in state.processes
        if p.gi_id == gi_id and (ci_id is None or p.ci_id == ci_id)
    ]


def _inst_text(state: GpuState, inst: Any) -> str:
    p = state.profile_of(inst)
    name = p.name if p else f"profile {inst.profile_id}"
    return f"{name} (GI {inst.gi_id}, slices {slice_range(inst.start, inst.size)})"


def _destroy_instance(plan: GpuPlan, inst: Any, why: str) -> None:
    state = plan.state
    busy = _busy(state, inst.gi_id)
    what = _inst_text(state, inst)
    if busy:
        plan.blocked.append(
            f"{state.label}: instance {what} would be destroyed but runs " + "; ".join(busy)
        )
    for ci in inst.compute_instances:
        plan.steps.append(
            Step(
                "destroy-ci",
                state.index,
                f"destroy compute instance {ci.ci_id} of {what}",
                why,
                gi_id=inst.gi_id,
                ci_id=ci.ci_id,
            )
        )
    plan.steps.append(Step("destroy-gi", state.index, f"destroy {what}", why, gi_id=inst.gi_id))


def _create(plan: GpuPlan, p: Placed) -> None:
    d = p.device
    plan.steps.append(
        Step(
            "create",
            plan.state.index,
            f"create {d.name} at slices {p.slices_text()}",
            "the layout wants it",
            profile=d.profile,
            start=p.start,
            ci_profile_id=d.ci_profile_id,
        )
    )


def _exact(inst: Any, device: Device) -> bool:
    """One compute instance of the wanted size: in a 1g REV2 GPU instance that is either
    compute-instance profile (1_SLICE as mig-parted makes it, 1_SLICE_REV1 as nvidia-smi -C)."""
    cis = list(inst.compute_instances)
    return len(cis) == 1 and ci_slices(cis[0].profile_id) == device.ci_slices


def _diff_instances(plan: GpuPlan, model: GpuModel, wanted: list[Device]) -> None:
    state = plan.state
    # keyed by Profile | None: profile_of() is None for an instance of an unknown profile
    wanted_by_profile: Counter[Profile | None] = Counter(d.profile for d in wanted)
    usable = [
        i
        for i in state.instances
        if (p := state.profile_of(i)) is not None
        and p in wanted_by_profile
        and i.start in p.starts
        and i.size == p.size
    ]

    def score(subset: tuple[Any, ...]) -> tuple[int, int, int]:
        busy = sum(1 for i in subset if _busy(state, i.gi_id))
        exact = sum(
            1
            for i in subset
            if any(_exact(i, d) for d in wanted if d.profile == state.profile_of(i))
        )
        return (busy, len(subset), exact)

    candidates: list[tuple[Any, ...]] = []
    for n in range(len(usable), -1, -1):
        for subset in itertools.combinations(usable, n):
            counts = Counter(state.profile_of(i) for i in subset)
            if all(c <= wanted_by_profile[p] for p, c in counts.items()):
                candidates.append(subset)
    candidates.sort(key=score, reverse=True)
    for subset in candidates:
        kept = _assign(state, subset, wanted)
        rest = list(wanted)
        for _, d in kept:
            rest.remove(d)
        fixed = [Placed(d, i.start) for i, d in kept]
        try:
            new = place(model, rest, fixed)
        except LayoutError:
            continue
        break
    else:  # pragma: no cover - the empty subset always places (the layout was validated)
        raise LayoutError(f"{state.label}: no placement found")
    kept_ids = {i.gi_id for i, _ in kept}
    for inst in state.instances:
        if inst.gi_id not in kept_ids:
            _destroy_instance(plan, inst, "no room for it in the layout")
    for inst, device in kept:
        what = _inst_text(state, inst)
        if _exact(inst, device):
            plan.kept.append(
                f"{device.name} (GI {inst.gi_id}, slices {slice_range(inst.start, inst.size)})"
            )
            continue
        for ci in inst.compute_instances:
            busy = _busy(state, inst.gi_id, ci.ci_id)
            if busy:
                plan.blocked.append(
                    f"{state.label}: compute instance {ci.ci_id} of {what} would "
                    "be destroyed but runs " + "; ".join(busy)
                )
            plan.steps.append(
                Step(
                    "destroy-ci",
                    state.index,
                    f"destroy compute instance {ci.ci_id} of {what}",
                    f"the GPU instance stays, as a {device.name}",
                    gi_id=inst.gi_id,
                    ci_id=ci.ci_id,
                )
            )
        plan.steps.append(
            Step(
                "create-ci",
                state.index,
                f"create the {device.name} compute instance in {what}",
                "the GPU instance stays; it lacks the compute instance the layout wants",
                gi_id=inst.gi_id,
                ci_profile_id=device.ci_profile_id,
            )
        )
    for placed in new:
        if placed not in fixed:
            _create(plan, placed)


def _assign(
    state: GpuState, subset: tuple[Any, ...], wanted: list[Device]
) -> list[tuple[Any, Device]]:
    """(kept GI, the wanted device it will serve), exact compute-instance matches first."""
    free = list(wanted)
    out = []
    ordered = sorted(
        subset,
        key=lambda i: not any(_exact(i, d) for d in free if d.profile == state.profile_of(i)),
    )
    for inst in ordered:
        p = state.profile_of(inst)
        match = next((d for d in free if d.profile == p and _exact(inst, d)), None)
        match = match or next(d for d in free if d.profile == p)
        free.remove(match)
        out.append((inst, match))
    return out
