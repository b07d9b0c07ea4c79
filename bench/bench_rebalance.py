"""`gpuctl mig rebalance` planning speed and quality.

1. Speed: 250 GPU Operator nodes × 8 H100 (2,000 GPUs, a third of the nodes with running
   pods) and 3,000 pending pods of seven profiles, planned in one call (target < 5 s),
   against a greedy re-layout (each pending profile turns the next idle GPU into all of
   that profile) measured in the same run as the reference.
2. Quality: slices placed and GPUs changed vs the exhaustive optimum of
   tests/mig/test_rebalance_plan.py on random small clusters, for gpuctl and the greedy.

Run: PYTHONPATH=. python bench/bench_rebalance.py
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpuctl.gpus.geometry import find_model  # noqa: E402
from gpuctl.gpus.mig_demand import feasible_layouts  # noqa: E402
from gpuctl.mig.core.rebalance import DISABLED, WHOLE, Layout, NodeNow, Pending, plan  # noqa: E402
from tests.mig.test_rebalance_plan import best, busy, random_cluster, random_pending  # noqa: E402


def greedy(nodes, pending):
    """Reference: serve what current layouts can; then for each unserved pod turn the next
    idle GPU into as many of its profile as fit. Returns (placed, changed)."""
    used, supply = Counter(), Counter()
    idle = []
    for n in nodes:
        for use in n.running.values():
            used.update(use)
        for i, gpu in n.gpus.items():
            supply.update(gpu.offers())
            if not busy(gpu, n.running):
                idle.append((n, i, gpu))
    free = supply - used
    changed = placed = 0
    for p in pending:
        (key,) = p.wants
        if free[key] >= 1:
            free[key] -= 1
            placed += 1
            continue
        if not idle:
            continue
        n, i, gpu = idle.pop()
        if key == WHOLE:
            new = DISABLED
        else:
            most = max((c[key] for c in feasible_layouts(n.model) if set(c) == {key}), default=0)
            if not most:
                continue
            new = Layout(True, {key: most})
        free -= gpu.offers()
        free.update(new.offers())
        changed += 1
        if free[key] >= 1:
            free[key] -= 1
            placed += 1
    return placed, -changed


def main() -> int:
    model = find_model("H100-80GB")
    rng = random.Random(7)
    layouts = [DISABLED, Layout(True, {"1g.10gb": 7}), Layout(True, {"3g.40gb": 2})]
    layouts.append(Layout(True, {"2g.20gb": 3}))
    nodes = []
    for i in range(250):
        gpus = {g: rng.choice(layouts) for g in range(8)}
        running = {}
        if i % 3 == 0:
            key = next(iter(gpus[0].offers()))
            running[f"ns/run-{i}"] = {key: 1}
        nodes.append(NodeNow(f"n{i}", model, "mixed", "x", gpus, running))
    names = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", WHOLE]
    pending = [Pending(f"ns/p{i}", {rng.choice(names): 1}) for i in range(3000)]
    plan(nodes[:2], pending[:5])  # imports and the layout table, once per process
    t = time.perf_counter()
    result = plan(nodes, pending)
    plan_s = time.perf_counter() - t
    t = time.perf_counter()
    g_placed, g_changed = greedy(nodes, pending)
    greedy_s = time.perf_counter() - t
    print(
        f"speed: {len(nodes) * 8} GPUs, {len(pending)} pending pods planned in {plan_s:.3f} s "
        f"(target < 5 s); {result.placed} slices placeable after, {result.gpus_changed} GPUs "
        f"changed; greedy reference {greedy_s:.3f} s: {g_placed} placed, {-g_changed} changed"
    )
    cases = equal = greedy_equal = 0
    lost = 0
    rng = random.Random(28)
    for name, size, n in (("A30", 4, 60), ("A100-40GB", 3, 40)):
        m = find_model(name)
        for _ in range(n):
            small = random_cluster(rng, m, size)
            wanted = random_pending(rng, m)
            demand: Counter[str] = Counter()
            for p in wanted:
                demand.update(p.wants)
            top = best(small, demand)
            r = plan(small, wanted)
            after = {c.node: c.after for c in r.changes}
            supply: Counter[str] = Counter()
            used: Counter[str] = Counter()
            changed = 0
            for node in small:
                for use in node.running.values():
                    used.update(use)
                for i, gpu in node.gpus.items():
                    new = after.get(node.name, node.gpus)[i]
                    supply.update(new.offers())
                    changed += new != gpu
            mine = (sum(min(v, max(0, supply[k] - used[k])) for k, v in demand.items()), -changed)
            g = greedy(small, wanted)
            cases += 1
            equal += mine == top
            greedy_equal += g == top
            lost += top[0] - g[0]
    print(
        f"quality: gpuctl equals the exhaustive optimum (most placed, then fewest changed) on "
        f"{equal}/{cases} small clusters; the greedy on {greedy_equal}/{cases} "
        f"({lost} slices fewer placed in total)"
    )
    return 0 if plan_s < 5.0 and result.optimal and equal == cases else 1


if __name__ == "__main__":
    sys.exit(main())
