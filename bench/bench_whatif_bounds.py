"""`gpuctl whatif` on oversized traces: a 200 MB node CSV and a 200 MB pod CSV (millions of
rows, far past the row limits) must be refused in bounded memory and time, read as they
stream, never held whole.

Reference, measured in the same run: a bare reader in the same interpreter that imports the
same modules and reads the file line by line, parsing nothing. Targets: gpuctl's peak RSS
at most the reference's + 128 MiB, and its wall time at most 5 × the reference's + 2 s
(it stops at the row limit, the reference reads the whole file).

Run: python bench/bench_whatif_bounds.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from benchenv import child_env

SIZE = 200 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MEASURE = """
import resource, sys, time
from gpuctl.whatif import service
from gpuctl.common.errors import SpecError
nodes, pods, bare = sys.argv[1], sys.argv[2], sys.argv[3] == "bare"
t = time.perf_counter()
said = ""
if bare:
    for path in (nodes, pods):
        with open(path, "rb") as f:
            for line in f:
                pass
else:
    try:
        service.read_trace(nodes, pods)
    except SpecError as e:
        said = e.message
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, said)
"""


def write(path: str, header: str, row: str) -> None:
    with open(path, "w") as f:
        f.write(header)
        i = 0
        while f.tell() < SIZE:
            f.write("".join(row.format(i=i + k) for k in range(10_000)))
            i += 10_000


def measure(nodes: str, pods: str, mode: str) -> tuple[float, int, str]:
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, nodes, pods, mode],
        cwd=ROOT,
        env=child_env(PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split(maxsplit=2)
    return float(out[0]), int(out[1]), out[2].strip() if len(out) > 2 else ""


def main() -> int:
    status = 0
    with tempfile.TemporaryDirectory() as d:
        small_nodes = os.path.join(d, "small-nodes.csv")
        with open(small_nodes, "w") as f:
            f.write("sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,H100\n")
        small_pods = os.path.join(d, "small-pods.csv")
        with open(small_pods, "w") as f:
            f.write("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,1000\n")
        big_nodes, big_pods = os.path.join(d, "nodes.csv"), os.path.join(d, "pods.csv")
        t = time.perf_counter()
        write(big_nodes, "sn,cpu_milli,memory_mib,gpu,model\n", "node-{i},96000,786432,8,H100\n")
        write(big_pods, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "p{i},1000,1024,1,500\n")
        print(f"wrote 2 × {SIZE >> 20} MB in {time.perf_counter() - t:.1f} s")
        for what, nodes, pods in (
            ("node CSV", big_nodes, small_pods),
            ("pod CSV", small_nodes, big_pods),
        ):
            ref_s, ref_kib, _ = measure(nodes, pods, "bare")
            s, kib, said = measure(nodes, pods, "gpuctl")
            rss_ok = kib <= ref_kib + 128 * 1024
            time_ok = s <= 5 * ref_s + 2
            print(
                f"200 MB {what}: gpuctl {s:.2f} s, peak RSS {kib / 1024:.0f} MiB "
                f"(reference {ref_s:.2f} s, {ref_kib / 1024:.0f} MiB): "
                f"{'ok' if rss_ok and time_ok else 'OVER TARGET'} — {said!r}"
            )
            status |= 0 if rss_ok and time_ok and said else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
