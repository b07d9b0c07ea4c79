"""`gpuctl whatif` per policy as deployed, on the openb default trace at 130 % demand, seeds
42-51 (the FGD paper's artifact's replay): mean GPU allocation at 130 %, the demand at the
first failed GPU pod, whole 8-GPU nodes free at 50 % demand, and the replay's CPU time per
seed. most-allocated and extender run as second schedulers (pods without GPUs on the
default scheduler), with GPU nodes untainted and tainted NoSchedule.

Checks (issue 25): extender +taint ≥ 95.2 % mean allocation, first GPU-pod failure ≥ 94 %
demand, ≥ 280 whole 8-GPU nodes at 50 %; most-allocated +taint ≥ 94.0 % and ≥ 350 whole
nodes; most-allocated untainted below k8s-default (the loss `whatif` must show).
Takes some minutes (fgd is the slowest policy). Needs the trace (tests/whatif/openb.py).

Run: python bench/bench_whatif_policies.py [POLICY,...]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpuctl.gpus.fragmentation import typical_shapes  # noqa: E402
from gpuctl.whatif.core import replay as rp  # noqa: E402
from tests.whatif.openb import load, openb_dir  # noqa: E402

SEEDS = range(42, 52)
DEMAND = 1300


def main() -> int:
    if openb_dir() is None:
        print("the openb trace is not there: set GPUCTL_OPENB_DIR (see tests/whatif/openb.py)")
        return 2
    nodes, pods = load()
    shapes = typical_shapes(pods)
    eight = [n for n in nodes if n.gpus == 8]
    policies = sys.argv[1].split(",") if len(sys.argv) > 1 else list(rp.POLICIES)
    print(
        f"openb: {len(nodes):,} nodes ({len(eight)} with 8 GPUs), {len(pods):,} pods; 130 % demand"
    )
    print(
        f"{'policy':<22} {'alloc@130':>9} {'first fail':>10} {'whole@50':>8} {'8-GPU':>6} {'s/seed':>7}"
    )
    results = {}
    for policy in policies:
        for tainted in (False, True):
            t0 = time.process_time()
            runs = [
                rp.replay(nodes, pods, policy, s, DEMAND, shapes=shapes, gpu_nodes_tainted=tainted)
                for s in SEEDS
            ]
            per_seed = (time.process_time() - t0) / len(runs)
            alloc = statistics.mean(r.allocated_at[130] * 100 / r.capacity for r in runs)
            fails = [r.first_gpu_failure for r in runs if r.first_gpu_failure is not None]
            fail = statistics.mean(f * 100 / runs[0].capacity for f in fails) if fails else None
            whole = statistics.mean(r.whole_nodes_at[50] for r in runs)
            whole8 = statistics.mean(r.whole_largest_at[50] for r in runs)
            name = f"{policy}{' +taint' if tainted else ''}"
            results[name] = (alloc, fail, whole8)
            fail_text = f"{fail:.2f}" if fail is not None else "-"
            print(
                f"{name:<22} {alloc:9.2f} {fail_text:>10} {whole:8.1f} {whole8:6.1f} {per_seed:7.2f}",
                flush=True,
            )
    checks = []
    if "extender +taint" in results:
        alloc, fail, whole8 = results["extender +taint"]
        checks.append(("extender +taint ≥ 95.2 %, failure ≥ 94 %, ≥ 280 whole 8-GPU nodes",
                       alloc >= 95.2 and (fail or 100) >= 94 and whole8 >= 280))  # fmt: skip
    if "most-allocated +taint" in results:
        alloc, _, whole8 = results["most-allocated +taint"]
        checks.append(("most-allocated +taint ≥ 94.0 %, ≥ 350 whole 8-GPU nodes",
                       alloc >= 94.0 and whole8 >= 350))  # fmt: skip
    if "most-allocated" in results and "k8s-default" in results:
        checks.append(("most-allocated untainted below k8s-default",
                       results["most-allocated"][0] < results["k8s-default"][0]))  # fmt: skip
    for text, ok in checks:
        print(f"{text}: {'met' if ok else 'MISSED'}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
