"""Plan MIG layouts for a demand: the fewest GPUs whose layouts together hold it.

Every layout a GPU model can hold is enumerated once from its geometry (a few hundred
at most); the plan is then an integer program over the *maximal* layouts — how many GPUs
get each — solved exactly by HiGHS (scipy.optimize.milp) with zero optimality gap. Surplus
instances are dropped again, so the plan holds exactly the demand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.gpus.geometry import GpuModel
from gpuctl.gpus.mig_layout import (
    Device,
    LayoutError,
    Placed,
    check_counts,
    place,
    profiles_hint,
    search_placement,
)

# Far beyond any cluster, and well inside the solver's exact (double precision) integers.
MAX_DEMAND = 10**12


@dataclass(frozen=True)
class Fleet:
    model: GpuModel
    count: int | None  # None: as many as needed


@dataclass
class LayoutGroup:
    model: GpuModel
    layout: dict[str, int]  # profile name -> count, biggest first
    gpus: int
    placements: list[Placed]

    @property
    def free_slices(self) -> int:
        return self.model.memory_slices - sum(p.profile.size for p in self.placements)


@dataclass
class DemandPlan:
    demand: dict[str, int]
    groups: list[LayoutGroup]
    optimal: bool
    lower_bound: int

    @property
    def gpus(self) -> int:
        return sum(g.gpus for g in self.groups)


def plan_demand(
    demand: Mapping[str, int], fleet: list[Fleet], time_limit: float = 20.0
) -> DemandPlan:
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp

    demand = {k: v for k, v in demand.items() if v}
    if not demand:
        raise UsageError("the demand is empty: give profiles like 1g.10gb=9,3g.40gb=3")
    for name, n in demand.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise UsageError(f"{name}: count must be a whole number >= 0, got {n!r}")
        if n > MAX_DEMAND:
            raise UsageError(f"{name}={n}: gpuctl plans at most {MAX_DEMAND:,} of a profile")
        if not any(_has(f.model, name) for f in fleet):
            models = [f.model for f in fleet]
            raise UsageError(
                f"no MIG profile {name!r} on {', '.join(m.short_name for m in models)}",
                hint="; ".join(profiles_hint(m) for m in models),
            )
    names = list(demand)
    columns: list[tuple[int, Counter[str]]] = []  # (fleet index, layout)
    for fi, f in enumerate(fleet):
        for layout in maximal_layouts(f.model):
            if any(layout.get(n) for n in names):
                columns.append((fi, layout))
    a = np.array([[layout.get(n, 0) for _, layout in columns] for n in names], dtype=float)
    cons = [LinearConstraint(a, lb=np.array([demand[n] for n in names], dtype=float))]
    limits = {fi: f.count for fi, f in enumerate(fleet) if f.count is not None}
    for fi, limit in limits.items():
        row = np.array([[1.0 if c[0] == fi else 0.0 for c in columns]])
        cons.append(LinearConstraint(row, ub=float(limit)))
    cost = np.ones(len(columns))
    options = {"mip_rel_gap": 0.0, "time_limit": time_limit}
    res = milp(
        cost,
        constraints=cons,
        integrality=np.ones(len(columns)),
        bounds=Bounds(0, np.inf),
        options=options,
    )
    if res.x is None:
        if limits:
            unlimited = plan_demand(demand, [Fleet(f.model, None) for f in fleet], time_limit)
            given = ", ".join(
                (f"{f.count}x" if f.count else "") + f.model.short_name for f in fleet
            )
            if len(fleet) == 1:
                raise GpuctlError(
                    f"the demand needs {unlimited.gpus} GPUs; only {fleet[0].count} given ({given})"
                )
            used: Counter[str] = Counter()
            for g in unlimited.groups:
                used[g.model.short_name] += g.gpus
            raise GpuctlError(
                f"{given} cannot hold the demand; without those counts it takes "
                f"{unlimited.gpus} GPUs: " + ", ".join(f"{n}x{name}" for name, n in used.items())
            )
        raise GpuctlError(f"no plan found: {res.message}")
    counts = [int(round(v)) for v in res.x]
    bound = getattr(res, "mip_dual_bound", None)
    lower = int(-(-(bound - 1e-6) // 1)) if bound is not None else sum(counts)
    groups = _expand(columns, counts, fleet, demand)
    held: Counter[str] = Counter()
    for g in groups:
        held.update({k: v * g.gpus for k, v in g.layout.items()})
    if held != Counter(demand):  # the solver works in floating point: never trust it blindly
        raise GpuctlError(
            f"the MIG plan came out wrong ({dict(held)} for {demand})",
            hint="report this: it is a bug in gpuctl's planner",
        )
    return DemandPlan(dict(demand), groups, optimal=res.status == 0, lower_bound=lower)


def _has(model: GpuModel, name: str) -> bool:
    return any(p.name == name for p in model.profiles)


def _expand(
    columns: list[tuple[int, Counter[str]]],
    counts: list[int],
    fleet: list[Fleet],
    demand: dict[str, int],
) -> list[LayoutGroup]:
    """Groups of identical GPUs with surplus instances dropped (from the last groups first),
    splitting a group where only some of its GPUs lose an instance; never one entry per GPU,
    so a demand for millions of devices stays cheap."""
    groups = [  # (GPUs, fleet index, layout)
        (n, fi, Counter({k: v for k, v in layout.items() if k in demand}))
        for (fi, layout), n in zip(columns, counts)
        if n
    ]
    for name, wanted in demand.items():
        surplus = sum(n * layout[name] for n, _, layout in groups) - wanted
        out = []
        for n, fi, layout in reversed(groups):
            a = layout[name]
            if surplus <= 0 or not a:
                out.append((n, fi, layout))
                continue
            r = min(surplus, n * a)
            surplus -= r
            full, part = divmod(r, a)
            rest = n - full - (1 if part else 0)
            if rest:
                out.append((rest, fi, layout))
            if full:
                out.append((full, fi, layout - Counter({name: a})))
            if part:
                out.append((1, fi, layout - Counter({name: part})))
        groups = out[::-1]
    merged: Counter[tuple[int, tuple[tuple[str, int], ...]]] = Counter()
    for n, fi, layout in groups:
        key = (
            fi,
            tuple(
                sorted(
                    ((k, v) for k, v in layout.items() if v),
                    key=lambda kv: _profile_order(fleet[fi].model, kv[0]),
                )
            ),
        )
        if key[1]:
            merged[key] += n
    result = []
    for (fi, items), n in sorted(merged.items(), key=lambda kv: (-kv[1], kv[0][0])):
        model = fleet[fi].model
        result.append(LayoutGroup(model, dict(items), n, place(model, dict(items))))
    return result


def _profile_order(model: GpuModel, name: str) -> tuple[int, int, str]:
    p = model.profile(name)
    return (-p.size, -p.slices, name)


@cache
def feasible_layouts(model: GpuModel) -> tuple[Counter[str], ...]:
    """Every multiset of profiles one GPU of this model can hold (empty one included)."""
    profiles = list(model.profiles)
    out: list[Counter[str]] = []

    def ok(counts: list[int]) -> bool:
        devs = [Device(p, p.slices) for p, n in zip(profiles, counts) for _ in range(n)]
        try:
            check_counts(model, [d.profile for d in devs])
        except LayoutError:
            return False
        return search_placement(devs, ()) is not None

    def go(i: int, counts: list[int]) -> None:
        if i == len(profiles):
            out.append(Counter({p.name: n for p, n in zip(profiles, counts) if n}))
            return
        n = 0
        while True:
            counts.append(n)
            if n and not ok(counts + [0] * (len(profiles) - i - 1)):
                counts.pop()
                return  # more of this profile only fails too (layouts are downward closed)
            go(i + 1, counts)
            counts.pop()
            n += 1

    go(0, [])
    return tuple(out)


@cache
def maximal_layouts(model: GpuModel) -> tuple[Counter[str], ...]:
    """The layouts to which no further instance can be added."""
    keys = {_key(c) for c in feasible_layouts(model)}
    out = []
    for c in feasible_layouts(model):
        if not c:
            continue
        if all(_key(c + Counter({p.name: 1})) not in keys for p in model.profiles):
            out.append(c)
    return tuple(out)


def _key(c: Counter[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((k, v) for k, v in c.items() if v))
