"""`gpuctl mig rebalance` on a cluster: read the GPU Operator's MIG nodes, their configs and
the pods; plan (gpuctl.mig.core.rebalance); write gpuctl's configs into the mig-manager's
ConfigMap beside NVIDIA's; then node by node, through the executor: cordon (recording why
on the node), check that no pod is on a GPU that changes, set nvidia.com/mig.config, wait
for the state label's success and the new resources in allocatable, uncordon.

A failure stops at that node: before its label is set the node is uncordoned again (as it
was); after, it is left cordoned with the annotation, and the next run finishes it (waits
for the manager, or asks it again under a fresh config name when it failed).

Only what this run set is put back, and only while it holds gpuctl's value: another
client's cordon or config, seen before or during the run, stops that node's change with
the reason and is never undone (gpuctl.adapters.kube_guarded, as every workflow that
changes nodes does). Every pod evicted is named at the end, however the run ends."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from gpuctl.adapters.kube import Conflict, Kube, NotFound
from gpuctl.adapters.kube_guarded import (
    Changed,
    Evictions,
    Gone,
    Target,
    change_fields,
    patch_checked,
    restore_fields,
)
from gpuctl.common.errors import BackendError, GpuctlError
from gpuctl.common.plan import Step
from gpuctl.common.specfile import load_yaml
from gpuctl.gpus.geometry import find_model
from gpuctl.k8s import patches
from gpuctl.k8s.nodes import gpus_of
from gpuctl.k8s.objects import Ref, annotations_of, labels_of, meta, name_of, uid_of
from gpuctl.k8s.patches import Path
from gpuctl.mig.core import migparted
from gpuctl.mig.core.drain import (
    BUDGET,
    READ_KINDS,
    RECORD,
    DrainPolicy,
    budgets_unread,
    event,
    record,
)
from gpuctl.mig.core.operator import CONFIG_LABEL, STATE_LABEL
from gpuctl.mig.core.rebalance import NodeChange, NodeNow, RebalancePlan, plan, stale_configs
from gpuctl.mig.core.rebalance_read import (
    ANNOTATION,
    left_by_us,
    offered,
    pending_workloads,
    pod_name,
    read_cluster,
    wants_of,
)
from gpuctl.runtime.workflow import Action, Progress, execute

POLL = 0.2  # seconds between reads while waiting on the manager or on pods


def _configmap(kube: Kube, namespace: str, name: str) -> tuple[dict | None, Any]:
    """(the ConfigMap or None, its mig-parted document or None)."""
    try:
        cm = kube.read("ConfigMap", name, namespace)
    except NotFound:
        return None, None
    text = (cm.get("data") or {}).get("config.yaml") or ""
    return cm, load_yaml(text, f"ConfigMap {namespace}/{name} config.yaml") if text else None


def mig_configmap(kube: Kube) -> str:
    """The ConfigMap the GPU Operator's MIG manager reads, from its ClusterPolicy."""
    from gpuctl.mig.core.operator import CLUSTER_POLICIES, OPERATOR_CONFIGMAP
    from gpuctl.mig.core.operator import mig_configmap as from_policies

    try:
        found = kube.get_path(CLUSTER_POLICIES)
    except GpuctlError:  # no ClusterPolicy CRD, or not allowed to read it
        return OPERATOR_CONFIGMAP
    items = found.get("items") if isinstance(found, dict) else None
    return from_policies([i for i in items or [] if isinstance(i, dict)])


def plan_rebalance(
    kube: Kube,
    namespace: str,
    configmap: str,
    extra: dict[str, int] | None = None,
    drain: DrainPolicy | None = None,
) -> RebalancePlan:
    _, doc = _configmap(kube, namespace, configmap)
    cfg = migparted.parse(doc) if doc is not None else None
    nodes = kube.list_objects("Node")
    pods = kube.unfinished_pods()
    owners = owners_of(kube, drain) if drain else {}
    now, skipped, pending, finishing = read_cluster(nodes, pods, cfg, drain, owners)
    pending += pending_workloads(kube.kueue_workloads())
    return plan(now, pending, extra, skipped, finishing)


