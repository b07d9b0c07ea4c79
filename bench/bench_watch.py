"""What the scheduler extender's view costs the API server per watch round (60 s in
production; ROUND_S here, the bytes do not depend on it), at NODES nodes and PODS pods on the
API emulator, with CHANGES pod changes in each round:

- before (gpuctl up to issue 41): each round listed nodes and pods, then watched both with
  no resourceVersion, so each watch began by sending every object again as ADDED;
- after (gpuctl.k8s.informer): watches from the newest resourceVersion with bookmarks; a
  list only at the start (and on 410 Gone).

Requests and response bytes are counted on the wire (urllib against the emulator). Then the
extender itself (gpuctl.sched.extender.keep_in_sync) runs ROUNDS rounds and the lists and
watches the emulator served are counted.

Run: python bench/bench_watch.py [PODS]
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.request
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpuctl.sim.kube import KubeEmulator, write_kubeconfig  # noqa: E402

PODS = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
NODES = max(PODS // 16, 1)
CHANGES = 10
ROUND_S = 2
ROUNDS = 3


def send(url: str, method: str, path: str, body: dict | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=ROUND_S + 30) as r:
        return r.read()


def seed(emu: KubeEmulator) -> None:
    """NODES nodes and PODS pods put straight into the emulator's store, stamped as its
    creates stamp them (kmock's creates over HTTP slow down as the store grows)."""
    import kmock

    def put() -> None:
        server = emu.emulator
        limits = {"nvidia.com/gpu": "1"}
        for i in range(NODES + PODS):
            server._revision += 1
            stamp = {"resourceVersion": str(server._revision), "uid": f"uid-{i}"}
            key: tuple[Any, str | None, str]
            if i < NODES:
                key = (kmock.resource("", "v1", "nodes"), None, f"gpu-{i}")
                alloc = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}
                obj: dict[str, Any] = {"metadata": {"name": key[2], **stamp}}
                obj["status"] = {"allocatable": alloc}
            else:
                key = (kmock.resource("", "v1", "pods"), "ml", f"p-{i - NODES}")
                container = {"name": "c", "image": "x", "resources": {"limits": limits}}
                obj = {
                    "metadata": {"name": key[2], "namespace": "ml", **stamp},
                    "spec": {"nodeName": f"gpu-{i % NODES}", "containers": [container]},
                    "status": {"phase": "Running"},
                }
            kind = "Node" if i < NODES else "Pod"
            server._objects[key] = {"apiVersion": "v1", "kind": kind, **obj}
        server._sent = server._revision

    emu.call(put)


def changes(url: str, round_no: int) -> None:
    for i in range(CHANGES):
        patch = {"metadata": {"annotations": {"round": str(round_no)}}}
        data = json.dumps(patch).encode()
        req = urllib.request.Request(
            f"{url}/api/v1/namespaces/ml/pods/p-{i}",
            data=data,
            method="PATCH",
            headers={"Content-Type": "application/merge-patch+json"},
        )
        urllib.request.urlopen(req, timeout=30).read()


def one_round(url: str, versions: dict[str, str] | None) -> tuple[int, int]:
    """(requests, bytes) of one round: the old one (VERSIONS None) or the informer's."""
    paths = ("/api/v1/nodes", "/api/v1/pods")
    sizes: list[int] = []

    def watch(path: str) -> None:
        query = f"watch=true&timeoutSeconds={ROUND_S}"
        if versions is not None:
            query += f"&resourceVersion={versions[path]}&allowWatchBookmarks=true"
        body = send(url, "GET", f"{path}?{query}")
        sizes.append(len(body))
        if versions is not None:
            for line in body.splitlines():
                event = json.loads(line)
                rv = event["object"]["metadata"].get("resourceVersion")
                versions[path] = rv or versions[path]

    if versions is None:
        sizes.extend(len(send(url, "GET", path)) for path in paths)
    threads = [threading.Thread(target=watch, args=(p,)) for p in paths]
    for t in threads:
        t.start()
    time.sleep(0.3)
    changes(url, len(sizes))
    for t in threads:
        t.join()
    return len(sizes), sum(sizes)


def extender_rounds(emu: KubeEmulator, folder: str) -> tuple[int, int]:
    """(lists, watches) the emulator served while the extender ran ROUNDS rounds."""
    from gpuctl.adapters.kube import Kube
    from gpuctl.sched import extender as ext
    from gpuctl.sched.core.extender import ClusterView

    os.environ["KUBECONFIG"] = write_kubeconfig(os.path.join(folder, "kubeconfig"), emu.url)
    emu.forget_requests()
    state = ext.Extender(ClusterView("nvidia.com/gpu.product"), ext.Log(lambda line: None))
    stop = threading.Event()
    thread = threading.Thread(target=ext.keep_in_sync, args=(state, Kube, stop, ROUND_S))
    thread.start()
    state.ready.wait(120)
    for r in range(ROUNDS):
        changes(emu.url, 100 + r)
        time.sleep(ROUND_S)
    stop.set()
    thread.join(ROUND_S + 30)
    served = [(p, q) for _, p, q in emu.requests() if p in ("/api/v1/nodes", "/api/v1/pods")]
    return sum("watch" not in q for _, q in served), sum("watch" in q for _, q in served)


def main() -> None:
    import tempfile

    emu = KubeEmulator().start()
    try:
        started = time.monotonic()
        seed(emu)
        print(f"{NODES} nodes, {PODS} pods seeded in {time.monotonic() - started:.0f} s")
        before = one_round(emu.url, None)
        listed = json.loads(send(emu.url, "GET", "/api/v1/pods"))["metadata"]["resourceVersion"]
        versions = {"/api/v1/nodes": listed, "/api/v1/pods": listed}
        one_round(emu.url, versions)  # the first round after the list
        after = one_round(emu.url, versions)
        print(f"per round, {CHANGES} pod changes in it:")
        print(f"  before: {before[0]} requests, {before[1] / 1e6:.2f} MB")
        print(f"  after:  {after[0]} requests, {after[1] / 1e3:.1f} kB")
        print(f"  bytes: {before[1] / max(after[1], 1):.0f}x fewer")
        with tempfile.TemporaryDirectory() as folder:
            lists, watches = extender_rounds(emu, folder)
        print(f"extender, {ROUNDS} rounds of {ROUND_S} s: {lists} lists, {watches} watches")
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
