"""Start-up cost: median wall time of `gpuctl --help` and `gpuctl render` against
`nvitop --help`, all measured in this run. Targets: --help ≤ 0.6×, render ≤ 0.8× nvitop's --help."""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

from benchenv import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
RUNS = int(os.environ.get("BENCH_RUNS", "21"))


def median_wall(cmd: list[str]) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of a command."""
    env = child_env(PYTHONPATH=ROOT)
    subprocess.run(cmd, capture_output=True, env=env, check=True)  # warm the file cache
    walls, cpus = [], []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env, check=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    nvitop = shutil.which("nvitop", path=BIN) or shutil.which("nvitop")
    if not nvitop:
        print("nvitop is not installed (pip install '.[bench]'); cannot measure the reference")
        return 1
    gpuctl = [sys.executable, "-m", "gpuctl"]
    ref, ref_cpu = median_wall([nvitop, "--help"])
    rows = [
        ("gpuctl --help", median_wall(gpuctl + ["--help"]), 0.6),
        (
            "gpuctl render examples/seed-pod.yaml",
            median_wall(gpuctl + ["render", os.path.join(ROOT, "examples", "seed-pod.yaml")]),
            0.8,
        ),
    ]
    print(
        f"reference: nvitop --help  median {ref * 1000:.0f} ms wall, {ref_cpu * 1000:.0f} ms CPU"
        f" over {RUNS} runs (the CPU ratio is the steadier one on a busy machine)"
    )
    ok = True
    for name, (t, cpu), target in rows:
        ratio = t / ref
        ok &= ratio <= target
        print(
            f"{name:<40} {t * 1000:6.0f} ms  ratio {ratio:.2f}  (target ≤ {target})"
            f"  {'OK' if ratio <= target else 'MISSED'}   CPU ratio {cpu / ref_cpu:.2f}"
        )
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
