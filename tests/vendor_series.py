"""Series of every other vendor's exporter as it emits them, and as a Prometheus Operator
scrape stores them, for the views' tests (top, advise).

Sources of the series' shapes (names and labels):
- AMD: ROCm/device-metrics-exporter @afd0fe81 pkg/exporter/proto/exporterconfig.proto (the
  mandatory labels hostname, serial_number, pod, namespace, container, gpu_id, card_model,
  gpu_partition_id, gpu_compute_partition_type, gpu_memory_partition_type; optional
  gpu_uuid), pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go (names lower-cased),
  docs/configuration/metricslist.md (units); card_model values as its Grafana dashboards
  filter them (grafana/dashboard_ainic_job.json); containers from helm-charts/templates/
  daemonsets.yaml. The chart's ServiceMonitor keeps the holder's plain labels (honorLabels
  true by default: helm-charts/values.yaml @1d00e7b9, `amd_gpu(honor_labels=True)`); the
  default series here are a scrape with honorLabels off (the Prometheus Operator's own
  default), where the holder's labels are renamed exported_*. Tests use both.
- Neuron: the exposition of neuron-monitor-prometheus.py in aws-neuron/aws-neuron-sdk's
  neuron-monitor user guide (trn1n.32xlarge, instance labels and `neuroncore`; no pods).
- TPU: tpu-device-plugin v1.35.7-gke.0's exposition as captured in facebookincubator/dynolog
  (tpumon tests: chips -4 and -5 bound to a pod, chip -0 unbound, `duty_cycle` per container
  and `duty_cycle_node` per chip); the node label as a pod scrape's relabelling adds it.
- Gaudi: metric names and units from Intel's metric exporter source (SampleMetadata); its
  label schema is not published: UUID and the scrape's node (a judgement, docs/cluster-top.md).
"""

from tests.standins.prometheus import Series

AMD_SCRAPE = {  # the target's own labels, as the exporter's ServiceMonitor sets them
    "container": "amd-device-metrics-exporter-container",
    "pod": "amd-metrics-exporter-7xk2p",
    "namespace": "kube-amd-gpu",
    "job": "metrics-exporter",
    "instance": "10.0.4.17:5000",
}


def amd_gpu(
    index: int, util: float, holder=None, uuid=None, node: str = "mi300x-1", honor_labels=False
) -> list:
    """HONOR_LABELS: scraped as AMD's Helm chart does by default (ServiceMonitor honorLabels
    true): the holder's labels keep their plain names over the exporter pod's."""
    labels = {
        "card_model": "102-D65209-0C",
        "gpu_compute_partition_type": "spx",
        "gpu_id": str(index),
        "gpu_memory_partition_type": "nps1",
        "gpu_partition_id": "0",
        "hostname": node,
        "serial_number": f"692251001{index}",
        **AMD_SCRAPE,
    }
    if uuid:
        labels["gpu_uuid"] = uuid
    if holder:
        ns, pod, container = holder
        labels |= (
            {"namespace": ns, "pod": pod, "container": container}
            if honor_labels
            else {"exported_namespace": ns, "exported_pod": pod, "exported_container": container}
        )
    return [
        Series("gpu_gfx_activity", labels, util),
        Series("gpu_used_vram", labels, 81920.0),
        Series("gpu_total_vram", labels, 196592.0),
        Series("gpu_package_power", labels, 712.0),
        Series("gpu_junction_temperature", labels, 61.0),
    ]


NEURON = {
    "availability_zone": "us-east-1c",
    "instance_id": "i-09db9b55e0095612f",
    "instance_type": "trn1n.32xlarge",
    "region": "us-east-1",
    "runtime_tag": "367",
    "subnet_id": "subnet-06a7754948e8a000f",
}


def neuron_core(core: int, ratio: float) -> Series:
    return Series("neuroncore_utilization_ratio", {**NEURON, "neuroncore": str(core)}, ratio)


TPU_CHIP = {"make": "cloud-tpu", "model": "tpu7x", "tpu_topology": "2x2x2", "node": "gke-tpu-a"}
TPU_POD = {"container": "vllm-worker", "namespace": "test-namespace", "pod": "test-workload-pod"}


def tpu_chip(chip: int, duty: float, held: bool) -> list:
    chip_labels = {**TPU_CHIP, "accelerator_id": f"1234567890123456789-{chip}"}
    out = [
        Series("duty_cycle_node", chip_labels, duty),
        Series("memory_total_node", chip_labels, 103079215104.0),
    ]
    if held:
        out += [
            Series("duty_cycle", chip_labels | TPU_POD, duty),
            Series("memory_used", chip_labels | TPU_POD, 34359738368.0),
            Series("memory_total", chip_labels | TPU_POD, 103079215104.0),
        ]
    return out


def gaudi(index: int, util: float, pod=None) -> list:
    labels = {"UUID": f"01P0-HL2080A0-15-TNDL84-08-07-0{index}", "device": f"accel{index}"}
    labels |= {"node": "gaudi2-1", "instance": "10.0.9.4:41611"}
    if pod:
        labels |= {"pod": pod, "namespace": "ml", "container": "trainer"}
    return [
        Series("habanalabs_utilization", labels, util),
        Series("habanalabs_memory_used_bytes", labels, 2.0 * 2**30),
        Series("habanalabs_memory_total_bytes", labels, 96.0 * 2**30),
        Series("habanalabs_power_mW", labels, 410000.0),
        Series("habanalabs_temperature_onchip", labels, 44.0),
    ]


def every_vendor() -> list:
    return [
        *amd_gpu(0, 87.0, ("ml", "train-0", "trainer"), uuid="6b36-74a1-0010"),
        *amd_gpu(1, 0.0, ("ml", "notebook-3", "lab")),  # held and idle
        *amd_gpu(2, 0.0),  # free
        neuron_core(0, 0.9),
        neuron_core(1, 0.7),  # device 0: the mean of its 2 cores
        neuron_core(2, 0.0),
        neuron_core(3, 0.0),
        *tpu_chip(4, 42.0, held=True),
        *tpu_chip(5, 0.0, held=True),  # held and idle
        *tpu_chip(0, 0.0, held=False),  # free
        *gaudi(0, 65.0, pod="bert-0"),
        *gaudi(1, 0.0),
    ]
