"""A dcgm-exporter look-alike, for the tests and `gpuctl sandbox`: an HTTP server whose
/metrics text is written byte for byte as dcgm-exporter writes it, and the scrape configs that
put it into Prometheus the way real deployments do.

Format source: NVIDIA/dcgm-exporter @ d5e5f510a1b6b393f39a43293ccd9dc985defc79 (Apache-2.0),
internal/pkg/rendermetrics/render_metrics.go (the FE_GPU template: `gpu`, the UUID label,
`pci_bus_id`, `device`, `modelName`, for a MIG device `GPU_I_PROFILE` and `GPU_I_ID`, the
host label when set, then the `label`-type counters and the pod attributes, each sorted by
name: Go's text/template visits a map in key order); values as
internal/pkg/collector/gpu_collector.go's toString writes them (`%d` for integer fields,
`%f` for doubles); HELP texts from etc/dcp-metrics-included.csv;
internal/pkg/transformation/kubernetes.go for the pod attributes: `container`, `namespace`,
`pod` on a device a pod holds (`container_name`, `pod_name`, `pod_namespace` with
--use-old-namespace), nothing on a free one; with shared GPUs (KubernetesVirtualGPUs) one
copy per pod, plus the device's own series for the per-process fields GPU_UTIL and FB_USED,
whose per-pod copies carry that pod's share.

Scrape configs: what the Prometheus Operator @ 6adcebc5076c34f4f55f8f5f7b1e528929373ac7
(Apache-2.0) generates for a ServiceMonitor endpoint (pkg/prometheus/promcfg.go
generateServiceMonitorConfig; pkg/prometheus/testdata/SettingHonorLabels.golden), for the
GPU Operator's ServiceMonitor (NVIDIA/gpu-operator @ a22dbf67,
assets/state-dcgm-exporter/0500_service_monitor.yaml: port gpu-metrics, jobLabel app,
container nvidia-dcgm-exporter) and for dcgm-exporter's Helm chart (deployment/: port
metrics, no jobLabel, container exporter). Kubernetes service discovery is replaced by a
static target carrying the `__meta_kubernetes_*` labels it would discover; the relabeling
is the operator's, unchanged.
"""

from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass, field

# name: (Prometheus type, HELP, Go type of the DCGM field). The fields dcgm-exporter's
# default counters file turns on (etc/default-counters.csv at the 4.5.3-4.8.2 release,
# 691c92762eb551313c825f6efe4ceeee20982801, Apache-2.0; a copy in tests/dcgm/upstream/), in
# its order and with its HELP texts, then the profiling fields it ships commented out that a
# counters file of one's own turns on (gpuctl.dcgm.counters). DCGM_FI_DRIVER_VERSION, a
# `label` counter, is a label of every series (Release.driver_version).
FIELDS = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz).", int),
    "DCGM_FI_DEV_MEM_CLOCK": ("gauge", "Memory clock frequency (in MHz).", int),
    "DCGM_FI_DEV_MEMORY_TEMP": ("gauge", "Memory temperature (in C).", int),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C).", int),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W).", float),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": (
        "counter",
        "Total energy consumption since boot (in mJ).",
        int,
    ),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("counter", "Total number of PCIe retries.", int),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %).", int),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "Memory utilization (in %).", int),
    "DCGM_FI_DEV_ENC_UTIL": ("gauge", "Encoder utilization (in %).", int),
    "DCGM_FI_DEV_DEC_UTIL": ("gauge", "Decoder utilization (in %).", int),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered.", int),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB).", int),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB).", int),
    "DCGM_FI_DEV_FB_RESERVED": ("gauge", "Framebuffer memory reserved (in MiB).", int),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": (
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
        int,
    ),
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": ("gauge", "vGPU License status", int),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (
        "counter",
        "Number of remapped rows for uncorrectable errors",
        int,
    ),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": (
        "counter",
        "Number of remapped rows for correctable errors",
        int,
    ),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gauge", "Whether remapping of rows has failed", int),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (
        "gauge",
        "Ratio of time the graphics engine is active.",
        float,
    ),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        float,
    ),
    "DCGM_FI_PROF_DRAM_ACTIVE": (
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        float,
    ),
    "DCGM_FI_PROF_PCIE_TX_BYTES": (
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and "
        "data payloads - in bytes per second.",
        int,
    ),
    "DCGM_FI_PROF_PCIE_RX_BYTES": (
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and "
        "data payloads - in bytes per second.",
        int,
    ),
    # commented out in the default file
    "DCGM_FI_PROF_SM_ACTIVE": (
        "gauge",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        float,
    ),
    "DCGM_FI_PROF_SM_OCCUPANCY": (
        "gauge",
        "The ratio of number of warps resident on an SM.",
        float,
    ),
}
DEFAULT_COUNTERS = tuple(FIELDS)[: tuple(FIELDS).index("DCGM_FI_PROF_PCIE_RX_BYTES") + 1]
# The profiling (DCP) fields: a GPU without them (or an exporter run without them) leaves
# them out. SM_ACTIVE and SM_OCCUPANCY need a counters file that turns them on.
DCP = tuple(f for f in FIELDS if f.startswith("DCGM_FI_PROF_"))
WITH_SM_ACTIVE = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY")
XID_TEXT = {0: "No Error"}  # internal/pkg/collector/xid_errors.go, the codes written here
PER_PROCESS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED")  # process_metrics.go


