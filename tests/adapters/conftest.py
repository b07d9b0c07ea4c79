import pytest


@pytest.fixture(params=["lean", "kubernetes"])
def kube_client(request, monkeypatch):
    """Both transports of the Kube adapter: gpuctl's lean one and the official client's
    (the kube_client setting), for tests that must pass on each."""
    monkeypatch.setenv("GPUCTL_KUBE_CLIENT", request.param)
    return request.param
