"""`gpuctl mig plan` speed and quality.

1. Speed: a mixed demand that needs about 10,000 H100s, planned in one call (target < 1 s),
   against first-fit-decreasing packing measured in the same run as the reference.
2. Quality: GPUs used vs the exhaustive optimum (memoised search over every layout one GPU
   holds, enumerated by brute force from the geometry data in tests/mig/exhaustive.py, not by
   gpuctl) on random small demands, for gpuctl's planner and for first-fit-decreasing.

Run: PYTHONPATH=. python bench/bench_mig.py
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpuctl.gpus.geometry import find_model  # noqa: E402
from gpuctl.gpus.mig_demand import Fleet, feasible_layouts, plan_demand  # noqa: E402
from tests.mig.exhaustive import fewest_gpus, gpu_layouts  # noqa: E402


def first_fit_decreasing(model, demand: dict) -> int:
    """Reference: place instances biggest first into the first GPU where they still fit
    (what fits: the brute-force layout table, not gpuctl's)."""
    layouts = gpu_layouts(model.nvml_name)
    size = {p.name: (p.size, p.slices) for p in model.profiles}
    items = sorted(
        (n for n, c in demand.items() for _ in range(c)), key=lambda n: size[n], reverse=True
    )
    gpus: list[Counter] = []
    for name in items:
        for g in gpus:
            if frozenset((g + Counter({name: 1})).items()) in layouts:
                g[name] += 1
                break
        else:
            gpus.append(Counter({name: 1}))
    return len(gpus)


def main() -> int:
    model = find_model("H100-80GB")
    fleet = [Fleet(model, None)]
    t = time.perf_counter()
    import scipy.optimize  # noqa: F401  (import cost shown apart)

    import_s = time.perf_counter() - t
    t = time.perf_counter()
    feasible_layouts(model)  # gpuctl's per-model table, built once per process
    table_s = time.perf_counter() - t
    gpu_layouts(model.nvml_name)  # first-fit-decreasing's table, likewise built before timing

    demand = {
        "1g.10gb": 22000,
        "1g.20gb": 5500,
        "2g.20gb": 6400,
        "3g.40gb": 4600,
        "4g.40gb": 1600,
        "7g.80gb": 1300,
        "1g.10gb+me": 400,
    }
    t = time.perf_counter()
    plan = plan_demand(demand, fleet)
    plan_s = time.perf_counter() - t
    small = {k: v // 100 for k, v in demand.items()}  # FFD is quadratic: time it on 1/100
    t = time.perf_counter()
    ffd_small = first_fit_decreasing(model, small)
    ffd_s = time.perf_counter() - t
    t = time.perf_counter()
    plan_small = plan_demand(small, fleet)
    plan_small_s = time.perf_counter() - t
    print(
        f"speed: {plan.gpus} GPUs planned in {plan_s:.3f} s (target < 1 s: "
        f"{plan_s / 1.0:.2f}x of budget; optimal={plan.optimal}, lower bound "
        f"{plan.lower_bound}); once per process: scipy import {import_s:.3f} s, "
        f"layout table {table_s:.3f} s"
    )
    print(
        f"reference on 1/100 of it: first-fit-decreasing {ffd_s:.3f} s for {ffd_small} GPUs, "
        f"gpuctl {plan_small_s:.3f} s for {plan_small.gpus} GPUs "
        f"(speed ratio {ffd_s / plan_small_s:.1f}x)"
    )

    rng = random.Random(1)
    names = [p.name for p in model.profiles]
    cases = equal = ffd_equal = extra = 0
    for _ in range(200):
        d = {n: rng.randint(1, 5) for n in rng.sample(names, rng.randint(1, 4))}
        best = fewest_gpus(model.nvml_name, d)
        cases += 1
        equal += plan_demand(d, fleet).gpus == best
        f = first_fit_decreasing(model, d)
        ffd_equal += f == best
        extra += f - best
    print(
        f"quality: gpuctl equals the exhaustive optimum on {equal}/{cases} small cases; "
        f"first-fit-decreasing on {ffd_equal}/{cases} (+{extra} GPUs in total)"
    )
    return 0 if plan_s < 1.0 and plan.optimal and equal == cases else 1


if __name__ == "__main__":
    sys.exit(main())
