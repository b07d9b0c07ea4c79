"""The process behind `gpuctl sandbox start`: a simulated GPU cluster for trying gpuctl.

It runs the Kubernetes API emulator the tests use (gpuctl.sim.kube: kmock, serving the
JobSet CRD and, with --kueue, Kueue's), seeds it with GPU nodes as the GPU Operator labels
them (gpuctl.sim.cluster), the GPU Operator's DaemonSets and its MIG manager's ConfigMap,
for `:dra` nodes the simulated DRA driver's DeviceClasses and ResourceSlices
(gpuctl.sim.dra_driver), JobSet's (and with --kueue Kueue's) controller Deployment, and runs a simulated control
plane every second (gpuctl.sim.controllers; gpuctl.sim.kueue with --kueue;
gpuctl.sim.mig_manager). One dcgm-exporter per GPU node serves the GPUs' series with the
pods that hold them (util from `gpuctl.io/sandbox-gpu-util`, else a busy figure), and, when
a `prometheus` executable is found, a Prometheus of its own (empty at start) scrapes them
as the GPU Operator's ServiceMonitor does. Other vendors' nodes (an AMD MI300X node, a TPU
slice's hosts: gpuctl.sim.accelerators) get their chips, and AMD's device-metrics-exporter or
GKE's TPU device plugin metrics, scraped by the same Prometheus. None of it is a real cluster: it exists for
demos and for trying the tool.

State, in STATE_DIR (gpuctl.sandbox.service made it private; nothing here follows a
symlink): sandbox.json, written at once with what identifies this process, again when its
Prometheus started (what identifies that one too), and once it serves with how to reach
it; kubeconfig; prometheus/ (its config, log and data).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
import zlib
from collections.abc import Iterable
from pathlib import Path

from gpuctl.gpus import geometry
from gpuctl.runtime import processes
from gpuctl.runtime.files import make_private_dir, open_new, write_atomic
from gpuctl.sim import accelerators, cluster, dcgm_exporter, dra_driver, mig_manager
from gpuctl.sim.controllers import (
    APPS,
    BOOKMARK_S,
    Api,
    Simulation,
    keyed,
    now_text,
    path_of,
    util,
)
from gpuctl.sim.kube import KubeEmulator

OPERATOR_NS = "gpu-operator"
OPERATOR_DAEMONSETS = {  # what the GPU Operator runs on each GPU node, with its images
    "nvidia-device-plugin-daemonset": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
    "gpu-feature-discovery": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
    "nvidia-dcgm-exporter": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
    "nvidia-mig-manager": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.12.1-ubuntu20.04",
}
JOBSET_IMAGE = "registry.k8s.io/jobset/jobset:v0.12.0"  # the JobSet CRD's release
KUEUE_IMAGE = "registry.k8s.io/kueue/kueue:v0.19.2"  # the Kueue CRDs' release
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Workload", "Topology")
KUEUE_CONFIG = Path(__file__).parent / "crds" / "controller_manager_config.yaml"
PROMETHEUS_TRIES = 5
PROMETHEUS_START_S = 30.0


class SandboxError(Exception):
    """Why the sandbox cannot start: its one-line message ends up in `gpuctl sandbox start`'s
    error."""


# --- the cluster's objects ----------------------------------------------------------------------


def _deployment(name: str, ns: str, image: str, config: str | None = None) -> dict:
    labels = {"control-plane": "controller-manager"}
    pod: dict = {"containers": [{"name": "manager", "image": image}]}
    if config:
        pod["volumes"] = [{"name": "manager-config", "configMap": {"name": config}}]
    return {
        "apiVersion": APPS,
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def seed(api: Api, nodes: list[dict], kueue: bool) -> None:
    spaces = ["default", "kube-system", OPERATOR_NS, "jobset-system"]
    for ns in spaces + (["kueue-system"] if kueue else []):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        api.create("/api/v1/namespaces", body)
    for node in nodes:
        api.create("/api/v1/nodes", node)
    _seed_dra(api, nodes)
    jobset = _deployment("jobset-controller-manager", "jobset-system", JOBSET_IMAGE)
    api.create(path_of(APPS, "jobset-system", "deployments"), jobset)
    if kueue:  # its controller is simulated (gpuctl.sim.kueue), its configuration upstream's
        config = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": KUEUE_CONFIG.read_text()},
        }
        api.create("/api/v1/namespaces/kueue-system/configmaps", config)
        manager = _deployment(
            "kueue-controller-manager", "kueue-system", KUEUE_IMAGE, "kueue-manager-config"
        )
        api.create(path_of(APPS, "kueue-system", "deployments"), manager)
    api.create(f"/api/v1/namespaces/{OPERATOR_NS}/configmaps", mig_manager.configmap())
    gpu_nodes = sum(1 for n in nodes if cluster.GPU in n["status"]["allocatable"])
    for name, image in OPERATOR_DAEMONSETS.items():
        _daemonset(api, name, image, gpu_nodes)


def _seed_dra(api: Api, nodes: list[dict]) -> None:
    """The simulated DRA driver's DeviceClasses, and a ResourceSlice per DRA node."""
    dra_nodes = [n for n in nodes if cluster.DRA_NODE in n["metadata"]["labels"]]
    if not dra_nodes:
        return
    base = f"/apis/{dra_driver.API_VERSION}"
    for device_class in dra_driver.DEVICE_CLASSES:
        api.create(f"{base}/deviceclasses", device_class)
    for n in dra_nodes:
        model = geometry.find_model(n["metadata"]["labels"][cluster.DRA_NODE])
        slice_ = dra_driver.resource_slice(n["metadata"]["name"], model, cluster.GPUS_PER_NODE)
        api.create(f"{base}/resourceslices", slice_)


