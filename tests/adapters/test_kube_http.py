"""The lean transport's connections (gpuctl.adapters.kube_http) against the API emulator: an
answer read whole gives its connection back once, for the next request to reuse; one not read
whole closes it."""

from __future__ import annotations

import pytest

from gpuctl.adapters.kube_http import Transport
from gpuctl.adapters.kubeconfig import Target

pytestmark = pytest.mark.integration


def _get(t: Transport, path: str = "/api/v1/namespaces"):
    return t.request("GET", path, None, None, "application/json", 10)


def test_a_connection_read_whole_is_kept_once_and_reused(kube):
    t = Transport(Target(context=None, namespace=None, server=kube.url), 10)
    answer = _get(t)
    assert answer.data.startswith(b"{")
    answer.release_conn()  # after the body was read: nothing more to give back
    assert len(t._kept) == 1
    first = t._kept[0]
    for _ in range(3):
        assert _get(t).data
    assert t._kept == [first]  # the same connection each time, kept once
    t.close()
    assert t._kept == [] and first.sock is None


def test_a_stream_left_unread_closes_its_connection(kube):
    t = Transport(Target(context=None, namespace=None, server=kube.url), 10)
    answer = _get(t, "/api/v1/namespaces?watch=true&timeoutSeconds=5")
    answer.release_conn()  # a watch given up: its connection cannot serve another request
    assert t._kept == []
    assert _get(t).data  # a new connection serves the next one
    assert len(t._kept) == 1