@dataclass
class Holder:
    namespace: str
    pod: str
    container: str
    share: dict = field(default_factory=dict)  # per-process fields: this pod's value


@dataclass
class Device:
    """One GPU, or one MIG instance of it (mig=(profile, GPU instance id))."""

    gpu: int
    uuid: str
    model: str
    values: dict  # field name -> value
    holders: list = field(default_factory=list)  # [Holder]; several when shared
    mig: tuple | None = None
    pci_bus_id: str = ""


@dataclass
class Release:
    """What differs between dcgm-exporter releases and options."""

    host_label: str = "hostname"  # `Hostname` up to 4.5.3-4.8.2
    uuid_label: str = "UUID"  # `uuid` with --use-old-namespace
    old_namespace: bool = False  # container_name/pod_name/pod_namespace
    driver_version: str | None = "580.95.05"  # the DCGM_FI_DRIVER_VERSION label counter
    empty_attributes: bool = False  # old releases: container="",namespace="",pod="" when free
    shared: bool = False  # --kubernetes-virtual-gpus (time-slicing / MPS)


def default_values(
    busy: float,
    used_mib: int,
    free_mib: int,
    reserved_mib: int = 0,
    *,
    temp: int | None = None,
    power: float | None = None,
    mig: bool = False,
    profiling: str = "default",
) -> dict:
    """A device's values for every field of the default counters file, made up from how busy
    it is (percent) and its memory: what a data-center GPU reports (profiling "default"),
    one without the profiling fields ("off"), or with a counters file that turns SM_ACTIVE
    on ("sm"). A MIG device (`mig`) reports GPU_UTIL as a constant 0 (dcgm-exporter #216)
    and its GPU's board readings: pass the GPU's `temp` and `power`."""
    ratio = busy / 100
    temp = 30 + int(busy) // 3 if temp is None else temp
    values: dict = dict.fromkeys(FIELDS, 0)
    values.update(
        {
            "DCGM_FI_DEV_SM_CLOCK": 1980 if busy else 345,
            "DCGM_FI_DEV_MEM_CLOCK": 2619,
            "DCGM_FI_DEV_MEMORY_TEMP": temp + 2,
            "DCGM_FI_DEV_GPU_TEMP": temp,
            "DCGM_FI_DEV_POWER_USAGE": 70.0 + 6.0 * busy if power is None else power,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 15152422938,
            "DCGM_FI_DEV_GPU_UTIL": 0 if mig else round(busy),
            "DCGM_FI_DEV_MEM_COPY_UTIL": int(busy) // 2,
            "DCGM_FI_DEV_FB_FREE": free_mib,
            "DCGM_FI_DEV_FB_USED": used_mib,
            "DCGM_FI_DEV_FB_RESERVED": reserved_mib,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ratio,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ratio / 2,
            "DCGM_FI_PROF_DRAM_ACTIVE": ratio / 3,
            "DCGM_FI_PROF_PCIE_TX_BYTES": int(4_000_000 * ratio) + 50_000,
            "DCGM_FI_PROF_PCIE_RX_BYTES": int(6_000_000 * ratio) + 50_000,
            "DCGM_FI_PROF_SM_ACTIVE": ratio,
            "DCGM_FI_PROF_SM_OCCUPANCY": ratio / 4,
        }
    )
    wanted = {
        "default": DEFAULT_COUNTERS,
        "off": tuple(f for f in DEFAULT_COUNTERS if f not in DCP),
        "sm": DEFAULT_COUNTERS + WITH_SM_ACTIVE,
    }[profiling]
    return {f: values[f] for f in wanted}


def _value(name: str, value) -> str:
    return f"{int(value):d}" if FIELDS[name][2] is int else f"{float(value):f}"


def _attributes(holder: Holder | None, release: Release) -> dict:
    names = (
        ("container_name", "pod_namespace", "pod_name")
        if release.old_namespace
        else ("container", "namespace", "pod")
    )
    if holder is None:
        return dict.fromkeys(names, "") if release.empty_attributes else {}
    return dict(zip(names, (holder.container, holder.namespace, holder.pod)))


def _line(name, device: Device, hostname, release: Release, attributes: dict, value) -> str:
    if name == "DCGM_FI_DEV_XID_ERRORS":  # gpu_collector.go: the code and its text
        code = int(value)
        attributes = {**attributes, "err_code": str(code)}
        attributes["err_msg"] = XID_TEXT.get(code, "Unknown Error")
    text = (
        f'{name}{{gpu="{device.gpu}",{release.uuid_label}="{device.uuid}",'
        f'pci_bus_id="{device.pci_bus_id}",device="nvidia{device.gpu}",modelName="{device.model}"'
    )
    if device.mig:
        text += f',GPU_I_PROFILE="{device.mig[0]}",GPU_I_ID="{device.mig[1]}"'
    if hostname and release.host_label:  # --no-hostname: none
        text += f',{release.host_label}="{hostname}"'
    labels = {"DCGM_FI_DRIVER_VERSION": release.driver_version} if release.driver_version else {}
    for k, v in sorted(labels.items()) + sorted(attributes.items()):
        text += f',{k}="{v}"'
    return text + "} " + _value(name, value)


