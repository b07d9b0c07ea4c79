"""What the benchmarks share: the environment their subprocesses run in, and timing."""

import os
import statistics
import time


def child_env(**extra: str) -> dict:
    """This environment without PYTHONDONTWRITEBYTECODE, plus `extra`: gpuctl then runs from
    compiled bytecode after the first (warm-up) run, as an installed package does — the
    reference tools (nvitop, gpustat) were compiled when pip installed them."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def median(fn, runs: int, warm: bool = False) -> float:
    """Median wall seconds of `runs` calls of fn (after one untimed call if `warm`)."""
    if warm:
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
