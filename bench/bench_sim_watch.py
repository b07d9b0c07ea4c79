"""What a tick of the sandbox's controllers (gpuctl.sim.controllers.Simulation) costs the
API server, before and after issue 41:

- before: each tick listed the six kinds it acts on (nodes, deployments, replicasets,
  jobsets, jobs, pods) and ResourceClaims (Kueue's five kinds too, with --kueue), every
  object of each, every second;
- after: an informer per kind, listed once; each tick catches up by a watch per kind from
  the resourceVersion reached, read to its first bookmark.

Each side runs on a fresh API emulator seeded as `gpuctl sandbox` seeds it (CLUSTER's
nodes), with JOBS Jobs of PODS pods in all (1 GPU each, running for an hour): WARMUP ticks
until they run, then TICKS ticks measured, one node label changed before each (a user's
write). The controllers talk to the emulator through a TCP relay that counts connections
(urllib sends one request per connection) and bytes both ways, so every request of the
tick counts: the reads and what the step writes.

Run: python bench/bench_sim_watch.py [CLUSTER PODS]   (default: the sandbox's default
cluster with 8 pods; e.g. 40xH100-80GB 300 for a bigger one)
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpuctl.sim import cluster, mig_manager  # noqa: E402
from gpuctl.sim.controllers import BOOKMARK_S, WATCHED, Api, Simulation, World  # noqa: E402
from gpuctl.sim.kube import KubeEmulator  # noqa: E402
from gpuctl.sim.sandbox import seed  # noqa: E402

CLUSTER = sys.argv[1] if len(sys.argv) > 2 else cluster.DEFAULT_NODES
PODS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
JOBS = max(PODS // 10, 1)
WARMUP = 6
TICKS = 5


class Relay:
    """Forwards TCP connections to the emulator, counting them and their bytes."""

    def __init__(self, target: str):
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.lock = threading.Lock()
        self.requests = self.bytes = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def counts(self) -> tuple[int, int]:
        with self.lock:
            return self.requests, self.bytes

    def _accept(self) -> None:
        while True:
            client, _ = self.server.accept()
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.requests += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                with self.lock:
                    self.bytes += len(data)
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Listing(Simulation):
    """The controllers as before issue 41: every tick lists what it reads."""

    def read(self) -> World:
        objects = {path: self.api.items(path) for path in self.informers}
        nodes, deployments, replicasets, jobsets, jobs, pods = (objects.pop(p) for p in WATCHED)
        return World(nodes, deployments, replicasets, jobsets, jobs, pods, objects)


def job(name: str, pods: int) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    pod = {
        "metadata": {"annotations": {"gpuctl.io/sandbox-runtime": "3600"}},
        "spec": {
            "containers": [container],
            "restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        },
    }
    return {
        "metadata": {"name": name},
        "spec": {"parallelism": pods, "completions": pods, "template": pod},
    }


def measured(kind: type[Simulation], relay: Relay) -> type[Simulation]:
    class Measured(kind):  # type: ignore[valid-type,misc]
        """KIND whose reads are counted: (requests, bytes, seconds) of the last one."""

        last = (0, 0, 0.0)

        def read(self) -> World:
            (requests, sent), started = relay.counts(), time.perf_counter()
            world = super().read()
            now = relay.counts()
            self.last = (now[0] - requests, now[1] - sent, time.perf_counter() - started)
            return world

    return Measured


def run(kind: type[Simulation]) -> dict[str, float]:
    """Per measured tick (median): requests and bytes of the read and of the whole tick,
    and the read's wall time."""
    emu = KubeEmulator().start()
    try:
        emu.bookmark_every(BOOKMARK_S)
        emu.install_crds("JobSet")
        layouts = mig_manager.shipped_layouts()
        nodes = cluster.node_objects(cluster.parse_nodes(CLUSTER, layouts), layouts)
        direct = Api(emu.url)
        seed(direct, nodes, kueue=False)
        for i in range(JOBS):
            direct.create("/apis/batch/v1/namespaces/default/jobs", job(f"train-{i}", PODS // JOBS))
        gpus = {n["metadata"]["name"]: mig_manager.hardware(n, layouts) for n in nodes}
        relay = Relay(emu.url)
        sim = measured(kind, relay)(Api(relay.url), {k: v for k, v in gpus.items() if v}, emu)
        rows = []
        for tick in range(WARMUP + TICKS):
            name = nodes[tick % len(nodes)]["metadata"]["name"]
            direct.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": {"tick": str(tick)}}})
            start = relay.counts()
            world = sim.step()
            end = relay.counts()
            emu.forget_requests()
            if tick >= WARMUP:
                running = sum(
                    1 for p in world.pods if p.get("status", {}).get("phase") == "Running"
                )
                rows.append((*sim.last, end[0] - start[0], end[1] - start[1], running))  # type: ignore[attr-defined]
        return {
            "read requests": median(r[0] for r in rows),
            "read kB": median(r[1] for r in rows) / 1e3,
            "read ms": median(r[2] for r in rows) * 1e3,
            "tick requests": median(r[3] for r in rows),
            "tick kB": median(r[4] for r in rows) / 1e3,
            "pods running": min(r[5] for r in rows),
        }
    finally:
        emu.stop()


def median(values: Any) -> float:
    ordered = sorted(values)
    return float(ordered[len(ordered) // 2])


def main() -> None:
    print(f"cluster {CLUSTER}, {JOBS} Jobs of {PODS} pods; median of {TICKS} ticks")
    before, after = run(Listing), run(Simulation)
    for key in before:
        print(f"  {key:<14} before {before[key]:>9.1f}   after {after[key]:>9.1f}")


if __name__ == "__main__":
    main()
