"""`gpuctl report --html` against a real Prometheus holding a day of DCGM-exporter data for
1,000 and 10,000 teams (a namespace each, one pod holding one H100; backfilled with
promtool: see the setup times printed).

Per team count: the wall time and peak memory of `gpuctl report -o json` (the reference,
measured in the same run: the range queries and the aggregation, no page) and of the same
run with `--html PAGE`, the page's size, and the ratio of the two times. `--teams` keeps
its default (the largest teams one by one, the rest summed as "others").

Targets (docs/report.md): the page under 1 MB whatever the number of teams; the page costs
at most 5 s over the reference. Exit status 1 when one is missed. Nearly all of either run
is Prometheus evaluating the report's range queries (gpuctl/report/core/queries.py): each
query may take up to --timeout seconds here (GPUCTL_REQUEST_TIMEOUT), where a busy 2-core
machine needs minutes for 10,000 teams.

    PYTHONPATH=. python bench/bench_report.py [--teams 1000,10000] [--window 1d] [--timeout 600]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchenv import child_env  # noqa: E402

from gpuctl.dcgm.promql import duration_seconds  # noqa: E402
from tests.standins.prometheus import start_prometheus  # noqa: E402

STEP_S = 300  # one sample per report step (5m, the default)
PAGE_LIMIT = 1 << 20  # docs/report.md: the page stays under 1 MB
HTML_BUDGET_S = 5.0  # what the page may add to the reference run


def write_openmetrics(path: str, teams: int, start: float, end: float) -> None:
    """SM_ACTIVE and GPU_UTIL of one H100 per team, held by team-NNNNN/train-0: a third
    idle, the rest busy at a team's own level."""
    times = [start + k * STEP_S for k in range(int((end - start) // STEP_S) + 1)]
    with open(path, "w") as f:
        for name, scale in (("DCGM_FI_PROF_SM_ACTIVE", 1.0), ("DCGM_FI_DEV_GPU_UTIL", 100.0)):
            f.write(f"# TYPE {name} gauge\n")
            for i in range(teams):
                node, gpu = divmod(i, 8)
                labels = (
                    f'gpu="{gpu}",UUID="GPU-{i:08d}",device="nvidia{gpu}",'
                    f'modelName="NVIDIA H100 80GB HBM3",Hostname="node-{node:05d}",'
                    f'container="main",namespace="team-{i:05d}",pod="train-0",'
                    f'instance="node-{node:05d}:9400",job="dcgm-exporter"'
                )
                busy = 0.01 if i % 3 == 0 else 0.2 + (i % 7) / 10
                value = f"{busy * scale:g}"
                f.writelines(f"{name}{{{labels}}} {value} {t:.0f}\n" for t in times)
        f.write("# EOF\n")


def load(teams: int, start: float, end: float, times: dict):
    def fill(data_dir: str) -> None:
        os.makedirs(data_dir, exist_ok=True)
        om = os.path.join(os.path.dirname(data_dir), "data.om")
        t0 = time.perf_counter()
        write_openmetrics(om, teams, start, end)
        times["write"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        hours = math.ceil((end - start) / 3600) + 2
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics"]
            + [f"--max-block-duration={hours}h", om, data_dir],
            check=True,
            capture_output=True,
            timeout=3600,
        )
        times["promtool"] = time.perf_counter() - t0
        os.remove(om)

    return fill


def run(url: str, window: str, end: float, *extra: str, timeout: int = 600) -> tuple[float, float]:
    """Wall seconds and peak memory (MiB) of one `gpuctl report` in its own process."""
    argv = [sys.executable, "-m", "gpuctl", "report", "--prometheus", url, "--window", window]
    argv += ["--end", f"{end:.0f}", "-o", "json", *extra]
    code = (
        "import resource, subprocess, sys, time\n"
        "t0 = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
        "wall = time.perf_counter() - t0\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "sys.exit(p.stderr.decode()[-2000:]) if p.returncode else print(wall, rss)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=root,
        env=child_env(GPUCTL_REQUEST_TIMEOUT=str(timeout)),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode:
        raise SystemExit(f"gpuctl report failed: {proc.stderr}")
    wall, rss = proc.stdout.split()
    return float(wall), float(rss)


def measure(teams: int, window: str, timeout: int) -> bool:
    window_s = duration_seconds(window, "--window")
    end = math.floor(time.time() / STEP_S) * STEP_S - STEP_S
    times: dict[str, float] = {}
    server = start_prometheus(load(teams, end - window_s - 2 * STEP_S, end, times))
    tmp = tempfile.mkdtemp(prefix="gpuctl-bench-report-")
    try:
        page = os.path.join(tmp, "report.html")
        json_s, json_mib = run(server.url, window, end, timeout=timeout)
        html_s, html_mib = run(server.url, window, end, "--html", page, timeout=timeout)
        size = os.path.getsize(page)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{teams:>6,} teams, {window} at 5m (setup: write {times['write']:.1f} s, promtool "
        f"{times['promtool']:.1f} s)\n"
        f"  reference -o json   {json_s:7.1f} s  {json_mib:7.0f} MiB\n"
        f"  with --html         {html_s:7.1f} s  {html_mib:7.0f} MiB   ratio {html_s / json_s:.2f}\n"
        f"  page                {size / 1024:7.0f} KiB (limit {PAGE_LIMIT // 1024} KiB)",
        flush=True,
    )
    return size < PAGE_LIMIT and html_s - json_s <= HTML_BUDGET_S


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--teams", default="1000,10000")
    parser.add_argument("--window", default="1d")
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args()
    ok = [measure(int(n), args.window, args.timeout) for n in args.teams.split(",")]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
