"""The workflows of `gpuctl mig`: on this node (NVML) read the GPUs, plan with the core,
check the plan, carry its steps out through the executor and verify by reading again; on a
cluster (the GPU Operator) plan the label patches, carry them out, and follow the operator's
state label. The reading commands' answers as data."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from gpuctl.adapters.kube import Kube
from gpuctl.adapters.kube_guarded import Target, field_action
from gpuctl.common.errors import GpuctlError
from gpuctl.common.plan import Step as PlanStep
from gpuctl.gpus.geometry import GpuModel
from gpuctl.k8s.patches import Path
from gpuctl.mig import cluster, node
from gpuctl.mig.core import migparted, report
from gpuctl.mig.core.diff import GpuPlan, GpuState, Step
from gpuctl.mig.core.node_plan import NodePlan, plan_step
from gpuctl.mig.core.operator import CONFIG_LABEL, OPERATOR_CONFIGMAP, LabelPlan, check_config
from gpuctl.runtime.workflow import Action, Progress, Quiet, execute

if TYPE_CHECKING:
    from gpuctl.adapters.nvml import Nvml


def configuring(nvml: Nvml) -> contextlib.AbstractContextManager[None]:
    """Held for a whole `mig configure` of this node (plan, confirm, steps, check): a second
    run is refused, naming the one in progress, instead of interleaving its steps."""
    from gpuctl.runtime.locks import holding

    return holding(_lock_path(nvml), "this node's MIG layout")


def _lock_path(nvml: Nvml) -> str:
    """The driver's own (a simulated node's, beside its state file); else one per machine
    (/run/lock, shared by every user's runs), or the user's cache where there is none."""
    if nvml.driver.lock_path:
        return nvml.driver.lock_path
    if os.path.isdir("/run/lock") and os.access("/run/lock", os.W_OK):
        return "/run/lock/gpuctl-mig-configure.lock"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(cache, "gpuctl", "mig-configure.lock")


def read_node(nvml: Nvml) -> list[GpuState]:
    with nvml:
        return node.read_node(nvml)


# ---------- reading ----------


def node_models(nvml: Nvml) -> tuple[list[GpuModel], list[str]]:
    """The MIG models of this node's GPUs, and the names of those gpuctl does not know."""
    from gpuctl.gpus.geometry import known_model

    with nvml:
        names = [nvml.gpu_name(i) for i in range(nvml.gpu_count())]
    models: list[GpuModel] = []
    unknown = []
    for name in dict.fromkeys(names):
        model = known_model(name)
        if model is None:
            unknown.append(name)
        elif model not in models:
            models.append(model)
    return models, unknown


def show(nvml: Nvml) -> list[dict[str, Any]]:
    return [report.state_data(g) for g in read_node(nvml)]


def export(nvml: Nvml, name: str, configmap: bool) -> dict[str, Any]:
    """The node's layout as a mig-parted config named NAME (in a ConfigMap with CONFIGMAP)."""
    cfg = migparted.export(read_node(nvml), name)
    return migparted.render_configmap(cfg) if configmap else cfg


def assess(
    nvml: Nvml,
    file: str | None,
    config: str | None,
    layout: str | None,
    indexes: list[int] | None,
) -> report.Assessment:
    states = read_node(nvml)
    desired = node.desired(states, file, config, layout, indexes)
    return report.assess(node.plan(states, desired), indexes)


def render_configmap(
    file: str | None,
    config: str | None,
    layout: str | None,
    indexes: list[int] | None,
    name: str,
    namespace: str,
) -> dict[str, Any]:
    data = cluster.config_to_render(file, config, layout, indexes)
    return migparted.render_configmap(data, name, namespace)


# ---------- configure on this node ----------


class NodeProgress(Progress, Protocol):
    def note(self, text: str) -> None:
        """Something done beside the planned steps (a GPU reset the driver asked for)."""


class _Quiet(Quiet):
    def note(self, text: str) -> None:
        pass


def plan_node(
    nvml,
    file: str | None,
    config: str | None,
    layout: str | None,
    indexes: list[int] | None,
) -> NodePlan:
    states = node.read_node(nvml)
    desired = node.desired(states, file, config, layout, indexes)
    return NodePlan(tuple(node.plan(states, desired)), desired, from_file=file is not None)


def check_node(nvml, plan: NodePlan) -> None:
    """Refuse, before anything changes (in a dry run too), a plan with a blocked step or a
    new instance the driver cannot make."""
    node.refuse_blocked(list(plan.gpus))
    node.check_steps(nvml, list(plan.gpus))


def configure_node(
    nvml, plan: NodePlan, *, allow_reset: bool, progress: NodeProgress | None = None
) -> None:
    """Carry out PLAN's steps, GPU by GPU, then read the node again and compare. The steps
    done stay done when one fails (a re-run plans from the state then); the error says which
    step of which GPU failed and whether a re-run can finish."""
    check_node(nvml, plan)
    run = _NodeRun(nvml, plan, allow_reset, progress or _Quiet())

    def verify() -> None:
        if run.waiting:
            gpus = ", ".join(map(str, run.waiting))
            raise node.ResetNeeded(
                f"GPU {gpus}: the MIG mode change is pending a GPU reset",
                hint=f"when nothing runs on GPU {gpus}, run the same command with "
                "--reset (or reboot the node), then it continues",
            )
        after = node.plan(node.read_node(nvml), plan.desired)
        if not all(p.applied for p in after):
            raise GpuctlError(
                "the layout is not fully applied yet",
                hint="see `gpuctl mig show`; run the same command again",
            )

    execute(
        run.actions(),
        progress=run,
        verify=verify,
        left_as="MIG step(s) left done",
        explain=run.explain,
    )


class _NodeRun:
    """The executor's actions for a node plan, and its progress. A GPU whose MIG mode change
    waits for a GPU reset that was not allowed stops there while the other GPUs go on; its
    steps after that are skipped, and not reported as done."""

    def __init__(self, nvml, plan: NodePlan, allow_reset: bool, progress: NodeProgress):
        self._nvml = nvml
        self._plan = plan
        self._allow_reset = allow_reset
        self._progress = progress
        self.waiting: list[int] = []
        # new instances are checked against the driver before the first is made; on a GPU
        # whose MIG was off, the driver may list its profiles only once MIG is on
        self._checked = {p.state.index for p in plan.gpus if p.state.mig and p.state.mig[0]}
        self._texts: dict[int, str] = {}  # what a step is called in an error
        self._did = True
        self._skipped: set[int] = set()  # the steps of a GPU waiting for its reset
        self._notes: list[str] = []  # said after the step they were part of

    def actions(self) -> list[Action]:
        out = []
        for gpu in self._plan.gpus:
            for i, change in enumerate(gpu.steps):
                action = Action(
                    plan_step(change, i, len(gpu.steps)),
                    run=partial(self._run, gpu, change),
                    # the steps done stay done: a re-run plans from the state they left
                    undo=partial(self._left, change),
                    name=f"GPU {change.gpu}: {change.text}",
                )
                self._texts[id(action)] = change.text
                out.append(action)
        return out

    def _left(self, change: Step) -> str | None:
        """What a rollback says of a step: nothing for one skipped (it never happened)."""
        return None if id(change) in self._skipped else "MIG steps are not rolled back"

    def _run(self, gpu: GpuPlan, change: Step) -> None:
        index = gpu.state.index
        self._did = index not in self.waiting
        if not self._did:
            self._skipped.add(id(change))
            return
        try:
            if change.kind == "create" and index not in self._checked:
                creates = [s for s in gpu.steps if s.kind == "create"]
                node.check_creates(self._nvml, gpu.state, creates)
                self._checked.add(index)
            node.run_step(self._nvml, change, self._allow_reset)
            if change.kind == "set-mig-mode" and not node.mode_active(
                self._nvml, index, change.enable
            ):
                node.reset(
                    self._nvml,
                    index,
                    self._allow_reset,
                    self._notes.append,
                    why="to activate the new MIG mode",
                )
        except node.ResetNeeded:
            self.waiting.append(index)  # the other GPUs can still go ahead
            self._did = change.kind != "reset"
            if not self._did:
                self._skipped.add(id(change))

    def explain(self, e: GpuctlError, action: Action) -> GpuctlError:
        if isinstance(e, node.Halted):
            return e
        d = action.step.detail
        return node.Halted(
            f"GPU {d['gpu']}: step {d['step']} of {d['of']} failed "
            f"({self._texts[id(action)]}): {e.message}",
            hint=node.after_failure(e, d["gpu"]),
        )

    def started(self, step: PlanStep, index: int, total: int) -> None:
        self._progress.started(step, index, total)

    def finished(self, step: PlanStep, index: int, total: int) -> None:
        if self._did:
            self._progress.finished(step, index, total)
        for text in self._notes:
            self._progress.note(text)
        self._notes.clear()


# ---------- configure on a cluster ----------


def plan_cluster(
    kube: Kube,
    file: str | None,
    config: str,
    nodes: tuple[str, ...],
    selector: str | None,
    namespace: str,
    configmap: str,
) -> LabelPlan:
    """Config CONFIG on the nodes named or selected, checked against their GPU models: from
    FILE, or the GPU Operator's ConfigMap CONFIGMAP (or its default) in NAMESPACE."""
    cfg = None
    if file:
        cfg = migparted.load(file)
        cfg.select(config)
    targets = cluster.targets(kube, nodes, selector)
    notes = []
    if cfg is None:
        cfg, note = cluster.operator_config(
            kube, namespace, config, [configmap, OPERATOR_CONFIGMAP]
        )
        if note:
            notes.append(f"config {config!r} not checked: {note}")
    if cfg is not None:
        notes += check_config(cfg, config, targets)
    return LabelPlan(tuple(targets), config, tuple(notes))


def configure_cluster(
    kube: Kube,
    plan: LabelPlan,
    timeout: float,
    progress: Progress,
    on_state: Callable[[str, str, float], None],
) -> None:
    """Label the nodes, each only while it holds the config the plan read (another client's,
    set since, stops the run; on a failure or Ctrl-C the labels set are put back while they
    hold gpuctl's value), then follow the operator's state label on every node of the plan
    until success, failure or TIMEOUT."""
    config: Path = ("metadata", "labels", CONFIG_LABEL)
    actions = [
        field_action(kube, step, Target("Node", d["node"]), {config: d["from"]}, {config: d["to"]})
        for step in plan.steps
        for d in [step.detail]
    ]

    def follow() -> None:
        cluster.follow(kube, list(plan.targets), plan.config, timeout, on_state)

    execute(
        actions,
        progress=progress,
        verify=follow,
        undone_as="the labels set before the failure were put back",
        left_as="node label(s) left changed",
    )