def owners_of(kube: Kube, drain: DrainPolicy) -> dict[Ref, dict]:
    """The pods' possible owners and their disruption budgets in the drain's namespaces, by
    (kind, namespace, name). What cannot be listed (RBAC) covers nothing: an owner kind is
    left out, budgets are marked unread."""
    out: dict[Ref, dict] = {}
    for ns in sorted(drain.namespaces):
        for kind in READ_KINDS:
            try:
                found = kube.list_objects(kind, ns)
            except GpuctlError:
                if kind == BUDGET:
                    out[budgets_unread(ns)] = {}
                continue
            for o in found:
                out[(kind, ns, name_of(o))] = o
    return out


def write_configs(kube: Kube, namespace: str, configmap: str, rb: RebalancePlan) -> None:
    """Add gpuctl's configs to the ConfigMap (NVIDIA's entries are left as they are)."""
    import yaml

    cm, found = _configmap(kube, namespace, configmap)
    doc: dict[str, Any] = {"version": migparted.VERSION}
    if found is not None and isinstance(found.data, dict):
        doc = dict(found.data)
    configs: dict[str, Any] = doc.setdefault("mig-configs", {})
    wanted = rb.configs()
    for f in rb.finishing:
        if f.retry_as and f.config in configs:
            # the same layouts under a new name (a copy: YAML would write an alias)
            wanted[f.retry_as] = json.loads(json.dumps(configs[f.config]))
    new = {k: v for k, v in wanted.items() if configs.get(k) != v}
    stale = stale_configs(list(configs), _configs_in_use(kube), set(wanted))
    if not new and not stale:
        return
    configs.update(new)
    for name in stale:
        del configs[name]
    body: dict[str, Any] = {"data": {"config.yaml": yaml.safe_dump(doc, sort_keys=False)}}
    if cm is None:
        kube.create(migparted.render_configmap(doc, configmap, namespace))
        return
    body["metadata"] = {"resourceVersion": meta(cm).get("resourceVersion")}  # as read
    try:
        kube.patch("ConfigMap", configmap, namespace, body)
    except Conflict:
        raise Changed(
            f"ConfigMap {namespace}/{configmap} changed while gpuctl added its configs: "
            "nothing was changed",
            hint="run the same command again: it reads the ConfigMap anew",
        ) from None


def _configs_in_use(kube: Kube) -> set[str]:
    """The configs nodes are labelled with, or an earlier run is moving them to."""
    out = set()
    for n in kube.list_objects("Node"):
        value = labels_of(n).get(CONFIG_LABEL)
        if value:
            out.add(value)
        record = left_by_us(n)
        if record:
            out.update(v for v in (record.get("from"), record["to"]) if isinstance(v, str))
    return out


def apply(
    kube: Kube,
    rb: RebalancePlan,
    namespace: str,
    configmap: str,
    timeout: float,
    progress: Progress,
    clock: Callable[[], float] = time.monotonic,
    drain: DrainPolicy | None = None,
    evictions: Evictions | None = None,
) -> list[str]:
    """Carry the plan out node by node; returns the nodes finished. Raises at the first
    node that fails, saying how that node is left and every pod evicted (EVICTIONS keeps
    them: across the nodes, and the one under way when it stopped). DRAIN: the policy the
    plan's evictions were chosen by (checked again on each pod before it is evicted)."""
    evictions = evictions if evictions is not None else Evictions()
    write_configs(kube, namespace, configmap, rb)
    done: list[str] = []
    work = [(f.as_change(), _FINISH_STEPS[f.what]) for f in rb.finishing]
    work += [(c, _ALL_STEPS) for c in rb.changes]
    for change, steps in work:
        run = _NodeRun(kube, change, timeout, clock, drain, evictions)
        if not change.evicts:
            steps = tuple(s for s in steps if s not in ("evict", "drained"))
        try:
            execute(
                [a for a in run.actions() if a.step.action in steps],
                progress=progress,
                undone_as=f"node {change.node} is as it was",
                left_as=f"step(s) left on node {change.node}",
            )
        except GpuctlError as e:
            if done:
                e.message += f" (finished before it: {', '.join(done)})"
            if evictions.begun:
                e.message += f"; {evictions.account()}"
            raise
        done.append(change.node)
    return done


