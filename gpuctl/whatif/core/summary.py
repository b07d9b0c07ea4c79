"""The figures `gpuctl whatif` reports per policy: medians over the seeds' replays (with
one seed, that seed's figures), and a one-line reading of them. Pure.

Per policy and GPU-node taint (whether GPU nodes keep out pods without GPUs):
- alloc_pct: GPU allocated / GPU capacity, in %, when the GPU request arrived reached 50,
  90, 100 and 130 % of the capacity (None past the replay's demand);
- first_gpu_pod_failure_demand_pct: the demand, in %, when a pod asking for GPU first fit
  nowhere (None if none did);
- unallocated_gpus_end: GPU capacity left unallocated at the end, in GPUs;
- fragmented_gpu_pct_end: how much of that is fragmented for the workload's typical pods
  (the FGD paper's measure, fragmentation.py), in %;
- empty_full_nodes_at_50: GPU nodes with every GPU free at 50 % demand;
- empty_largest_nodes_at_50: the same among the nodes with the most GPUs (8 on openb);
- alloc_pct_mean: the mean over the seeds of alloc_pct.
Amounts are counted in thousandths of a GPU; percentages are rounded to 0.01, GPUs to 0.001.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuctl.whatif.core.replay import DEMAND_POINTS, Run
from gpuctl.whatif.core.trace import MILLI


def summarise(runs: Sequence[Run]) -> dict[str, Any]:
    """{"policies": [...], "reading": "..."}, the policies in the order they first appear
    in `runs`."""
    by_policy: dict[tuple[str, bool], list[Run]] = {}
    for run in runs:
        by_policy.setdefault((run.policy, run.gpu_nodes_tainted), []).append(run)
    policies = [_policy(name, tainted, group) for (name, tainted), group in by_policy.items()]
    return {"policies": policies, "reading": reading(policies)}


def _pct(amount: float | None, run: Run) -> float | None:
    return None if amount is None else amount * 100 / run.capacity


def _policy(name: str, tainted: bool, runs: list[Run]) -> dict[str, Any]:
    return {
        "policy": name,
        "gpu_nodes_tainted": tainted,
        "seeds": [r.seed for r in runs],
        "alloc_pct": {
            str(point): _round(median([_pct(r.allocated_at.get(point), r) for r in runs]), 2)
            for point in DEMAND_POINTS
        },
        "first_gpu_pod_failure_demand_pct": _round(
            median([_pct(r.first_gpu_failure, r) for r in runs]), 2
        ),
        "unallocated_gpus_end": _round(median([r.unallocated / MILLI for r in runs]), 3),
        "fragmented_gpu_pct_end": _round(
            median([r.fragmented * 100 / r.unallocated if r.unallocated else 0.0 for r in runs]),
            2,
        ),
        "empty_full_nodes_at_50": median([r.whole_nodes_at.get(50) for r in runs]),
        "empty_largest_nodes_at_50": median([r.whole_largest_at.get(50) for r in runs]),
        "alloc_pct_mean": {str(point): _mean(runs, point) for point in DEMAND_POINTS},
    }


def label(p: dict[str, Any]) -> str:
    """The policy's name, and whether GPU nodes were tainted in its replay."""
    return f"{p['policy']}{' +taint' if p['gpu_nodes_tainted'] else ''}"


def reading(policies: Sequence[dict[str, Any]]) -> str:
    """Which policy allocates most at the highest demand replayed, against the default
    scheduler, and what leaving GPU nodes untainted costs a second scheduler."""
    point = max(
        (k for p in policies for k, v in p["alloc_pct"].items() if v is not None),
        key=int,
        default=None,
    )
    if point is None:
        return "no demand point was reached"
    scored = [p for p in policies if p["alloc_pct"][point] is not None]
    most = max(p["alloc_pct"][point] for p in scored)
    best = [p for p in scored if p["alloc_pct"][point] == most]  # more than one: a tie
    names = ", ".join(label(p) for p in best)
    if len(best) == len(scored) > 1:
        text = f"all {len(best)} policies tie at {point} % demand ({most:.2f} %"
    elif len(best) > 1:
        text = f"{names} tie for the most at {point} % demand ({most:.2f} %"
    else:
        text = f"{names} allocates most at {point} % demand ({most:.2f} %"
    default = [p for p in scored if p["policy"] == "k8s-default" and p not in best]
    if default:
        gain = most - default[0]["alloc_pct"][point]
        text += f", {gain:+.2f} points against {label(default[0])}"
    text += ")"
    for name in ("most-allocated", "extender"):
        pair = {
            p["gpu_nodes_tainted"]: p["alloc_pct"][point] for p in scored if p["policy"] == name
        }
        if len(pair) == 2 and pair[False] < pair[True]:
            text += (
                f"; untainted GPU nodes cost {name} {pair[True] - pair[False]:.2f} points: "
                "the default scheduler puts pods without GPUs on the empty GPU nodes it keeps"
            )
    return text + "."


def _mean(runs: Sequence[Run], point: int) -> float | None:
    values = [_pct(r.allocated_at.get(point), r) for r in runs]
    if any(v is None for v in values):
        return None
    return _round(sum(v for v in values if v is not None) / len(values), 2)


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
