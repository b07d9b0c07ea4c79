"""`gpuctl whatif` speed: one replay of the openb default trace (1,213 nodes, 8,152 pods,
resampled to 130 % of the GPU capacity) under each policy. Targets: under 2 s for each
policy but fgd and extender (which compute fragmentation), under 30 s for those.

Reference, measured in the same run: the bare loop every replay makes — each arriving pod
compared with every node's free CPU in one array operation and put on the first node with
room — so that a slower or busier machine shows in both. Reference and replay run in turn,
RUNS times each; each keeps its best time, the one least disturbed by whatever else the
machine runs. The targets apply to CPU time, which a machine busy with other work disturbs
much less than wall time (both are printed). Needs the trace (tests/whatif/openb.py says
where it is looked for).

Run: python bench/bench_whatif.py
"""

from __future__ import annotations

import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from gpuctl.gpus.fragmentation import typical_shapes  # noqa: E402
from gpuctl.whatif.core import replay as rp  # noqa: E402
from tests.whatif.openb import load, openb_dir  # noqa: E402

DEMAND, SEED = 1300, 42
TARGET = {"fgd": 30.0, "extender": 30.0}  # seconds; the others 2 s
RUNS = {"fgd": 2, "extender": 2}  # the others 3


def timed(fn, *args, **kwargs):
    """(CPU seconds, wall seconds, result) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn(*args, **kwargs)
    return time.process_time() - cpu, time.perf_counter() - wall, result


def bare_loop(nodes, order) -> None:
    cpu_free = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
    for pod in order:
        fits = cpu_free >= pod.cpu_milli
        if fits.any():
            cpu_free[int(np.argmax(fits))] -= pod.cpu_milli


def main() -> int:
    if openb_dir() is None:
        print("the openb trace is not there: set GPUCTL_OPENB_DIR (see tests/whatif/openb.py)")
        return 2
    nodes, pods = load()
    shapes = typical_shapes(pods)
    capacity = sum(n.gpus for n in nodes) * 1000
    order = rp.arrivals(pods, capacity * DEMAND // 1000, random.Random(SEED))
    print(f"{len(nodes):,} nodes, {len(order):,} pod arrivals (130 % demand, seed {SEED})")
    missed = 0
    for policy in rp.POLICIES:
        ref = t = wall = float("inf")
        for _ in range(RUNS.get(policy, 3)):
            ref = min(ref, timed(bare_loop, nodes, order)[0])
            cpu, seconds, run = timed(rp.replay, nodes, pods, policy, SEED, DEMAND, shapes=shapes)
            t, wall = min(t, cpu), min(wall, seconds)
        target = TARGET.get(policy, 2.0)
        missed += t >= target
        print(
            f"{policy:<15} CPU {t:6.2f} s = {t / ref:5.1f}x the reference ({ref:.3f} s), "
            f"wall {wall:6.2f} s; target < {target:g} s: {'met' if t < target else 'MISSED'}; "
            f"allocated at 130 %: {run.allocated_at[130] * 100 / run.capacity:.2f} %"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