_ALL_STEPS = ("cordon", "check", "evict", "drained", "label", "wait", "uncordon")
_FINISH_STEPS = {
    "retry": ("label", "wait", "uncordon"),
    "wait": ("wait", "uncordon"),
    "uncordon": ("uncordon",),
}
CORDON: Path = ("spec", "unschedulable")
WHY: Path = ("metadata", "annotations", ANNOTATION)  # why gpuctl cordoned it
CONFIG: Path = ("metadata", "labels", CONFIG_LABEL)
UNCORDONED = {CORDON: None, WHY: None}


class _NodeRun:
    """One node's steps. Its cordon and config label are set only while the node holds what
    the plan read (another's cordon or config stops the node), and put back only while they
    hold what gpuctl set (gpuctl.adapters.kube_guarded)."""

    def __init__(
        self,
        kube: Kube,
        change: NodeChange,
        timeout: float,
        clock,
        drain: DrainPolicy | None,
        evictions: Evictions,
    ) -> None:
        self.kube, self.change, self.timeout, self.clock = kube, change, timeout, clock
        self.drain, self.evictions = drain, evictions
        self.target = Target("Node", change.node)
        self.labelled = False
        self.state_before: str | None = None  # the state label when ours was set
        self.cordoned: dict[Path, Any] | None = None  # what this run's cordon set

    def actions(self) -> list[Action]:
        c = self.change
        node = f"node {c.node}"
        return [
            Action(
                Step("cordon", node, "no new pod lands while its GPUs change"),
                self.cordon,
                self.uncordon_unless_labelled,
            ),
            Action(
                Step("check", node, f"no pod on GPU {_gpus(c.changed)}" + _but(c.evicts)),
                lambda: self.check_idle(set(c.evicts)),
                lambda: None,  # a read: nothing to undo
            ),
            Action(
                Step("evict", node, f"{', '.join(c.evicts)} (--drain)"),
                self.evict,
                self.left_evicted,
            ),
            Action(
                Step("drained", node, "the evicted pods are gone"),
                lambda: self.check_idle(set()),
                lambda: None,
            ),
            Action(
                Step("label", node, f"{CONFIG_LABEL}: {c.config_from} -> {c.config_to}"),
                self.label,
                self.left_labelled,
            ),
            Action(
                Step("wait", node, "the MIG manager's success and the new resources"), self.wait
            ),
            Action(Step("uncordon", node, "its new layout is in place"), self.uncordon),
        ]

    def _node(self) -> dict[str, Any]:
        return self.kube.read_node(self.change.node)

    def cordon(self) -> None:
        """Cordon the node, recording why, while nobody else has: another's cordon, made
        since the plan or just before this request, stops the node as it is."""
        why = {
            "why": f"cordoned by gpuctl mig rebalance to apply MIG config {self.change.config_to}",
            "from": self.change.config_from,
            "to": self.change.config_to,
            "gpus": len(self.change.after),
        }
        ours = {CORDON: True, WHY: json.dumps(why)}
        change_fields(self.kube, self.target, UNCORDONED, ours)
        self.cordoned = ours

    def _ours(self) -> dict[Path, Any] | None:
        """The cordon gpuctl set on the node: this run's, or an earlier run's (its record)."""
        if self.cordoned is not None:
            return self.cordoned
        node = self._node()
        record = left_by_us(node)
        return None if record is None else {CORDON: True, WHY: annotations_of(node)[ANNOTATION]}

    def uncordon(self) -> None:
        """Take gpuctl's cordon and its record off, only while they are gpuctl's: a node
        someone else uncordoned keeps their choice (only the record goes)."""
        ours = self._ours()
        if ours is None:
            return  # no cordon of gpuctl's is left
        if not patches.holds(self._node(), CORDON, True):
            ours = {WHY: ours[WHY]}
        change_fields(self.kube, self.target, ours, {p: None for p in ours})

    def uncordon_unless_labelled(self) -> str | None:
        if self.labelled:
            config = labels_of(self._node()).get(CONFIG_LABEL)
            if config != self.change.config_to:
                return (
                    f"left cordoned: another client set {CONFIG_LABEL}={config}; run the same "
                    "command again to uncordon it once that change is done"
                )
            return (
                f"left cordoned: the MIG manager is applying {self.change.config_to}; "
                "run the same command again to finish it"
            )
        if self.cordoned is None:
            return None
        return restore_fields(self.kube, self.target, self.cordoned, UNCORDONED)

    def left_labelled(self) -> str | None:
        return f"{CONFIG_LABEL}={self.change.config_to} left set" if self.labelled else None

    def _pods(self) -> list[dict]:
        return [
            p
            for p in self.kube.unfinished_pods()
            if (p.get("spec") or {}).get("nodeName") == self.change.node
        ]

    def check_idle(self, evicted: set[str]) -> None:
        """No running pod may be on a GPU that changes but those the plan EVICTED; one that
        started since the plan was read is waited for (until the timeout)."""
        start = self.clock()
        while True:
            busy = _busy_on(self.change, self._pods())
            in_way = sorted({p for i in self.change.changed for p in busy.get(i, [])} - evicted)
            if not in_way:
                return
            if self.clock() - start >= self.timeout:
                raise BackendError(
                    f"node {self.change.node}: pods may be on GPU {_gpus(self.change.changed)} "
                    f"that changes: {', '.join(in_way)}",
                    hint="wait for them to finish and run the same command again",
                )
            time.sleep(POLL)

    def evict(self) -> None:
        """Evict the plan's pods still on the node through the Eviction API, each one
        read again, checked against the drain policy, marked with why (annotation and
        Event) and held by its uid and resourceVersion. A PodDisruptionBudget's refusal
        stops the node as it was."""
        c = self.change
        owners = owners_of(self.kube, self.drain) if self.drain else {}

        def covered(pod: dict) -> str | None:
            return self.drain.why_not(pod, owners) if self.drain else "no --drain policy"

        for pod in self._pods():
            name = pod_name(pod)
            if name not in c.evicts:
                continue
            ns, short = name.split("/", 1)
            target = Target("Pod", short, ns)
            why = record(c.node, c.config_from, c.config_to)
            try:
                patch_checked(self.kube, target, _record(why), uid_of(pod), covered)
                gone = not self.evictions.evict(self.kube, ns, short, uid_of(pod), covered)
            except Gone:
                continue  # gone already: what the step wanted
            except GpuctlError as e:
                self._unmark(target, why)  # not evicted after all
                raise self._stopped(e, name) from None
            if gone:
                continue
            self._event(
                pod,
                f"evicted by gpuctl mig rebalance --drain: node {c.node} changes MIG config "
                f"{c.config_from} -> {c.config_to}",
            )

    def _stopped(self, e: GpuctlError, name: str) -> GpuctlError:
        """The error that stops the node at pod NAME. The pods evicted before it on this
        node make the step one that happened in part: its undo then names them."""
        node = self.change.node
        if "HTTP 429" in e.message:
            e = BackendError(
                f"node {node}: a PodDisruptionBudget allows no eviction of {name} now"
                + ("" if self.evicted else "; the node is uncordoned, its layout as it was"),
                hint="run the same command again once the budget allows a disruption",
            )
        else:
            e.message = f"node {node}: {e.message}"
        e.uncertain = e.uncertain or bool(self.evicted)
        return e

    def _unmark(self, target: Target, why: str) -> None:
        """Remove the eviction record from a pod that was not evicted, while it is gpuctl's
        (best effort: the error that stopped the node is the one to report)."""

        def still_ours(pod: dict) -> str | None:
            return None if annotations_of(pod).get(RECORD) == why else "not gpuctl's record"

        try:
            patch_checked(self.kube, target, _record(None), None, still_ours)
        except GpuctlError:
            pass

    @property
    def evicted(self) -> list[str]:
        """The pods evicted from this node (a Ctrl-C's read-back included)."""
        return [p for p in self.evictions.done if p in self.change.evicts]

    def left_evicted(self) -> str | None:
        """An eviction cannot be undone: say which pods went (their controllers recreate
        them)."""
        if not self.evicted:
            return None
        return f"evicted {', '.join(self.evicted)}: their controllers recreate them"

    def _event(self, pod: dict, message: str) -> None:
        """An Event on the evicted pod, beside the annotation (which goes with the pod)."""
        try:
            self.kube.create(event(pod, message, time.time()))
        except GpuctlError:  # the eviction is done: a missing Event must not hide it
            pass

    def label(self) -> None:
        """Ask the MIG manager for the new config, while the node holds the config the plan
        read: another client's, set since, stops the node."""
        node = self._node()
        self.state_before = labels_of(node).get(STATE_LABEL)
        self.labelled = True  # set before the request: it may land though the answer is lost
        before = {CONFIG: self.change.config_from}
        try:
            change_fields(self.kube, self.target, before, {CONFIG: self.change.config_to})
        except Changed:
            self.labelled = False
            raise

    def wait(self) -> None:
        start = self.clock()
        state = None
        moved = self.state_before is None  # a state left from before our label is stale
        while True:
            node = self._node()
            labels = labels_of(node)
            state = labels.get(STATE_LABEL)
            moved = moved or state != self.state_before
            config = labels.get(CONFIG_LABEL)
            if config != self.change.config_to:
                raise Changed(
                    f"node {self.change.node}: another client set {CONFIG_LABEL}={config} "
                    f"while the MIG manager applied {self.change.config_to}; left to them"
                )
            if state == "failed" and moved:
                raise BackendError(
                    f"the MIG manager failed to apply {self.change.config_to} on node "
                    f"{self.change.node}; the node is left cordoned",
                    hint="see the nvidia-mig-manager pod's log on that node; run the "
                    "same command again to retry it",
                )
            if state == "success" and _offers_planned(node, self.change):
                return
            if self.clock() - start >= self.timeout:
                raise BackendError(
                    f"timed out after {self.timeout:g}s waiting for {self.change.config_to} on "
                    f"node {self.change.node} (state: {state or 'none'}); the node is left "
                    "cordoned",
                    hint="run the same command again to go on waiting; raise --timeout for "
                    "slow reconfigurations",
                )
            time.sleep(POLL)


