"""Other vendors' accelerators in `gpuctl sandbox`, beside its NVIDIA nodes: AMD Instinct
nodes as AMD's GPU Operator labels them, Google TPU slices as GKE labels their hosts, the
chips each advertises, and each vendor's exporter (its /metrics text and the scrape config a
cluster's Prometheus has for it). No I/O here: the sandbox process serves the texts.

Nodes. AMD (`1xMI300X`): `amd.com/gpu: 8`, the node labeller's labels in both forms
(ROCm/k8s-device-plugin @ ed76468 cmd/k8s-node-labeller/main.go createLabels:
`amd.com/gpu.<prop>=<value>` on a homogeneous node, `beta.amd.com/gpu.<prop>=<value>` and
`beta.amd.com/gpu.<prop>.<value>=<count>`; product-name with spaces as `_`; vram in GiB with
`G`; device-id without 0x), values as ROCm/gpu-operator issue #266 shows them for an MI300X
(cu-count 304, simd-count 1216, family AI, vram 192G; 74a1 the bare-metal device ID),
NFD's `feature.node.kubernetes.io/amd-gpu=true`. TPU (`1xTPU-v5e:2x4`: one slice of
topology 2x4): one node per host (chips per host: gpuctl.gpus.vendor_models.chips_per_host,
xpk's rule), `google.com/tpu` per host, GKE's `cloud.google.com/gke-tpu-accelerator`,
`gke-tpu-topology`, `gke-accelerator-count`, the slice's own `gke-nodepool` (a multi-host
slice is an atomic node pool: cloud.google.com/kubernetes-engine/docs/concepts/tpus), the
machine type as instance type (AI-Hypercomputer/xpk system_characteristics.py). Every one
tainted `<resource>=present:NoSchedule`, the key gpuctl's workers tolerate
(gpuctl.k8s.labels.ACCELERATOR_TAINTS).

Exporters. AMD's device-metrics-exporter (ROCm/device-metrics-exporter @ afd0fe81,
pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go): metric names and HELP texts of
initPrometheusMetrics; the mandatory labels (gpuMandatoryLables) lower-cased, a free GPU's
pod/namespace/container/job_* empty (populateLabelsFromGPU writes them from the workload, ""
without one); partition types lower-cased without their enum prefix (utils.go
NormalizeStringWithoutPrefix), deployment_mode baremetal; VRAM in MB, power in W.
`card_model` is the board's part number (the exporter's dashboards filter on
102-D65208-0C|102-D67305-00|102-D65209-0C, grafana/dashboard_ainic_job.json; which one an
MI300X has is not said there: the sandbox uses the first). Its Helm chart
(helm-charts/: release `exporter` in kube-amd-gpu as docs/installation/kubernetes-helm.md
installs it, service `exporter-amd-metrics-exporter-svc` port `http` 5000, ServiceMonitor
jobLabel app, honorLabels true). GKE's TPU device plugin (its metrics package, Google LLC
2025, Apache-2.0, found by the code index without a repository name; a real capture from
tpu-device-plugin v1.35.7-gke.0 in facebookincubator/dynolog src/tpumon's TpuScraper test):
`duty_cycle`, `memory_used`, `memory_total`, `tensorcore_utilization` with namespace, pod,
container, make (`cloud-tpu`), accelerator_id (`<instance id>-<chip>`), model (the GKE
accelerator), tpu_topology, for a chip a container holds; the same names with `_node`
without the container's labels; port 2112 on the `tpu-device-plugin` pods (k8s-app) of
kube-system. Both written as client_golang writes text: families by name, labels by name,
series by label values, floats as strconv 'g' -1.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from gpuctl.common.errors import UsageError
from gpuctl.gpus import vendor_models
from gpuctl.k8s.labels import ACCELERATOR_TAINTS
from gpuctl.sim import dcgm_exporter

AMD, TPU = "amd.com/gpu", "google.com/tpu"
_SPEC = re.compile(r"^(\d+)x(MI[0-9A-Za-z]+|TPU-[0-9A-Za-z]+)(?::([0-9]+(?:x[0-9]+){1,2}))?$", re.I)
# AMD models the sandbox labels as the labeller does: device ID, CUs, SIMDs (issue #266)
AMD_BOARDS = {"MI300X": ("74a1", 304, 1216, "102-D65208-0C")}
# TPU models: the GKE accelerator label of a multi-host slice, the machine type (xpk)
TPU_POOLS = {
    "TPU-v5e": ("tpu-v5-lite-podslice", "ct5lp-hightpu-4t"),
    "TPU-v6e": ("tpu-v6e-slice", "ct6e-standard-4t"),
}
AMD_GPUS = 8
MB = 1 << 20


@dataclass(frozen=True)
class VendorGroup:
    """COUNT AMD nodes of MODEL, or COUNT TPU slices of MODEL in TOPOLOGY."""

    count: int
    model: str
    topology: str | None = None

    @property
    def resource(self) -> str:
        return TPU if self.topology else AMD

    @property
    def per_host(self) -> int:
        if self.topology is None:
            return AMD_GPUS
        return vendor_models.chips_per_host(self.topology, TPU_POOLS[self.model][1])

    @property
    def hosts(self) -> int:
        """Nodes per unit: 1 for AMD, the slice's hosts for a TPU slice."""
        if self.topology is None:
            return 1
        return max(vendor_models.slice_chips(self.topology) // self.per_host, 1)


@dataclass(frozen=True)
class Chips:
    """A node's accelerators of another vendor, as its device plugin hands them out."""

    resource: str
    count: int
    model: str
    unit: str  # what one is called in the sandbox's pod logs: GPU, chip


def parse(part: str) -> VendorGroup | None:
    """`1xMI300X`, `1xTPU-v5e:2x4`; None for a part that names no other vendor's model."""
    m = _SPEC.match(part)
    if not m:
        return None
    found = vendor_models.models_named(m.group(2))
    model = found[0] if len(found) == 1 else m.group(2)
    topology = m.group(3)
    hint = "e.g. 1xMI300X or 1xTPU-v5e:2x4"
    if int(m.group(1)) < 1:
        raise UsageError(f"--gpu-nodes: {part!r}: the count must be at least 1", hint=hint)
    if model in AMD_BOARDS and topology is None:
        return VendorGroup(int(m.group(1)), model)
    if model in TPU_POOLS and topology is not None:
        group = VendorGroup(int(m.group(1)), model, topology.lower())
        if vendor_models.slice_chips(group.topology or "") % group.per_host:
            raise UsageError(f"--gpu-nodes: {part!r}: {topology} is not whole hosts", hint=hint)
        return group
    if model in TPU_POOLS:
        raise UsageError(f"--gpu-nodes: {part!r}: a TPU slice needs its topology", hint=hint)
    known = ", ".join([*AMD_BOARDS, *(f"{t}:TOPOLOGY" for t in TPU_POOLS)])
    raise UsageError(f"--gpu-nodes: {part!r}: the sandbox simulates {known}", hint=hint)


def node_objects(
    group: VendorGroup, names: list[str], make_node: Callable[..., dict]
) -> list[dict]:
    """The group's Nodes, named after those in NAMES; MAKE_NODE(name, labels, resources,
    taint key) builds one as the sandbox builds its other nodes."""
    out: list[dict] = []
    prefix = group.model.lower() + ("-node-" if group.topology is None else f"-{group.topology}-")
    for _ in range(group.count):
        taken = [n for n in names + [o["metadata"]["name"] for o in out] if n.startswith(prefix)]
        if group.topology is None:
            name = f"{prefix}{len(taken) + 1}"
            out.append(make_node(name, amd_labels(group.model), _resources(group), AMD_TAINT))
            continue
        pool = f"{prefix}{len({n.rsplit('-node-', 1)[0] for n in taken}) + 1}"
        for host in range(group.hosts):
            labels = tpu_labels(group, pool)
            out.append(make_node(f"{pool}-node-{host + 1}", labels, _resources(group), TPU_TAINT))
    return out


AMD_TAINT, TPU_TAINT = ACCELERATOR_TAINTS["amd"], ACCELERATOR_TAINTS["google"]


def _resources(group: VendorGroup) -> dict[str, str]:
    if group.topology is None:  # an 8-GPU MI300X board's host (Azure ND MI300X v5: 96 vCPUs)
        return {"cpu": "96", "memory": "1850Gi", AMD: str(group.per_host)}
    return {"cpu": "224", "memory": "192Gi", TPU: str(group.per_host)}  # ct5lp-hightpu-4t


def amd_labels(model: str) -> dict[str, str]:
    device_id, cus, simds, _ = AMD_BOARDS[model]
    memory = vendor_models.memory_of(model) or 0
    props = {
        "cu-count": str(cus),
        "device-id": device_id,
        "driver-version": "6.12.12",
        "family": "AI",
        "product-name": f"AMD_Instinct_{model}_OAM",
        "simd-count": str(simds),
        "vram": f"{memory // vendor_models.GIB}G",
    }
    labels = {"feature.node.kubernetes.io/amd-gpu": "true"}
    for prop, value in props.items():
        labels[f"amd.com/gpu.{prop}"] = value
        labels[f"beta.amd.com/gpu.{prop}"] = value
        labels[f"beta.amd.com/gpu.{prop}.{value}"] = str(AMD_GPUS)
    labels["amd.com/gpu.compute-memory-partition"] = "spx_nps1"
    labels["amd.com/gpu.compute-partitioning-supported"] = "true"
    labels["amd.com/gpu.memory-partitioning-supported"] = "true"
    return labels


def tpu_labels(group: VendorGroup, pool: str) -> dict[str, str]:
    accelerator, machine = TPU_POOLS[group.model]
    return {
        vendor_models.TPU_ACCELERATOR: accelerator,
        vendor_models.TPU_TOPOLOGY: str(group.topology),
        vendor_models.GKE_ACCELERATOR_COUNT: str(group.per_host),
        "cloud.google.com/gke-nodepool": pool,
        "cloud.google.com/machine-family": machine.split("-")[0],
        vendor_models.INSTANCE_TYPE: machine,
    }


def chips_of(node: dict) -> Chips | None:
    """The other vendor's accelerators of a node the sandbox made (None: none)."""
    labels = node["metadata"].get("labels") or {}
    alloc = (node.get("status") or {}).get("allocatable") or {}
    if AMD in alloc:
        named = vendor_models.amd(labels, AMD)
        return Chips(AMD, int(alloc[AMD]), named.model or "", "GPU")
    if TPU in alloc:
        named = vendor_models.tpu(labels, TPU)
        return Chips(TPU, int(alloc[TPU]), named.model or "", "chip")
    return None


# --- exporters -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """A chip as its exporter sees it: the holder's (namespace, pod, container) and how
    busy it keeps the chip (percent), or None and 0 when free."""

    chip: int
    holder: tuple[str, str, str] | None
    busy: int


def go_float(value: float) -> str:
    """A value as client_golang's text format writes it (strconv.FormatFloat 'g', -1)."""
    if value == 0:
        return "0"
    sign, digits, exp = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + int(exp)
    e = point - 1
    if e < -4 or e >= 6:  # the shortest form's precision is taken as 6 for this choice
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        out = f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    elif point <= 0:
        out = "0." + "0" * -point + text
    elif point >= len(text):
        out = text + "0" * (point - len(text))
    else:
        out = text[:point] + "." + text[point:]
    return ("-" if sign else "") + out


def _labels(pairs: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items()))


