"""Start-up cost: median wall time of `gpuctl --help` and `gpuctl render` against
`nvitop --help`, all measured in this run. Targets: --help ≤ 0.6×, render ≤ 0.8× nvitop's --help."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
RUNS = int(os.environ.get("BENCH_RUNS", "21"))


def median_wall(cmd: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run(cmd, capture_output=True, env=env, check=True)  # warm the file cache
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    nvitop = shutil.which("nvitop", path=BIN) or shutil.which("nvitop")
    if not nvitop:
        print("nvitop is not installed (pip install '.[bench]'); cannot measure the reference")
        return 1
    gpuctl = [sys.executable, "-m", "gpuctl"]
    ref = median_wall([nvitop, "--help"])
    rows = [
        ("gpuctl --help", median_wall(gpuctl + ["--help"]), 0.6),
        ("gpuctl render examples/seed-pod.yaml",
         median_wall(gpuctl + ["render", os.path.join(ROOT, "examples", "seed-pod.yaml")]), 0.8),
    ]
    print(f"reference: nvitop --help  median {ref * 1000:.0f} ms over {RUNS} runs")
    ok = True
    for name, t, target in rows:
        ratio = t / ref
        ok &= ratio <= target
        print(f"{name:<40} {t * 1000:6.0f} ms  ratio {ratio:.2f}  (target ≤ {target})"
              f"  {'OK' if ratio <= target else 'MISSED'}")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
