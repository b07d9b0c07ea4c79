"""The exhaustive reference for MIG planning, independent of gpuctl's own layout code: every
layout one GPU can hold, by brute force over the placements in gpuctl/data/mig_geometry.json,
and the fewest GPUs for a demand, by memoised search over those layouts.

Shared by tests/mig/test_plan.py and bench/bench_mig.py, so that a bug in gpuctl's
enumeration shows up as a disagreement with this one.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path

GEOMETRY = Path(__file__).resolve().parents[2] / "gpuctl" / "data" / "mig_geometry.json"


@cache
def _gpus() -> dict[str, dict]:
    return {g["nvml_name"]: g for g in json.loads(GEOMETRY.read_text())}


def _allowed(gpu: dict, names: list[str]) -> bool:
    """The rules that do not depend on positions (NVML's, as nvml.h and the MIG guide state
    them): each profile's max instances, the GPU's max instances and compute slices, and one
    set of media engines (at most one +me instance; a +me.all one only beside -me ones)."""
    profiles = {p["name"]: p for p in gpu["profiles"]}
    counts = Counter(names)
    media = sum(n for name, n in counts.items() if name.endswith("+me"))
    me_all = any(name.endswith("+me.all") for name in names)
    return (
        all(n <= profiles[name]["max_instances"] for name, n in counts.items())
        and len(names) <= gpu["max_gpu_instances"]
        and sum(profiles[name]["slices"] for name in names) <= gpu["compute_slices_total"]
        and media <= 1
        and (not me_all or sum(not name.endswith("-me") for name in names) == 1)
    )


@cache
def gpu_layouts(nvml_name: str) -> frozenset[frozenset[tuple[str, int]]]:
    """Every multiset of profiles one GPU holds, as frozensets of (profile, count): found by
    trying every set of non-overlapping (profile, start) placements, no pruning by count."""
    gpu = _gpus()[nvml_name]
    placements = []
    for p in gpu["profiles"]:
        for start in p["placements_start"]:
            if start + p["placement_size"] <= gpu["memory_slices_total"]:
                placements.append((p["name"], ((1 << p["placement_size"]) - 1) << start))
    found = set()

    def extend(first: int, used: int, names: list[str]) -> None:
        found.add(frozenset(Counter(names).items()))
        for i in range(first, len(placements)):
            name, mask = placements[i]
            if used & mask or not _allowed(gpu, names + [name]):
                continue
            extend(i + 1, used | mask, names + [name])

    extend(0, 0, [])
    return frozenset(found)


def fewest_gpus(nvml_name: str, demand: dict[str, int]) -> int:
    """Fewest GPUs of this model that hold `demand` ({profile: count}, counts > 0): each GPU
    takes one of gpu_layouts, every way tried (memoised on what is left)."""
    names = sorted(demand)
    distinct = {tuple(dict(lay).get(n, 0) for n in names) for lay in gpu_layouts(nvml_name)}
    layouts = [lay for lay in distinct if any(lay)]

    @cache
    def f(left: tuple) -> int:
        if not any(left):
            return 0
        return 1 + min(
            f(tuple(max(0, a - b) for a, b in zip(left, lay)))
            for lay in layouts
            if any(a and b for a, b in zip(left, lay))
        )

    return f(tuple(demand[n] for n in names))
