"""Other vendors in `gpuctl sandbox`: an AMD MI300X node and a 2-host TPU v5e 2x4 slice beside
an NVIDIA node, labelled as AMD's GPU Operator and GKE label them; gpuctl names their
accelerators, an MI300X spec lands on the AMD node, a TPU 2x4 spec runs as 2 workers of 4 chips
on the slice's two hosts, and the sandbox's Prometheus scrapes each vendor's exporter with the
pods that hold the chips, which the cluster view reads as it reads dcgm-exporter's."""

from __future__ import annotations

import json

import pytest

from tests.clirun import run_gpuctl
from tests.sandbox.test_sandbox import _series, _until
from tests.standins.prometheus import need

pytestmark = pytest.mark.integration
pytest.importorskip("kmock")

NODES = "1xH100-80GB,1xMI300X,1xTPU-v5e:2x4"
MI300X = """apiVersion: gpuctl/v1
kind: Job
name: rocm
image: rocm/pytorch:latest
accelerator: mi300x
gpus: 4
env: {SANDBOX_RUNTIME: "600", SANDBOX_GPU_UTIL: "70"}
"""
TPU = """apiVersion: gpuctl/v1
kind: Job
name: jax
image: us-docker.pkg.dev/cloud-tpu-images/jax-ai-image/tpu:latest
accelerator: tpu-v5e
tpu_topology: 2x4
env: {SANDBOX_RUNTIME: "600", SANDBOX_GPU_UTIL: "55"}
"""


def _pods(kubeconfig: str) -> list[dict]:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    return [p.to_dict() for p in api.list_namespaced_pod("default").items]