def _daemonset(api: Api, name: str, image: str, nodes: int) -> None:
    pod = {
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": name.removeprefix("nvidia-"), "image": image}],
    }
    ds = {
        "apiVersion": APPS,
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": OPERATOR_NS, "labels": {"app": name}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        },
    }
    api.create(path_of(APPS, OPERATOR_NS, "daemonsets"), ds)
    keys = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady")
    counts = dict.fromkeys(keys + ("numberAvailable", "updatedNumberScheduled"), nodes)
    api.patch(
        path_of(APPS, OPERATOR_NS, "daemonsets", name) + "/status",
        {"status": {**counts, "numberMisscheduled": 0}},
    )


# --- dcgm-exporters --------------------------------------------------------------------------------


def devices(sim: Simulation, node: str, pods: list[dict]) -> list[dcgm_exporter.Device]:
    """What the node's dcgm-exporter reports: each GPU, or each MIG slice, with its holder."""
    hw = sim.gpus[node]
    holders = sim.holders(node, pods)
    found = keyed(hw.devices())
    utils = [util(holders[key]) if key in holders else 0 for key, _ in found]
    instance: dict[int, int] = {}
    out = []
    for (key, device), busy in zip(found, utils):
        gpu, profile, pod = device.gpu, device.profile, holders.get(key)
        memory = hw.model.memory_total_mib
        if profile:
            memory = hw.model.profile(profile).memory_mib or memory // 8
        used = memory * busy // 110
        # a MIG device's series carry its GPU's temperature and power (dcgm-exporter)
        board = [u for (k, _), u in zip(found, utils) if k[0] == gpu]
        average = sum(board) / len(board)
        values = dcgm_exporter.default_values(
            busy,
            used,
            memory - used,
            temp=30 + int(average) // 3,
            power=70.0 + 6.0 * average,
            mig=bool(profile),
        )
        holder = []
        if pod:
            container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", "main")
            meta = pod["metadata"]
            holder = [dcgm_exporter.Holder(meta["namespace"], meta["name"], container)]
        mig = None
        if profile:
            instance[gpu] = instance.get(gpu, 0) + 1
            mig = (profile, instance[gpu])
        # a MIG device is labelled with its GPU's UUID (and GPU_I_ID), as dcgm-exporter does
        uuid = f"GPU-{zlib.crc32(f'{node}/{gpu}'.encode()):08x}-5a4d-4b3c-9d2e-000000000{gpu:03d}"
        out.append(
            dcgm_exporter.Device(
                gpu=gpu,
                uuid=uuid,
                model=hw.model.nvml_name,
                values=values,
                holders=holder,
                mig=mig,
                pci_bus_id=f"00000000:{0x10 + gpu:02X}:00.0",
            )
        )
    return out