def _families(series: dict[str, tuple[str, list[tuple[dict[str, str], float]]]]) -> str:
    lines = []
    for name in sorted(series):
        help_text, rows = series[name]
        if not rows:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        rows = sorted(rows, key=lambda r: [v for _, v in sorted(r[0].items())])
        lines += [f"{name}{{{_labels(labels)}}} {go_float(value)}" for labels, value in rows]
    return "\n".join(lines) + "\n"


def amd_metrics_text(node: str, model: str, gpus: list[Held]) -> str:
    """What device-metrics-exporter serves on NODE whose MODEL GPUs are GPUS."""
    total_mb = (vendor_models.memory_of(model) or 0) // MB
    series: dict[str, tuple[str, list]] = {
        "gpu_nodes_total": ("Number of GPUs in the node", [({"hostname": node}, len(gpus))]),
        "gpu_gfx_activity": ("Graphics engine usage in Percentage (0-100)", []),
        "gpu_umc_activity": ("Memory engine usage in Percentage (0-100)", []),
        "gpu_total_vram": ("Total VRAM memory of the GPU (in MB)", []),
        "gpu_used_vram": ("Used VRAM memory of the GPU (in MB)", []),
        "gpu_free_vram": ("Free VRAM memory of the GPU (in MB)", []),
        "gpu_package_power": ("Current socket power in Watts", []),
        "gpu_junction_temperature": ("Current junction/hotspot temperature in Celsius", []),
    }
    for g in gpus:
        namespace, pod, container = g.holder or ("", "", "")
        labels = {
            "card_model": AMD_BOARDS.get(model, ("", 0, 0, ""))[3],
            "container": container,
            "deployment_mode": "baremetal",
            "gpu_compute_partition_type": "spx",
            "gpu_id": str(g.chip),
            "gpu_memory_partition_type": "nps1",
            "gpu_partition_id": "0",
            "hostname": node,
            "job_id": "",
            "job_partition": "",
            "job_user": "",
            "namespace": namespace,
            "pod": pod,
            "serial_number": f"{zlib.crc32(f'{node}/{g.chip}'.encode()):016X}"[-16:],
        }
        used = total_mb * g.busy // 110 if g.holder else 0
        for name, value in (
            ("gpu_gfx_activity", g.busy),
            ("gpu_umc_activity", g.busy // 3),
            ("gpu_total_vram", total_mb),
            ("gpu_used_vram", used),
            ("gpu_free_vram", total_mb - used),
            ("gpu_package_power", 140 + 6 * g.busy),
            ("gpu_junction_temperature", 38 + g.busy // 3),
        ):
            series[name][1].append((labels, value))
    return _families(series)


def tpu_metrics_text(node: str, accelerator: str, topology: str, chips: list[Held]) -> str:
    """What GKE's TPU device plugin serves on NODE (its GKE accelerator ACCELERATOR)."""
    model = vendor_models.tpu({vendor_models.TPU_ACCELERATOR: accelerator}, TPU).model
    total = vendor_models.memory_of(model) or 0
    instance = str(10**18 + zlib.crc32(node.encode()) * 7919)  # a 19-digit GCE instance id
    names = {
        "duty_cycle": "Percent of time when the TPU was actively processing",
        "memory_used": "Allocated TPU memory in bytes",
        "memory_total": "Total memory available on the TPU in bytes",
        "tensorcore_utilization": "Tensorcore percent utilization of the TPU device",
    }
    series: dict[str, tuple[str, list]] = {}
    for name, help_text in names.items():
        series[name] = (help_text, [])
        node_help = help_text + (" per node" if name == "tensorcore_utilization" else "")
        series[name + "_node"] = (node_help, [])
    for c in chips:
        labels = {"make": "cloud-tpu", "accelerator_id": f"{instance}-{c.chip}", "model": accelerator, "tpu_topology": topology}  # fmt: skip
        used = total * c.busy // 125 if c.holder else 0
        values = {"duty_cycle": c.busy, "memory_used": used, "memory_total": total, "tensorcore_utilization": c.busy * 0.7}  # fmt: skip
        for name, value in values.items():
            series[name + "_node"][1].append((labels, value))
            if c.holder:  # the runtime's metrics come with the workload's container
                namespace, pod, container = c.holder
                held = labels | {"namespace": namespace, "pod": pod, "container": container}
                series[name][1].append((held, value))
    return _families(series)


AMD_EXPORTER = dcgm_exporter.Deployment(
    "kube-amd-gpu",
    "exporter-amd-metrics-exporter-svc",
    "http",
    "amdgpu-metrics-exporter-container",
    "app",
    (("app", "exporter-amdgpu-metrics-exporter"),),
)
TPU_EXPORTER = dcgm_exporter.Deployment(
    "kube-system",
    "tpu-device-plugin",
    "metrics",
    "tpu-device-plugin",
    "k8s-app",
    (("k8s-app", "tpu-device-plugin"),),
)


def scrape_configs(amd: list[tuple[str, str, str]], tpu: list[tuple[str, str, str]]) -> list[dict]:
    """The Prometheus Operator's scrape configs for the exporters' ServiceMonitors; targets:
    [(address, exporter pod, node)]. Both keep the series' own pod labels (honorLabels),
    which name the workload, not the exporter; the TPU hosts' get the node's name."""
    out = []
    if amd:
        out.append(dcgm_exporter.servicemonitor_scrape_config(AMD_EXPORTER, amd, True))
    if tpu:
        config = dcgm_exporter.servicemonitor_scrape_config(TPU_EXPORTER, tpu, True)
        # its series name no node (a chip's host is the exporter's): the endpoint's
        # relabeling `sourceLabels: [__meta_kubernetes_pod_node_name], targetLabel: node`
        node = {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"}
        config["relabel_configs"].insert(-1, node)
        out.append(config)
    return out