def test_an_amd_node_and_a_tpu_slice_run_their_jobs_and_export_their_series(
    tmp_path, monkeypatch, capsys
):
    prometheus = need("prometheus")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    start = ("sandbox", "start", "--gpu-nodes", NODES, "--prometheus-bin", prometheus, "-o", "json")  # fmt: skip
    code, out, err = run_gpuctl(capsys, *start)
    assert code == 0, err
    info = json.loads(out)
    try:
        monkeypatch.setenv("KUBECONFIG", info["kubeconfig"])
        code, out, _ = run_gpuctl(capsys, "nodes", "-o", "json")
        assert code == 0
        named = {
            n["name"]: [(a["vendor"], a["model"], a["count"]) for a in n["accelerators"]]
            for n in json.loads(out)["nodes"]
        }
        assert named["mi300x-node-1"] == [("amd", "MI300X", 8)]
        assert named["tpu-v5e-2x4-1-node-1"] == named["tpu-v5e-2x4-1-node-2"] == [("google", "TPU-v5e", 4)]  # fmt: skip
        assert named["h100-node-1"] == [("nvidia", "H100-80GB", 8)]
        for name, text in (("rocm", MI300X), ("jax", TPU)):
            (tmp_path / f"{name}.yaml").write_text(text)
            code, _, err = run_gpuctl(capsys, "submit", tmp_path / f"{name}.yaml")
            assert code == 0, err

        def running() -> dict[str, list[tuple[str, dict]]]:
            out: dict[str, list[tuple[str, dict]]] = {}
            for p in _pods(info["kubeconfig"]):
                if p["status"]["phase"] == "Running":
                    job = p["metadata"]["labels"].get("gpuctl.io/job", "")
                    limits = p["spec"]["containers"][0]["resources"]["limits"]
                    out.setdefault(job, []).append((p["spec"]["node_name"], limits))
            return out if len(out.get("jax", [])) == 2 and out.get("rocm") else {}

        placed = _until(running, timeout=60)
        assert placed["rocm"] == [("mi300x-node-1", {"amd.com/gpu": "4"})]
        assert sorted(placed["jax"], key=lambda r: r[0]) == [
            ("tpu-v5e-2x4-1-node-1", {"google.com/tpu": "4"}),
            ("tpu-v5e-2x4-1-node-2", {"google.com/tpu": "4"}),
        ]
        prom = info["prometheus"]
        held = _until(lambda: _series(prom, 'gpu_gfx_activity{pod=~"rocm-.*"}'), timeout=60)
        assert len(held) == 4  # the 4 GPUs the pod holds
        for s in held:
            labels = s["metric"]
            assert labels["hostname"] == "mi300x-node-1" and labels["namespace"] == "default"
            assert labels["job"] == "exporter-amdgpu-metrics-exporter" and s["value"][1] == "70"
        free = _series(prom, 'gpu_gfx_activity{pod=""}')
        assert sorted(s["metric"]["gpu_id"] for s in free) == ["4", "5", "6", "7"]
        both = 'count(count by (instance) (duty_cycle{pod=~"jax-.*"})) == 2'
        _until(lambda: _series(prom, both), timeout=60)  # both hosts' exporters scraped
        chips = _series(prom, 'duty_cycle{pod=~"jax-.*"}')
        assert len(chips) == 8  # 2 workers × 4 chips
        assert {s["metric"]["model"] for s in chips} == {"tpu-v5-lite-podslice"}
        assert {s["metric"]["tpu_topology"] for s in chips} == {"2x4"}
        assert {s["value"][1] for s in chips} == {"55"}
        assert len({s["metric"]["pod"] for s in chips}) == 2
        hosts = {s["metric"]["node"] for s in chips}
        assert hosts == {"tpu-v5e-2x4-1-node-1", "tpu-v5e-2x4-1-node-2"}
        # the cluster view reads both exporters' series as it reads dcgm-exporter's
        top = ("top", "--prometheus", prom, "-o", "json", "--window", "1m")
        code, out, err = run_gpuctl(capsys, *top)
        assert code == 0, err
        rows = json.loads(out)["gpus"]
        amd = [(g["node"], g["model"], (g["pod"] or "")[:5], g["utilization_gpu"]) for g in rows if g["vendor"] == "amd"]  # fmt: skip
        # the model from the node's labels (the exporter labels a board part number)
        assert len(amd) == 8 and amd.count(("mi300x-node-1", "MI300X", "rocm-", 70.0)) == 4
        code, out, err = run_gpuctl(capsys, "advise", "--prometheus", prom, "--window", "1m", "-o", "json")  # fmt: skip
        assert code == 0, err
        named = {(w["kind"], w["name"], w["model"]) for w in json.loads(out)["workloads"]}
        assert named == {("Job", "rocm", "MI300X"), ("JobSet", "jax", "TPU-v5e")}
        # reclaim finds both jobs' devices, though their holders are in the plain pod labels
        # (honorLabels true): a minute-old series has gaps, or is busy, never missing
        code, out, err = run_gpuctl(capsys, "reclaim", "--prometheus", prom, "--idle-for", "1m", "-o", "json")  # fmt: skip
        assert code == 0, err
        judged = {(w["kind"], w["name"]): w["status"] for w in json.loads(out)["workloads"]}
        assert set(judged) == {("Job", "rocm"), ("JobSet", "jax")}
        assert set(judged.values()) <= {"gap", "busy"}, judged
        tpu = [g for g in rows if g["vendor"] == "google"]
        assert {g["node"] for g in tpu} == {"tpu-v5e-2x4-1-node-1", "tpu-v5e-2x4-1-node-2"}
        assert len(tpu) == 8 and {g["model"] for g in tpu} == {"TPU-v5e"}
        assert {g["pod"][:4] for g in tpu} == {"jax-"} and not any(g["idle"] for g in tpu)
        node_series = _series(prom, "tensorcore_utilization_node")
        assert len(node_series) == 8  # every chip, held or not; the exporter's pod as target
        assert {s["metric"]["pod"][:18] for s in node_series} == {"tpu-device-plugin-"}
    finally:
        run_gpuctl(capsys, "sandbox", "stop")
