"""`gpuctl sandbox` end to end: started in the background, gpuctl submits to it through its
kubeconfig, the simulated scheduler and kubelets run the pods, a job that cannot be placed
waits with the scheduler's reason, and `stop` ends it."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.clirun import run_gpuctl
from tests.standins.prometheus import need

pytestmark = pytest.mark.integration
pytest.importorskip("kmock")

SPEC = """apiVersion: gpuctl/v1
kind: Job
name: {name}
image: nvcr.io/nvidia/pytorch:24.05-py3
gpus: {gpus}
gpu_type: h100
env: {{SANDBOX_RUNTIME: "{runtime}"}}
"""


def _until(check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError("not reached in time")


def test_jobs_run_wait_and_finish_on_the_sandbox(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    code, out, err = run_gpuctl(
        capsys,
        "sandbox",
        "start",
        "--gpu-nodes",
        "1xH100-80GB",
        "--prometheus-bin",
        "",
        "-o",
        "json",
    )
    assert code == 0, err
    info = json.loads(out)
    assert info["simulator"] is True and info["prometheus"] is None
    try:
        monkeypatch.setenv("KUBECONFIG", info["kubeconfig"])
        code, out, _ = run_gpuctl(capsys, "sandbox", "status")
        assert code == 0 and "simulator" in out and f"export KUBECONFIG={info['kubeconfig']}" in out
        for name, gpus, runtime in (("short", 2, 1), ("long", 6, 600), ("waits", 4, 1)):
            (tmp_path / f"{name}.yaml").write_text(
                SPEC.format(name=name, gpus=gpus, runtime=runtime)
            )
            code, _, err = run_gpuctl(capsys, "submit", tmp_path / f"{name}.yaml")
            assert code == 0, err

        def states():
            code, out, _ = run_gpuctl(capsys, "jobs", "list", "-o", "json")
            return {r["name"]: r["status"] for r in json.loads(out)["jobs"]} if code == 0 else {}

        # short runs for a second and succeeds; long holds 6 of 8 GPUs, so waits (4) stays
        # pending even after short's 2 GPUs are free again
        _until(lambda: states() == {"short": "Succeeded", "long": "Running", "waits": "Pending"})
        code, out, _ = run_gpuctl(capsys, "jobs", "why", "waits")
        assert code == 0
        assert (
            "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match" in out
        )
    finally:
        code, out, _ = run_gpuctl(capsys, "sandbox", "stop")
    assert code == 0 and "stopped" in out
    code, _, err = run_gpuctl(capsys, "sandbox", "status")
    assert code == 1 and "no sandbox gpuctl is running" in err


def _series(prometheus: str, query: str) -> list[dict]:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as answer:
        return list(json.loads(answer.read())["data"]["result"])


def test_named_sandboxes_run_side_by_side_and_a_restart_starts_empty(tmp_path, monkeypatch, capsys):
    """Two sandboxes by name, each with its own API, kubeconfig and Prometheus; a sandbox
    started again shows none of the holders its last run's Prometheus saw."""
    prometheus = need("prometheus")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    start = ("sandbox", "start", "--gpu-nodes", "1xH100-80GB", "--prometheus-bin", prometheus)
    infos = {}
    try:
        for name in ("one", "two"):
            code, out, err = run_gpuctl(capsys, *start, "--name", name, "-o", "json")
            assert code == 0, err
            infos[name] = json.loads(out)
        one, two = infos["one"], infos["two"]
        for key in ("api", "kubeconfig", "prometheus", "state_dir"):
            assert one[key] != two[key], key
        code, out, _ = run_gpuctl(capsys, "sandbox", "list", "-o", "json")
        listed = {s["name"]: s["running"] for s in json.loads(out)["sandboxes"]}
        assert listed == {"one": True, "two": True}
        monkeypatch.setenv("KUBECONFIG", one["kubeconfig"])
        (tmp_path / "held.yaml").write_text(SPEC.format(name="held", gpus=8, runtime=600))
        assert run_gpuctl(capsys, "submit", tmp_path / "held.yaml")[0] == 0
        held = (
            'DCGM_FI_DEV_GPU_UTIL{exported_pod=~"held-.*"} or DCGM_FI_DEV_GPU_UTIL{pod=~"held-.*"}'
        )
        _until(lambda: _series(one["prometheus"], held), timeout=60)
        _until(lambda: _series(two["prometheus"], "DCGM_FI_DEV_GPU_UTIL"), timeout=60)
        assert _series(two["prometheus"], held) == []
        monkeypatch.setenv("KUBECONFIG", two["kubeconfig"])
        code, out, _ = run_gpuctl(capsys, "jobs", "list", "-A", "-o", "json")
        assert code == 0 and json.loads(out)["jobs"] == []
        assert run_gpuctl(capsys, "sandbox", "stop", "--name", "one")[0] == 0
        code, out, _ = run_gpuctl(capsys, "sandbox", "list", "-o", "json")
        assert [s["name"] for s in json.loads(out)["sandboxes"]] == ["two"]
        assert not Path(one["state_dir"], "prometheus").exists()
        assert not Path(one["kubeconfig"]).exists()
        code, out, err = run_gpuctl(capsys, *start, "--name", "one", "-o", "json")
        assert code == 0, err
        again = json.loads(out)["prometheus"]
        _until(lambda: _series(again, "DCGM_FI_DEV_GPU_UTIL"), timeout=60)
        assert _series(again, held) == []
    finally:
        for name in ("one", "two"):
            run_gpuctl(capsys, "sandbox", "stop", "--name", name)
