"""`gpuctl mig rebalance`: new MIG layouts for the GPU Operator's nodes so that the most
pending demand becomes placeable while the fewest GPUs change, and only GPUs that nothing
may be running on. Pure: the nodes (their current layouts and what runs there) and the
pending pods come in, a typed plan comes out.

The cluster does not say which GPU of a node a pod's slice is on, so a GPU counts as in use
when it holds a profile that a running pod on its node uses (every GPU that could be the
one). In use GPUs keep their layout; each idle GPU may take any layout of its model. The
choice is one integer program (HiGHS, zero gap): most demand placed first, then fewest GPUs
changed. mig-parted leaves a GPU already as its config asks untouched, so a node's new
config repeats the layouts of the GPUs that keep theirs.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpuctl.common.errors import UsageError
from gpuctl.gpus.geometry import GpuModel
from gpuctl.gpus.mig_demand import feasible_layouts, maximal_layouts
from gpuctl.gpus.mig_layout import profiles_hint

WHOLE = "gpu"  # the demand key of a whole GPU (nvidia.com/gpu on a GPU with MIG disabled)
CONFIG_PREFIX = "gpuctl-"  # gpuctl's own configs in the mig-manager's ConfigMap


@dataclass(frozen=True, eq=False)
class Layout:
    """What one GPU holds: MIG disabled (a whole GPU) or these instances."""

    enabled: bool
    devices: Mapping[str, int] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def offers(self) -> Counter[str]:
        """What the device plugin advertises for it (a whole GPU as WHOLE)."""
        if not self.enabled:
            return Counter({WHOLE: 1})
        return Counter({k: v for k, v in self.devices.items() if v})

    def key(self) -> tuple[bool, tuple[tuple[str, int], ...]]:
        return (self.enabled, tuple(sorted((k, v) for k, v in self.devices.items() if v)))

    def text(self) -> str:
        if not self.enabled:
            return "MIG disabled"
        return ",".join(f"{k}={v}" for k, v in self.key()[1]) or "MIG enabled, no instances"


DISABLED = Layout(False)


@dataclass(frozen=True)
class NodeNow:
    """A node as it is: its GPUs' layouts (by index), the single or mixed MIG strategy,
    its config label, what its running pods use (profile or WHOLE → count, by pod) and
    which of those pods --drain's policy lets the plan evict (COVERED)."""

    name: str
    model: GpuModel
    strategy: str  # mixed | single
    config: str | None
    gpus: Mapping[int, Layout]
    running: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # pod → use
    settling: bool = False  # an earlier run's config is applied or finished: keep every GPU
    covered: frozenset[str] = frozenset()  # running pods a drain may evict
    not_covered: Mapping[str, str] = field(default_factory=dict)  # with --drain: pod → why

    def used(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for use in self.running.values():
            out.update(use)
        return out

    def holders(self) -> dict[int, list[str]]:
        """GPU index → the running pods that may be on it (see the module's note)."""
        out: dict[int, list[str]] = {}
        for index, layout in self.gpus.items():
            offers = layout.offers()
            pods = [p for p, use in self.running.items() if any(offers[k] for k in use)]
            if pods:
                out[index] = pods
        return out

    def busy(self) -> dict[int, list[str]]:
        """The GPUs that keep their layout: those that may hold a pod the plan may not
        evict (index → those pods), every GPU while an earlier run's config settles."""
        if self.settling:
            return {i: [f"(an earlier run's {self.config}, finished first)"] for i in self.gpus}
        return {
            i: kept
            for i, pods in self.holders().items()
            if (kept := [p for p in pods if p not in self.covered])
        }

    def drained(self) -> dict[int, list[str]]:
        """The GPUs that may change only by evicting their pods: index → those pods."""
        busy = self.busy()
        return {i: pods for i, pods in self.holders().items() if i not in busy}

    def offers(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for layout in self.gpus.values():
            out.update(layout.offers())
        return out


@dataclass(frozen=True)
class Pending:
    """A pod (ns/name) that waits for MIG slices or whole GPUs: profile or WHOLE → count."""

    name: str
    wants: Mapping[str, int]


@dataclass(frozen=True)
class NodeChange:
    node: str
    model: str
    strategy: str
    config_from: str | None
    config_to: str
    before: Mapping[int, Layout]
    after: Mapping[int, Layout]
    unblocks: tuple[str, ...]
    evicts: tuple[str, ...] = ()

    @property
    def changed(self) -> list[int]:
        return [i for i in sorted(self.after) if self.after[i] != self.before[i]]

    def entries(self) -> list[dict[str, Any]]:
        """The node's new config as mig-parted entries: GPUs alike in one entry."""
        groups: dict[tuple[bool, tuple[tuple[str, int], ...]], list[int]] = {}
        for i in sorted(self.after):
            groups.setdefault(self.after[i].key(), []).append(i)
        out = []
        for (enabled, devices), indexes in groups.items():
            out.append(
                {
                    "devices": "all" if len(groups) == 1 else indexes,
                    "mig-enabled": enabled,
                    "mig-devices": dict(devices),
                }
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "model": self.model,
            "strategy": self.strategy,
            "from": self.config_from,
            "to": self.config_to,
            "gpusChanged": [
                {"gpu": i, "from": self.before[i].text(), "to": self.after[i].text()}
                for i in self.changed
            ],
            "unblocks": list(self.unblocks),
            "evicts": list(self.evicts),
        }


@dataclass(frozen=True)
class Finish:
    """A node an earlier run left cordoned: WHAT is left to do there. wait: for the MIG
    manager to apply CONFIG; retry: ask it again under RETRY_AS (it failed; the manager acts
    only on a new label value); uncordon: the layout is in place (or was never asked)."""

    node: str
    what: str  # wait | retry | uncordon
    config: str
    retry_as: str | None = None
    model: str = ""
    strategy: str = "mixed"
    after: Mapping[int, Layout] = field(default_factory=dict)  # the layouts CONFIG holds

    def as_change(self) -> NodeChange:
        """The node's change as the apply steps take it."""
        return NodeChange(
            self.node,
            self.model,
            self.strategy,
            self.config,
            self.retry_as or self.config,
            dict(self.after),
            dict(self.after),
            (),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "finish": self.what, "config": self.retry_as or self.config}

    def text(self) -> str:
        if self.what == "retry":
            return (
                f"node {self.node}: the MIG manager failed to apply {self.config}; "
                f"ask it again as {self.retry_as}, then uncordon"
            )
        if self.what == "wait":
            return (
                f"node {self.node}: wait for the MIG manager to apply {self.config}, then uncordon"
            )
        return f"node {self.node}: uncordon (left cordoned by an earlier run)"


def retry_name(config: str) -> str:
    """gpuctl-abc → gpuctl-abc-r1 → gpuctl-abc-r2."""
    base, _, n = config.rpartition("-r")
    if base.startswith(CONFIG_PREFIX) and n.isdigit():
        return f"{base}-r{int(n) + 1}"
    return f"{config}-r1"


@dataclass(frozen=True)
class RebalancePlan:
    changes: tuple[NodeChange, ...]
    demand: Mapping[str, int]  # what the pending pods ask for, over all of them
    placeable_before: Mapping[str, int]
    placeable_after: Mapping[str, int]
    unplaced: tuple[str, ...]  # pending pods the plan does not make placeable
    skipped: Mapping[str, str]  # node → why it is left out
    kept_busy: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    finishing: tuple[Finish, ...] = ()
    forecast: Mapping[str, int] = field(default_factory=dict)  # --demand, in DEMAND too
    optimal: bool = True  # False: the solver's time limit ended the search
    not_evictable: Mapping[str, str] = field(default_factory=dict)  # --drain: pod → why

    @property
    def empty(self) -> bool:
        return not self.changes and not self.finishing

    @property
    def gpus_changed(self) -> int:
        return sum(len(c.changed) for c in self.changes)

    @property
    def evictions(self) -> int:
        return sum(len(c.evicts) for c in self.changes)

    @property
    def placed(self) -> int:
        return sum(self.placeable_after.values())

    def configs(self) -> dict[str, list[dict[str, Any]]]:
        return {c.config_to: c.entries() for c in self.changes}

    def to_dict(self, dry_run: bool) -> dict[str, Any]:
        return {
            "nodes": [c.to_dict() for c in self.changes],
            "demand": dict(self.demand),
            "forecast": dict(self.forecast),
            "placeableBefore": dict(self.placeable_before),
            "placeableAfter": dict(self.placeable_after),
            "gpusChanged": self.gpus_changed,
            "unplaced": list(self.unplaced),
            "skipped": dict(self.skipped),
            "keptInUse": {n: list(g) for n, g in self.kept_busy.items()},
            "configs": self.configs(),
            "finishing": [f.to_dict() for f in self.finishing],
            "optimal": self.optimal,
            "notEvictable": dict(self.not_evictable),
            "dryRun": dry_run,
        }

    def lines(self) -> list[str]:
        out = [f"note: node {n} left out: {why}" for n, why in self.skipped.items()]
        out += [f.text() for f in self.finishing]
        if not self.optimal:
            out.append(
                "note: the solver's time limit ended the search: a good plan, not proven best"
            )
        if not self.changes:
            out.append("no node needs a new MIG layout")
        for c in self.changes:
            out.append(f"node {c.node} ({c.model}, {c.strategy}): {c.config_from} -> {c.config_to}")
            for i in c.changed:
                out.append(f"  GPU {i}: {c.before[i].text()} -> {c.after[i].text()}")
            if c.unblocks:
                out.append(f"  unblocks: {', '.join(c.unblocks)}")
            if c.evicts:
                out.append(f"  evicts: {', '.join(c.evicts)}")
        for n, gpus in self.kept_busy.items():
            out.append(f"node {n}: GPU {', '.join(map(str, gpus))} kept as they are (in use)")
        out += _not_evicted_lines(self.not_evictable)
        if self.unplaced:
            out.append(f"still not placeable: {', '.join(self.unplaced)}")
        wanted = sum(self.demand.values()) - sum(self.forecast.values())
        if wanted:
            out.append(
                f"pending pods' slices placeable: {sum(self.placeable_before.values())} of {wanted} "
                f"now, {self.placed} after; {self.gpus_changed} GPU(s) change on "
                f"{len(self.changes)} node(s)"
            )
        return out


def config_name(entries: list[dict[str, Any]]) -> str:
    """A name for a node's new config, from what it holds: the same layouts, the same name
    (a re-run finds the label already set)."""
    text = json.dumps(entries, sort_keys=True)
    return CONFIG_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:10]


def stale_configs(names: Sequence[str], in_use: set[str], wanted: set[str]) -> list[str]:
    """gpuctl's own configs that no node's label names any more and this plan does not
    write: removed, so that the ConfigMap does not grow with every run. Only names with
    gpuctl's prefix: NVIDIA's and anyone else's entries are never touched."""
    return [n for n in names if n.startswith(CONFIG_PREFIX) and n not in in_use | wanted]


def demand_of(pending: Sequence[Pending]) -> Counter[str]:
    out: Counter[str] = Counter()
    for p in pending:
        out.update(p.wants)
    return out


# ---------- the choice ----------


@dataclass
class _Column:
    node: int  # a single-strategy node's index; -1 for GPUs grouped over the cluster
    group: tuple[tuple[int, int], ...]  # the GPUs it covers: (node index, GPU index)
    layout: Layout | None  # None: a single-strategy node's option (layouts per GPU below)
    per_gpu: Mapping[int, Layout]
    cost: int
    offers: Counter[str]


def _options(model: GpuModel, wanted: set[str]) -> list[Layout]:
    """The layouts an idle GPU may take that offer something wanted: MIG disabled for whole
    GPUs; of the maximal layouts one per distinct offer of the wanted profiles."""
    out = [DISABLED] if WHOLE in wanted else []
    seen = set()
    for layout in sorted(maximal_layouts(model), key=lambda c: (-sum(c.values()), sorted(c))):
        projection = tuple(sorted((k, v) for k, v in layout.items() if k in wanted))
        if projection and projection not in seen:
            seen.add(projection)
            out.append(Layout(True, dict(sorted(layout.items()))))
    return out


def _single_options(model: GpuModel, wanted: set[str]) -> list[Layout]:
    """A single-strategy node's layouts: every GPU alike, one profile (or MIG disabled)."""
    out = [DISABLED] if WHOLE in wanted else []
    for p in model.profiles:
        if p.name not in wanted:
            continue
        most = max((c[p.name] for c in feasible_layouts(model) if set(c) == {p.name}), default=0)
        if most:
            out.append(Layout(True, {p.name: most}))
    return out


def _columns(nodes: Sequence[NodeNow], wanted: set[str], unit: int) -> list[_Column]:
    """The program's columns. Idle GPUs of one model with one layout are alike wherever
    they are (demand counts over the cluster), so they form one group for the whole cluster;
    a GPU in use has one column (kept); a GPU only pods a drain may evict may be on has its
    own columns; a single-strategy node changes as a whole. A change costs UNIT per GPU,
    and one more per pod it evicts (fewer evictions break a tie of GPUs changed)."""
    cols: list[_Column] = []
    groups: dict[tuple[str, Layout], list[tuple[int, int]]] = {}
    models = {n.model.short_name: n.model for n in nodes}
    for ni, n in enumerate(nodes):
        busy, drained = n.busy(), n.drained()
        if n.strategy == "single":
            members = tuple((ni, i) for i in sorted(n.gpus))
            cols.append(_Column(ni, members, None, dict(n.gpus), 0, n.offers()))
            if busy:
                continue
            for lay in _single_options(n.model, wanted):
                after = {i: lay for i in n.gpus}
                changed = sum(after[i] != n.gpus[i] for i in n.gpus)
                if changed:
                    offers = Counter({k: v * len(n.gpus) for k, v in lay.offers().items()})
                    cost = changed * unit + len(n.running)  # all its pods go
                    cols.append(_Column(ni, members, None, after, cost, offers))
            continue
        for i in sorted(n.gpus):
            if i in busy:  # kept: its only column
                cols.append(_Column(-1, ((ni, i),), n.gpus[i], {}, 0, n.gpus[i].offers()))
            elif i in drained:
                cols.append(_Column(-1, ((ni, i),), n.gpus[i], {}, 0, n.gpus[i].offers()))
                for lay in _options(n.model, wanted):
                    if lay != n.gpus[i]:
                        cost = unit + len(drained[i])
                        cols.append(_Column(-1, ((ni, i),), lay, {}, cost, lay.offers()))
            else:
                groups.setdefault((n.model.short_name, n.gpus[i]), []).append((ni, i))
    for (model, now), alike in groups.items():
        group = tuple(alike)
        cols.append(_Column(-1, group, now, {}, 0, now.offers()))
        for lay in _options(models[model], wanted):
            if lay != now:
                cols.append(_Column(-1, group, lay, {}, unit, lay.offers()))
    return cols


def _evictions_at_most(nodes: Sequence[NodeNow]) -> int:
    """An upper bound of the drain costs of any plan (the unit cost of a GPU exceeds it)."""
    out = 0
    for n in nodes:
        if n.strategy == "single":
            out += 0 if n.busy() else len(n.running)
        else:
            out += sum(len(p) for p in n.drained().values())
    return out


def choose(
    nodes: Sequence[NodeNow], demand: Mapping[str, int], time_limit: float = 20.0
) -> tuple[dict[str, dict[int, Layout]], bool]:
    """The new layout of every GPU of NODES: the most of DEMAND placeable beside what runs,
    then the fewest GPUs changed; GPUs that may be in use keep theirs. And whether the
    solver proved it optimal (not when TIME_LIMIT cut it short)."""
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp

    wanted = {k for k, v in demand.items() if v > 0}
    # what pods a drain may evict use must stay offered somewhere: they come back
    evictable = {k for n in nodes for p in n.covered for k in n.running.get(p, {})}
    unit = _evictions_at_most(nodes) + 1  # one GPU more changed outweighs any evictions
    cols = _columns(nodes, wanted | evictable, unit)
    keys = sorted(wanted | evictable)
    used: Counter[str] = Counter()
    kept: Counter[str] = Counter()  # what the GPUs in use offer: all that runs is there
    for n in nodes:
        used.update(n.used())
        for i in set(n.busy()) | set(n.holders()):
            kept.update(n.gpus[i].offers())
    used = Counter({k: min(v, kept[k]) for k, v in used.items()})  # stale counts: no more
    nx, ns = len(cols), len(keys)
    total_gpus = sum(len(n.gpus) for n in nodes)
    weight = (total_gpus + 1) * unit  # one more slice placed beats any GPUs changed
    # variables: per column how many of its group's GPUs take it, then per key how many served
    cost = np.concatenate([np.array([c.cost for c in cols], dtype=float), -weight * np.ones(ns)])
    rows: list[Any] = []
    lbs: list[float] = []
    ubs: list[float] = []
    cover: dict[tuple[int, tuple[tuple[int, int], ...]], list[int]] = {}
    for j, c in enumerate(cols):
        cover.setdefault((c.node, c.group), []).append(j)
    for (_, group), js in cover.items():
        row = np.zeros(nx + ns)
        row[js] = 1
        size = 1 if cols[js[0]].layout is None else len(group)
        rows.append(row)
        lbs.append(size)
        ubs.append(size)
    for k, key in enumerate(keys):  # served ≤ what the new layouts offer less what runs
        row = np.zeros(nx + ns)
        row[:nx] = [-c.offers[key] for c in cols]
        row[nx + k] = 1
        rows.append(row)
        lbs.append(-np.inf)
        ubs.append(-used[key])
    upper = np.array(
        [1 if c.layout is None else len(c.group) for c in cols] + [demand.get(k, 0) for k in keys],
        dtype=float,
    )
    res = milp(
        cost,
        constraints=[LinearConstraint(np.array(rows), np.array(lbs), np.array(ubs))]
        if rows
        else [],
        integrality=np.ones(nx + ns),
        bounds=Bounds(np.zeros(nx + ns), upper),
        options={"mip_rel_gap": 0.0, "time_limit": time_limit},
    )
    if res.x is None:  # keeping every layout is always feasible
        raise AssertionError(f"the rebalance program found no solution: {res.message}")
    counts = [int(round(v)) for v in res.x[:nx]]
    out: dict[str, dict[int, Layout]] = {n.name: dict(n.gpus) for n in nodes}
    left: dict[tuple[int, tuple[tuple[int, int], ...]], list[tuple[int, int]]] = {}
    for j, c in enumerate(cols):
        if not counts[j] or c.cost == 0:
            continue
        if c.layout is None:
            out[nodes[c.node].name].update(c.per_gpu)
            continue
        # the GPUs of a group that change: the last nodes' first, so that changes gather
        # on as few nodes as they can
        pool = left.setdefault((c.node, c.group), list(c.group))
        for _ in range(counts[j]):
            ni, i = pool.pop()
            out[nodes[ni].name][i] = c.layout
    return out, res.status == 0


# ---------- the plan ----------


def _assign(
    pods: Sequence[Pending], free: dict[str, Counter[str]], order: Sequence[str]
) -> dict[str, str]:
    """Pod → node where the pod's wants fit the node's free slices (first fit, pods in the
    order given, nodes in ORDER); what a pod takes is gone for the next."""
    out = {}
    for p in pods:
        for n in order:
            if all(free[n][k] >= v for k, v in p.wants.items()):
                free[n] -= Counter(p.wants)
                out[p.name] = n
                break
    return out


def _free(
    nodes: Sequence[NodeNow], layouts: Mapping[str, Mapping[int, Layout]]
) -> dict[str, Counter[str]]:
    out = {}
    for n in nodes:
        offers: Counter[str] = Counter()
        for lay in layouts[n.name].values():
            offers.update(lay.offers())
        offers.subtract(n.used())
        out[n.name] = +offers
    return out


def check_forecast(extra: Mapping[str, int], nodes: Sequence[NodeNow]) -> None:
    """Refuse a --demand profile that no MIG node's GPU model has, saying which they have."""
    models = {n.model.short_name: n.model for n in nodes}
    for name in extra:
        if name == WHOLE or any(m.has_profile(name) for m in models.values()):
            continue
        raise UsageError(
            f"--demand {name}: no MIG node here has that profile"
            + ("" if models else " (gpuctl found no MIG node it can plan for)"),
            hint="; ".join(profiles_hint(m) for m in models.values()) or None,
        )


def _not_evicted_lines(not_evictable: Mapping[str, str], shown: int = 3) -> list[str]:
    """One line per reason: a cluster's pods outside the namespaces named share one (JSON
    lists every pod)."""
    by_why: dict[str, list[str]] = {}
    for pod, why in not_evictable.items():
        by_why.setdefault(why, []).append(pod)
    out = []
    for why, pods in by_why.items():
        if len(pods) == 1:
            out.append(f"not evicted: {pods[0]}: {why}")
            continue
        names = ", ".join(pods[:shown]) + (", …" if len(pods) > shown else "")
        out.append(f"not evicted: {len(pods)} pods ({names}): {why}")
    return out


def plan(
    nodes: Sequence[NodeNow],
    pending: Sequence[Pending],
    extra: Mapping[str, int] | None = None,
    skipped: Mapping[str, str] | None = None,
    finishing: Sequence[Finish] = (),
) -> RebalancePlan:
    """The rebalance plan for NODES (those the plan may act on) and PENDING pods; EXTRA is
    forecast demand (--demand) that no pod asks for yet; FINISHING, what earlier runs left
    on nodes they cordoned (those nodes are finished, their layouts kept)."""
    check_forecast(extra or {}, nodes)
    # a node an earlier run left cordoned is finished as that run planned it, never
    # re-planned as if new: its GPUs keep what its config holds (a later run may change it)
    held = {f.node for f in finishing}
    nodes = [replace(n, settling=True) if n.name in held else n for n in nodes]
    wants = demand_of(pending)
    wants.update(extra or {})
    before_layouts = {n.name: dict(n.gpus) for n in nodes}
    after_layouts, optimal = choose(nodes, wants) if wants else (before_layouts, True)
    order = [n.name for n in nodes]
    placed_before = _assign(pending, _free(nodes, before_layouts), order)
    # pods already placeable first, on the nodes they fit, then the rest
    changed_last = sorted(order, key=lambda n: after_layouts[n] != before_layouts[n])
    first = [p for p in pending if p.name in placed_before]
    rest = [p for p in pending if p.name not in placed_before]
    placed_after = _assign([*first, *rest], _free(nodes, after_layouts), changed_last)
    changes = []
    kept: dict[str, tuple[int, ...]] = {}
    for n in nodes:
        after = after_layouts[n.name]
        busy = n.busy()
        if after == dict(n.gpus):
            continue
        if busy:  # only the GPUs nothing may run on changed
            kept[n.name] = tuple(sorted(busy))
        change = NodeChange(
            n.name,
            n.model.short_name,
            n.strategy,
            n.config,
            "",
            dict(n.gpus),
            dict(after),
            tuple(
                p.name
                for p in rest
                if placed_after.get(p.name) == n.name and p.name not in placed_before
            ),
            _evicted(n, after),
        )
        changes.append(
            NodeChange(**{**change.__dict__, "config_to": config_name(change.entries())})
        )
    return RebalancePlan(
        tuple(changes),
        dict(wants),
        _placeable(pending, placed_before),
        _placeable(pending, placed_after),
        tuple(p.name for p in pending if p.name not in placed_after),
        dict(skipped or {}),
        kept,
        tuple(finishing),
        dict(extra or {}),
        optimal,
        {
            p: n.not_covered[p]
            for n in nodes
            for pods in n.busy().values()
            for p in pods
            if p in n.not_covered
        },
    )


def _evicted(n: NodeNow, after: Mapping[int, Layout]) -> tuple[str, ...]:
    """The pods a change of N to AFTER evicts: every one that may be on a GPU that changes."""
    drained = n.drained()
    return tuple(
        sorted({p for i, lay in after.items() if lay != n.gpus[i] for p in drained.get(i, [])})
    )


def _placeable(pending: Sequence[Pending], placed: Mapping[str, str]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for p in pending:
        if p.name in placed:
            out.update(p.wants)
    return dict(out)
