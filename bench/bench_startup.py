"""Start-up cost: median CPU time (user + system) of `gpuctl --help` and `gpuctl render`
against `nvitop --help`, all measured in this run, the three taking turns. Targets: --help
and render ≤ 0.8× nvitop's --help. CPU time, not wall time: on a shared machine the
wall time measures the neighbours too."""

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


def _run(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, env=env, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def medians(cmds: list[list[str]]) -> list[tuple[float, float]]:
    """Median wall and CPU time of each command. The commands take turns, run after run, so
    a busy machine's slow spells fall on all of them alike."""
    env = child_env(PYTHONPATH=ROOT)
    for cmd in cmds:
        subprocess.run(cmd, capture_output=True, env=env, check=True)  # warm the file cache
    runs: list[list[tuple[float, float]]] = [[] for _ in cmds]
    for _ in range(RUNS):
        for cmd, times in zip(cmds, runs):
            times.append(_run(cmd, env))
    return [
        (statistics.median(w for w, _ in times), statistics.median(c for _, c in times))
        for times in runs
    ]


def main() -> int:
    nvitop = shutil.which("nvitop", path=BIN) or shutil.which("nvitop")
    if not nvitop:
        print("nvitop is not installed (pip install '.[bench]'); cannot measure the reference")
        return 1
    gpuctl = [sys.executable, "-m", "gpuctl"]
    # name, command, target for its CPU time as a multiple of nvitop --help's
    measured = [
        ("gpuctl --help", gpuctl + ["--help"], 0.8),
        (
            "gpuctl render examples/seed-pod.yaml",
            gpuctl + ["render", os.path.join(ROOT, "examples", "seed-pod.yaml")],
            0.8,
        ),
    ]
    (ref, ref_cpu), *times = medians([[nvitop, "--help"]] + [cmd for _, cmd, _ in measured])
    rows = [(name, t, target) for (name, _, target), t in zip(measured, times)]
    print(
        f"reference: nvitop --help  median {ref * 1000:.0f} ms wall, {ref_cpu * 1000:.0f} ms CPU"
        f" over {RUNS} runs (the CPU ratio is the steadier one on a busy machine)"
    )
    ok = True
    for name, (t, cpu), target in rows:
        ratio = cpu / ref_cpu
        ok &= ratio <= target
        print(
            f"{name:<40} {cpu * 1000:6.0f} ms CPU  ratio {ratio:.2f}  (target ≤ {target})"
            f"  {'OK' if ratio <= target else 'MISSED'}   wall ratio {t / ref:.2f}"
        )
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