class Exporters:
    """One dcgm-exporter per GPU node, its text refreshed each tick."""

    def __init__(self, nodes: list[str]):
        self.nodes = nodes
        self.servers = [dcgm_exporter.ExporterServer("") for _ in nodes]

    def refresh(self, sim: Simulation, pods: list[dict]) -> None:
        for node, server in zip(self.nodes, self.servers):
            server.text = dcgm_exporter.metrics_text(devices(sim, node, pods), node)

    def scrape_config(self) -> dict:
        targets = [
            (s.address, f"nvidia-dcgm-exporter-{i:05d}", n)
            for i, (s, n) in enumerate(zip(self.servers, self.nodes))
        ]
        return dcgm_exporter.servicemonitor_scrape_config(
            dcgm_exporter.GPU_OPERATOR, targets, False
        )

    def stop(self) -> None:
        for s in self.servers:
            s.stop()


class VendorExporters:
    """Other vendors' exporters: AMD's device-metrics-exporter on each AMD node, GKE's TPU
    device plugin's metrics on each TPU host (gpuctl.sim.accelerators), refreshed each tick."""

    def __init__(self, nodes: list[dict]):
        self.nodes = {n["metadata"]["name"]: n for n in nodes if accelerators.chips_of(n)}
        self.servers = {name: dcgm_exporter.ExporterServer("") for name in sorted(self.nodes)}

    def refresh(self, sim: Simulation, pods: list[dict]) -> None:
        for name, server in self.servers.items():
            chips = sim.chips[name]
            holders = sim.holders(name, pods)
            held = []
            for i in range(chips.count):
                pod = holders.get((i, None, 0))
                held.append(accelerators.Held(i, _holder(pod), util(pod) if pod else 0))
            labels = self.nodes[name]["metadata"]["labels"]
            if chips.resource == accelerators.AMD:
                server.text = accelerators.amd_metrics_text(name, chips.model, held)
            else:
                accelerator = labels[accelerators.vendor_models.TPU_ACCELERATOR]
                topology = labels[accelerators.vendor_models.TPU_TOPOLOGY]
                server.text = accelerators.tpu_metrics_text(name, accelerator, topology, held)

    def scrape_configs(self) -> list[dict]:
        targets: dict[str, list[tuple[str, str, str]]] = {accelerators.AMD: [], accelerators.TPU: []}  # fmt: skip
        for i, (name, server) in enumerate(self.servers.items()):
            chips = accelerators.chips_of(self.nodes[name])
            assert chips is not None
            pod = "exporter-amdgpu-metrics-exporter" if chips.resource == accelerators.AMD else "tpu-device-plugin"  # fmt: skip
            targets[chips.resource].append((server.address, f"{pod}-{i:05d}", name))
        return accelerators.scrape_configs(targets[accelerators.AMD], targets[accelerators.TPU])

    def stop(self) -> None:
        for s in self.servers.values():
            s.stop()


def _holder(pod: dict | None) -> tuple[str, str, str] | None:
    if pod is None:
        return None
    container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", "main")
    return (pod["metadata"]["namespace"], pod["metadata"]["name"], container)


# --- Prometheus ------------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_prometheus(
    binary: str,
    folder: Path,
    scrapes: list[dict],
    ports: Iterable[int],
    started=lambda proc: None,
) -> tuple[subprocess.Popen, str]:
    """Start Prometheus on the first of PORTS it can listen on (a port taken meanwhile by
    another process: the next one), with a fresh data directory in FOLDER; STARTED(proc)
    is called as soon as each try runs, to record it. (process, URL)."""
    import yaml

    make_private_dir(folder)
    config = folder / "prometheus.yml"
    write_atomic(
        config, yaml.safe_dump({"global": {"scrape_interval": "2s"}, "scrape_configs": scrapes})
    )
    data = folder / "data"
    tried = []
    for port in ports:
        with os.fdopen(open_new(folder / "log"), "w") as log:
            proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={data}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )  # in this process's session: `gpuctl sandbox stop` finds it there too
        started(proc)
        url = f"http://127.0.0.1:{port}"
        failure = _ready(proc, url, data)
        if failure is None:
            return proc, url
        tried.append(port)
        if "address already in use" not in failure:
            raise SandboxError(f"Prometheus did not start: {failure}")
    raise SandboxError(
        "Prometheus found no port to listen on: taken meanwhile: " + ", ".join(map(str, tried))
    )


def _ready(proc: subprocess.Popen, url: str, data: Path) -> str | None:
    """None once the Prometheus answering at URL is PROC (its data is DATA), else why not
    (PROC ended: its last log line)."""
    deadline = time.monotonic() + PROMETHEUS_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = (data.parent / "log").read_text(errors="replace").strip().splitlines()
            return log[-1] if log else f"it exited with code {proc.returncode}"
        try:
            with urllib.request.urlopen(url + "/api/v1/status/flags", timeout=2) as r:
                flags = json.loads(r.read()).get("data") or {}
            if flags.get("storage.tsdb.path") == str(data) and proc.poll() is None:
                return None
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    proc.kill()
    proc.wait(10)
    return f"not ready within {PROMETHEUS_START_S:.0f} s"


