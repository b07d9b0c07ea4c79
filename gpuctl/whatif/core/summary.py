"""The figures `gpuctl whatif` reports per policy: medians over the seeds' replays. Pure.

Per policy:
- alloc_pct: GPU allocated / GPU capacity, in %, when the GPU request arrived reached 50,
  90, 100 and 130 % of the capacity (None past the replay's demand);
- first_gpu_pod_failure_demand_pct: the demand, in %, when a pod asking for GPU first fit
  nowhere (None if none did);
- unallocated_gpus_end: GPU capacity left unallocated at the end, in GPUs;
- fragmented_gpu_pct_end: how much of that is fragmented for the workload's typical pods
  (the FGD paper's measure, fragmentation.py), in %;
- empty_full_nodes_at_50: GPU nodes with every GPU free at 50 % demand.
Amounts are counted in thousandths of a GPU; percentages are rounded to 0.01, GPUs to 0.001.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuctl.whatif.core.replay import DEMAND_POINTS, Run
from gpuctl.whatif.core.trace import MILLI


def summarise(runs: Sequence[Run]) -> dict[str, Any]:
    """{"policies": [...]} in the order the policies first appear in `runs`."""
    by_policy: dict[str, list[Run]] = {}
    for run in runs:
        by_policy.setdefault(run.policy, []).append(run)
    return {"policies": [_policy(name, group) for name, group in by_policy.items()]}


def _policy(name: str, runs: list[Run]) -> dict[str, Any]:
    def pct(amount: float | None, run: Run) -> float | None:
        return None if amount is None else amount * 100 / run.capacity

    return {
        "policy": name,
        "seeds": [r.seed for r in runs],
        "alloc_pct": {
            str(point): _round(median([pct(r.allocated_at.get(point), r) for r in runs]), 2)
            for point in DEMAND_POINTS
        },
        "first_gpu_pod_failure_demand_pct": _round(
            median([pct(r.first_gpu_failure, r) for r in runs]), 2
        ),
        "unallocated_gpus_end": _round(median([r.unallocated / MILLI for r in runs]), 3),
        "fragmented_gpu_pct_end": _round(
            median([r.fragmented * 100 / r.unallocated if r.unallocated else 0.0 for r in runs]),
            2,
        ),
        "empty_full_nodes_at_50": median([r.whole_nodes_at.get(50) for r in runs]),
    }


def median(values: Sequence[float | None]) -> float | None:
    """The median, None counting as above every number (never happened, or not reached);
    None when the median falls on one."""
    ordered = sorted(values, key=lambda v: (v is None, v or 0))
    middle = ordered[(len(ordered) - 1) // 2 : len(ordered) // 2 + 1]
    if not middle or any(v is None for v in middle):
        return None
    low, high = middle[0], middle[-1]
    assert low is not None and high is not None
    mid = (low + high) / 2
    return int(mid) if mid == int(mid) else mid


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