def metrics_text(devices: list, hostname: str | None, release: Release = Release()) -> str:
    """The /metrics body of one exporter pod."""
    out = []
    for name, (prom_type, help_text, _) in FIELDS.items():
        lines = []
        for d in devices:
            if name not in d.values:
                continue
            holders = d.holders if release.shared else d.holders[:1]
            if not holders or (release.shared and name in PER_PROCESS):
                lines.append(
                    _line(name, d, hostname, release, _attributes(None, release), d.values[name])
                )
            for h in holders:
                value = h.share.get(name, d.values[name]) if release.shared else d.values[name]
                lines.append(_line(name, d, hostname, release, _attributes(h, release), value))
        if lines:
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} {prom_type}", *lines]
    return "\n".join(out) + "\n"


class ThreadedServer:
    """An HTTP server on a free local port, answering from threads until stopped."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.address = f"127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class ExporterServer(ThreadedServer):
    """Serves a text on /metrics (as dcgm-exporter's Prometheus handler does) until stopped."""

    def __init__(self, text: str):
        self.text = text
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = owner.text.encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__(Handler)


@dataclass(frozen=True)
class Deployment:
    """How an exporter DaemonSet and its ServiceMonitor are named."""

    namespace: str
    service: str
    port: str
    container: str
    job_label: str | None  # the ServiceMonitor's jobLabel (a label of the service)
    service_labels: tuple = ()


GPU_OPERATOR = Deployment(
    "gpu-operator",
    "nvidia-dcgm-exporter",
    "gpu-metrics",
    "nvidia-dcgm-exporter",
    "app",
    (("app", "nvidia-dcgm-exporter"),),
)
# `helm install --generate-name gpu-helm-charts/dcgm-exporter` (dcgm-exporter's README):
# the release name contains the chart name, so it is the full name of every object.
HELM_CHART = Deployment(
    "gpu-monitoring",
    "dcgm-exporter-1723456789",
    "metrics",
    "exporter",
    None,
    (("app.kubernetes.io/name", "dcgm-exporter"),),
)


def _sanitize(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def servicemonitor_scrape_config(deployment: Deployment, targets: list, honor_labels: bool) -> dict:
    """The scrape config the Prometheus Operator writes for the deployment's ServiceMonitor
    (endpoint 0); targets: [(address, exporter pod name, node name)]."""
    d = deployment
    relabel = [
        {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_endpoint_port_name"],
            "regex": d.port,
        },
        *(
            {
                "source_labels": [
                    "__meta_kubernetes_endpoint_address_target_kind",
                    "__meta_kubernetes_endpoint_address_target_name",
                ],
                "separator": ";",
                "regex": f"{kind};(.*)",
                "replacement": "${1}",
                "target_label": label,
            }
            for kind, label in (("Node", "node"), ("Pod", "pod"))
        ),
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {
            "action": "drop",
            "source_labels": ["__meta_kubernetes_pod_phase"],
            "regex": "(Failed|Succeeded)",
        },
        {
            "source_labels": ["__meta_kubernetes_service_name"],
            "target_label": "job",
            "replacement": "${1}",
        },
    ]
    if d.job_label:
        relabel.append(
            {
                "source_labels": [f"__meta_kubernetes_service_label_{_sanitize(d.job_label)}"],
                "target_label": "job",
                "regex": "(.+)",
                "replacement": "${1}",
            }
        )
    relabel.append({"target_label": "endpoint", "replacement": d.port})
    discovered = [
        {
            "targets": [address],
            "labels": {
                "__meta_kubernetes_namespace": d.namespace,
                "__meta_kubernetes_service_name": d.service,
                **{
                    f"__meta_kubernetes_service_label_{_sanitize(k)}": v
                    for k, v in d.service_labels
                },
                "__meta_kubernetes_endpoint_port_name": d.port,
                "__meta_kubernetes_endpoint_address_target_kind": "Pod",
                "__meta_kubernetes_endpoint_address_target_name": pod,
                "__meta_kubernetes_pod_name": pod,
                "__meta_kubernetes_pod_container_name": d.container,
                "__meta_kubernetes_pod_node_name": node,
                "__meta_kubernetes_pod_phase": "Running",
            },
        }
        for address, pod, node in targets
    ]
    return {
        "job_name": f"serviceMonitor/{d.namespace}/{d.service}/0",
        "honor_labels": honor_labels,
        "static_configs": discovered,
        "relabel_configs": relabel,
    }


def static_scrape_config(addresses: list) -> dict:
    """A hand-written scrape of the exporters: no Kubernetes labels added to the target."""
    return {"job_name": "dcgm", "static_configs": [{"targets": list(addresses)}]}
