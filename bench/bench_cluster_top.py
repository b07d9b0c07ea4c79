"""Cluster `gpuctl top` against a real Prometheus holding 10, 100 and 1,000 nodes x 8 GPUs
of DCGM-exporter data: time and CPU (gpuctl's process only) per frame, queries per frame.

Target: <= 250 ms of CPU per frame on the gpuctl side at 1,000 nodes, and a query count
that does not grow with the cluster. Reference measured in the same run: the floor any
client pays for the same answers (HTTP + json.loads of the three responses), decoded with
the cyclic garbage collector paused, as gpuctl's fetch runs.

    PYTHONPATH=. python bench/bench_cluster_top.py [--nodes 10,100,1000] [--frames 5]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpuctl.adapters.prometheus import Prometheus  # noqa: E402
from gpuctl.common.output import dump  # noqa: E402
from gpuctl.top import cluster_cli as top_cluster  # noqa: E402
from gpuctl.top import usage  # noqa: E402
from tests.standins.prometheus import start_prometheus  # noqa: E402

GPUS_PER_NODE = 8
WINDOW = "10m"


def write_openmetrics(path: str, nodes: int, now: float) -> None:
    """DCGM-exporter series as one exporter per node would give them: utilization with
    11 minutes of history (the window), the other gauges with their latest samples."""

    def labels(n, i):
        return (
            f'gpu="{i}",UUID="GPU-{n:05d}-{i}",device="nvidia{i}",modelName="NVIDIA H100 80GB HBM3",'
            f'Hostname="gpu-node-{n:04d}",DCGM_FI_DRIVER_VERSION="550.54.15",'
            f'instance="10.{n // 250}.{n % 250}.1:9400",job="dcgm-exporter",'
            f'pod="train-{n // 4}-worker-{n % 4}",namespace="team-{n % 17}",container="main"'
        )

    with open(path, "w") as f:
        f.write("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n")
        for n in range(nodes):
            for i in range(GPUS_PER_NODE):
                lab = labels(n, i)
                util = (n * 7 + i * 13) % 100
                for age in range(660, 0, -60):
                    f.write(f"DCGM_FI_DEV_GPU_UTIL{{{lab}}} {util} {now - age:.3f}\n")
        for name, value in (
            ("DCGM_FI_DEV_FB_USED", 40000),
            ("DCGM_FI_DEV_FB_FREE", 41559),
            ("DCGM_FI_DEV_GPU_TEMP", 55),
            ("DCGM_FI_DEV_POWER_USAGE", 412.5),
        ):
            f.write(f"# TYPE {name} gauge\n")
            for n in range(nodes):
                for i in range(GPUS_PER_NODE):
                    lab = labels(n, i)
                    for age in (60, 30):
                        f.write(f"{name}{{{lab}}} {value} {now - age:.3f}\n")
        f.write("# EOF\n")


def fill(nodes: int):
    def run(data_dir: str):
        os.makedirs(data_dir, exist_ok=True)
        om = os.path.join(os.path.dirname(data_dir), "data.om")
        write_openmetrics(om, nodes, time.time())
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", om, data_dir],
            check=True,
            capture_output=True,
            timeout=600,
        )
        os.remove(om)

    return run


def measure(fn, frames: int):
    walls, cpus, result = [], [], None
    for _ in range(frames):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000, result


def floor(url: str, queries: usage.Queries):
    """Reference: fetch and json-decode the same three answers, nothing else, with the cyclic
    garbage collector paused as gpuctl pauses it around its own fetch (decoding builds ~10^5
    objects: collector passes would otherwise cost the floor what gpuctl avoids)."""
    with top_cluster._cyclic_gc_paused():
        for expr in (queries.current, queries.attributes, queries.window_util):
            body = urllib.parse.urlencode({"query": expr}).encode()
            with urllib.request.urlopen(url + "/api/v1/query", data=body, timeout=60) as r:
                json.loads(r.read())


def bench(nodes: int, frames: int) -> dict:
    t0 = time.perf_counter()
    server = start_prometheus(fill(nodes), tmp=tempfile.mkdtemp(prefix="gpuctl-bench-"))
    load_s = time.perf_counter() - t0
    try:
        queries = usage.queries(WINDOW)
        client = Prometheus(server.url, timeout=60)
        client.query_all([queries.current])  # warm Prometheus's caches once
        fetch = lambda: top_cluster.fetch(client, queries, 5.0)  # noqa: E731

        sent0, served0 = client.queries_sent, server.query_requests()
        f_wall, f_cpu, frame = measure(fetch, frames)
        per_frame_client = (client.queries_sent - sent0) / frames
        per_frame_server = (server.query_requests() - served0) / frames
        assert frame.summary.gpus == nodes * GPUS_PER_NODE, frame.summary

        def live():
            from rich.console import Console

            console = Console(file=io.StringIO(), width=160, height=50, force_terminal=True)
            rows = max(5, 50 - 14 - min(len(frame.namespaces), top_cluster.LIVE_NAMESPACES))
            console.print(top_cluster.render(frame, WINDOW, 5.0, max_rows=rows))

        l_wall, l_cpu, _ = measure(live, frames)
        j_wall, j_cpu, _ = measure(lambda: dump(usage.frame_to_dict(frame), "json"), frames)
        t_wall, t_cpu, _ = measure(lambda: top_cluster.render_plain(frame, WINDOW, 5.0), frames)
        r_wall, r_cpu, _ = measure(lambda: floor(server.url, queries), frames)
        return dict(
            nodes=nodes,
            gpus=frame.summary.gpus,
            load_s=load_s,
            client_q=per_frame_client,
            server_q=per_frame_server,
            fetch_wall=f_wall,
            fetch_cpu=f_cpu,
            live_cpu=l_cpu,
            json_cpu=j_cpu,
            table_cpu=t_cpu,
            floor_wall=r_wall,
            floor_cpu=r_cpu,
        )
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="10,100,1000")
    ap.add_argument("--frames", type=int, default=5)
    args = ap.parse_args()
    print(
        f"{'nodes':>6} {'GPUs':>6} {'queries/frame':>14} {'fetch+aggregate':>22} "
        f"{'live frame':>11} {'json doc':>9} {'--once tbl':>10} {'frame CPU':>10} {'floor (HTTP+json)':>20} {'CPU vs floor':>13}"
    )
    print(
        f"{'':>6} {'':>6} {'client/server':>14} {'wall ms / CPU ms':>22} {'CPU ms':>11} "
        f"{'CPU ms':>9} {'CPU ms':>10} {'live, ms':>10} {'wall ms / CPU ms':>20}"
    )
    results = []
    for n in (int(x) for x in args.nodes.split(",")):
        r = bench(n, args.frames)
        results.append(r)
        frame_cpu = r["fetch_cpu"] + r["live_cpu"]
        print(
            f"{r['nodes']:>6} {r['gpus']:>6} {r['client_q']:>6g}/{r['server_q']:<7g} "
            f"{r['fetch_wall']:>11.0f} / {r['fetch_cpu']:<8.0f} {r['live_cpu']:>11.0f} "
            f"{r['json_cpu']:>9.0f} {r['table_cpu']:>10.0f} {frame_cpu:>10.0f} {r['floor_wall']:>9.0f} / {r['floor_cpu']:<8.0f} "
            f"{frame_cpu / max(r['floor_cpu'], 1e-9):>12.2f}x",
            flush=True,
        )
    big = results[-1]
    frame_cpu = big["fetch_cpu"] + big["live_cpu"]
    print(
        f"\n{big['gpus']} GPUs: {frame_cpu:.0f} ms CPU per live frame on the gpuctl side "
        f"(target <= 250 ms: {'met' if frame_cpu <= 250 else 'NOT met'}); "
        f"queries per frame {sorted({r['server_q'] for r in results})} across "
        f"{[r['nodes'] for r in results]} nodes (constant: "
        f"{'yes' if len({r['server_q'] for r in results}) == 1 else 'NO'})."
    )
    return 0 if frame_cpu <= 250 and len({r["server_q"] for r in results}) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
