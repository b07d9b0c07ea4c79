"""The sandbox's AMD and TPU exporters write their series as the real exporters do: the same
names, label names in the same order, the same value format; promtool accepts both texts.

Sources: the exposition captured from GKE's tpu-device-plugin v1.35.7-gke.0 on a
tpu7x-standard-4t node (facebookincubator/dynolog, src/tpumon TpuScraper test, kProbeOutputTpu7x;
the lines below are copied from it); AMD device-metrics-exporter @ afd0fe81
docs/configuration/configmap.md (the labels always set) and docs/configuration/metricslist.md
(a gpu_clock line of a real exporter, values elided there as xxxx)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gpuctl.sim import accelerators
from gpuctl.sim.accelerators import Held

TPU_CAPTURE = """\
# HELP duty_cycle Percent of time when the TPU was actively processing
# TYPE duty_cycle gauge
duty_cycle{accelerator_id="1234567890123456789-4",container="vllm-worker",make="cloud-tpu",model="tpu7x",namespace="test-namespace",pod="test-workload-pod",tpu_topology="2x2x2"} 0
# HELP duty_cycle_node Percent of time when the TPU was actively processing
# TYPE duty_cycle_node gauge
duty_cycle_node{accelerator_id="1234567890123456789-0",make="cloud-tpu",model="tpu7x",tpu_topology="2x2x2"} 0
# HELP memory_total Total memory available on the TPU in bytes
# TYPE memory_total gauge
memory_total{accelerator_id="1234567890123456789-4",container="vllm-worker",make="cloud-tpu",model="tpu7x",namespace="test-namespace",pod="test-workload-pod",tpu_topology="2x2x2"} 2.03465670656e+11
"""
AMD_ALWAYS = (  # configmap.md: "always set and cannot be removed", emitted lower-case
    "SERIAL_NUMBER GPU_ID POD NAMESPACE CONTAINER JOB_ID JOB_USER JOB_PARTITION CARD_MODEL "
    "HOSTNAME GPU_PARTITION_ID GPU_COMPUTE_PARTITION_TYPE GPU_MEMORY_PARTITION_TYPE "
    "DEPLOYMENT_MODE"
)
AMD_DOC_LINE = 'gpu_clock{card_model="xxxx",clock_index="2",clock_type="system",gpu_compute_partition_type="spx",gpu_id="0",gpu_partition_id="0",hostname="xxxx",serial_number="xxxx"} 132'  # fmt: skip
SERIES = re.compile(r"^([a-z_]+)\{(.*)\} (\S+)$")


def parsed(text: str) -> dict[str, list[tuple[list[str], dict[str, str], str]]]:
    """Per metric name: each series' label names in order, its labels and its value text."""
    out: dict[str, list] = {}
    for line in text.splitlines():
        m = SERIES.match(line)
        if m:
            pairs = re.findall(r'([a-z_]+)="([^"]*)"', m.group(2))
            out.setdefault(m.group(1), []).append(([k for k, _ in pairs], dict(pairs), m.group(3)))
    return out


def test_tpu_series_are_named_labelled_and_written_as_gke_s_device_plugin_writes_them():
    held = Held(0, ("test-namespace", "test-workload-pod", "vllm-worker"), 0)
    ours = parsed(accelerators.tpu_metrics_text("n1", "tpu7x", "2x2x2", [held, Held(1, None, 0)]))
    real = parsed(TPU_CAPTURE)
    for name, rows in real.items():
        assert [r[0] for r in ours[name]][:1] == [rows[0][0]], name
    assert len(ours["duty_cycle"]) == 1  # a free chip has only its _node series
    assert len(ours["duty_cycle_node"]) == 2
    help_lines = {line for line in TPU_CAPTURE.splitlines() if line.startswith("#")}
    assert help_lines <= set(accelerators.tpu_metrics_text("n1", "tpu7x", "2x2x2", [held]).splitlines())  # fmt: skip
    assert accelerators.go_float(2.03465670656e11) == "2.03465670656e+11"


def test_amd_series_carry_the_exporter_s_mandatory_labels_in_its_order():
    gpus = [Held(0, ("default", "train-0", "main"), 70), Held(1, None, 0)]
    ours = parsed(accelerators.amd_metrics_text("mi300x-node-1", "MI300X", gpus))
    (row,) = [r for r in ours["gpu_gfx_activity"] if r[1]["pod"] == "train-0"]
    assert row[0] == sorted(AMD_ALWAYS.lower().split())
    assert row[1]["gpu_compute_partition_type"] == "spx" and row[1]["gpu_partition_id"] == "0"
    doc_keys = parsed(AMD_DOC_LINE)["gpu_clock"][0][0]  # the exporter's order: by name
    assert doc_keys == sorted(doc_keys)
    free = [r for r in ours["gpu_gfx_activity"] if r[1]["pod"] == ""]
    assert [r[1]["gpu_id"] for r in free] == ["1"] and free[0][2] == "0"
    assert ours["gpu_total_vram"][0][2] == "196608"  # MB: 192 GiB
    assert ours["gpu_nodes_total"] == [(["hostname"], {"hostname": "mi300x-node-1"}, "2")]


@pytest.mark.integration
@pytest.mark.parametrize("which", ["amd", "tpu"])
def test_promtool_parses_the_exporters_texts(which):
    """promtool parses both; its only lint is the one the upstream names earn themselves
    (gauges memory_total, gpu_nodes_total end in _total)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (make system-deps)")
    held = [Held(i, ("ns", f"p{i}", "c"), 50) for i in range(4)]
    text = (
        accelerators.amd_metrics_text("n", "MI300X", held)
        if which == "amd"
        else accelerators.tpu_metrics_text("n", "tpu-v5-lite-podslice", "2x4", held)
    )
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    lints = done.stderr.splitlines()
    assert done.returncode in (0, 3), done.stderr  # 3: lint findings, parsed
    named = {"memory_total", "gpu_nodes_total", "memory_total_node"}
    suffix = ' non-counter metrics should not have "_total" suffix'
    assert all(line.endswith(suffix) and line.split()[0] in named for line in lints), lints