def _record(why: str | None) -> dict[str, Any]:
    """The patch that records on a pod why it is evicted (None: removes the record)."""
    return {"metadata": {"annotations": {RECORD: why}}}


def _gpus(indexes: list[int]) -> str:
    return ", ".join(map(str, indexes))


def _but(evicts: tuple[str, ...]) -> str:
    return f" but the {len(evicts)} pod(s) it evicts" if evicts else ""


def _busy_on(change: NodeChange, pods: list[dict]) -> dict[int, list[str]]:
    """The GPUs of the node that its pods may be on now (the layouts before the change)."""
    single = None
    if change.strategy == "single":
        single = next(iter(change.before.values())).offers().most_common(1)[0][0]
    running = {pod_name(p): wants_of(p, single) for p in pods}
    model = find_model(change.model)
    return NodeNow(change.node, model, change.strategy, None, change.before, running).holders()


def _offers_planned(node: dict, change: NodeChange) -> bool:
    """The device plugin advertises the new layouts, all of them healthy."""
    want: Counter[str] = Counter()
    for lay in change.after.values():
        want.update(lay.offers())
    alloc = gpus_of(node)
    return offered(alloc) == dict(+want) and all(
        alloc.allocatable.get(k, 0) >= v for k, v in alloc.capacity.items()
    )
