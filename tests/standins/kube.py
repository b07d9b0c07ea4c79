"""The Kubernetes API emulator as pytest fixtures; the emulator itself is gpuctl.sim.kube
(shipped for `gpuctl sandbox`)."""

from __future__ import annotations

import pytest

from gpuctl.sim.kube import VERSION, KubeEmulator, api_server_class, write_kubeconfig

__all__ = ["VERSION", "KubeEmulator", "api_server_class", "kube", "kube_api", "write_kubeconfig"]


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