# --- the process --------------------------------------------------------------------------------------


class State:
    """sandbox.json: what identifies the processes, and how to reach the sandbox."""

    def __init__(self, folder: Path):
        self.path = folder / "sandbox.json"
        me = processes.identify(os.getpid())
        assert me is not None
        self.data: dict = {"ready": False, "processes": {"sandbox": me.to_dict()}}
        self.save()

    def record(self, role: str, proc: subprocess.Popen) -> None:
        found = processes.identify_child(proc.pid)  # not reaped: its PID is not reused
        if found is not None:
            self.data["processes"][role] = found.to_dict()
            self.save()

    def save(self, **fields) -> None:
        self.data |= fields
        write_atomic(self.path, json.dumps(self.data, indent=1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpuctl.sim.sandbox")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--nodes", default=cluster.DEFAULT_NODES)
    parser.add_argument("--kueue", action="store_true")
    parser.add_argument("--prometheus", default="prometheus", help="executable; '' for none")
    args = parser.parse_args(argv)
    folder = Path(args.state_dir)
    state = State(folder)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    layouts = mig_manager.shipped_layouts()
    nodes = cluster.node_objects(cluster.parse_nodes(args.nodes, layouts), layouts)
    emu = KubeEmulator().start()
    emu.bookmark_every(BOOKMARK_S)  # each tick catches up at one
    prom = exporters = others = None
    try:
        kinds = KUEUE_KINDS if args.kueue else ()
        emu.install_crds("JobSet", *kinds)
        api = Api(emu.url)
        seed(api, nodes, args.kueue)
        gpus = {n["metadata"]["name"]: mig_manager.hardware(n, layouts) for n in nodes}
        hardware = {name: hw for name, hw in gpus.items() if hw is not None}
        kueue = None
        if args.kueue:
            from gpuctl.sim.kueue import Kueue

            kueue = Kueue(api)
        chips = {n["metadata"]["name"]: accelerators.chips_of(n) for n in nodes}
        sim = Simulation(api, hardware, emu, kueue, {k: c for k, c in chips.items() if c})
        exporters = Exporters(sorted(hardware))
        others = VendorExporters(nodes)
        prom_bin = shutil.which(args.prometheus) if args.prometheus else None
        prom_url = None
        if prom_bin:
            ports = (free_port() for _ in range(PROMETHEUS_TRIES))
            record = lambda proc: state.record("prometheus", proc)  # noqa: E731
            scrapes = [exporters.scrape_config(), *others.scrape_configs()]
            prom, prom_url = start_prometheus(
                prom_bin, folder / "prometheus", scrapes, ports, record
            )
        name = folder.name
        kubeconfig = _kubeconfig(folder, emu.url, name)
        state.save(
            ready=True,
            api=emu.url,
            kubeconfig=kubeconfig,
            prometheus=prom_url,
            nodes=args.nodes,
            kueue=args.kueue,
            started=now_text(),
        )
        _run(sim, (exporters, others), emu, stop)
    except SandboxError as e:
        print(f"error: {e}", flush=True)
        raise SystemExit(1) from None
    finally:
        if prom is not None:
            prom.terminate()
            try:
                prom.wait(10)
            except subprocess.TimeoutExpired:
                prom.kill()
        if exporters is not None:
            exporters.stop()
        if others is not None:
            others.stop()
        emu.stop()
        state.path.unlink(missing_ok=True)


def _kubeconfig(folder: Path, url: str, name: str) -> str:
    from gpuctl.sim.kube import write_kubeconfig

    return write_kubeconfig(folder / "kubeconfig", url, name=f"sandbox-{name}")


def _run(
    sim: Simulation,
    exporters: tuple[Exporters, VendorExporters],
    emu: KubeEmulator,
    stop: threading.Event,
) -> None:
    while not stop.is_set():
        try:
            world = sim.step()
            for e in exporters:
                e.refresh(sim, world.pods)
        except (OSError, ValueError) as e:  # one bad tick is logged, the next one retries
            print(f"{now_text()} tick failed: {e}", flush=True)
        emu.forget_requests()
        stop.wait(1.0)


if __name__ == "__main__":
    main()
