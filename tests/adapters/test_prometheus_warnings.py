"""A Prometheus answer's warnings reach the caller who asks for them: a real Prometheus whose
remote_read store does not answer answers with its local data and a warning (storage
fanout: a secondary store's failure is a warning, the answer partial); an answer decoded
whole (another key order) keeps them too."""

from __future__ import annotations

import json
import time

import pytest

from gpuctl.adapters.prometheus import Prometheus
from tests.standins.prometheus import Series, load_blocks, start_prometheus

pytestmark = pytest.mark.integration
LABELS = {"gpu": "0", "UUID": "GPU-0", "Hostname": "n1", "namespace": "ml", "pod": "p"}


def test_a_partial_answer_says_so():
    store = [{"url": "http://127.0.0.1:9/api/v1/read", "read_recent": True}]  # nothing listens
    series = [Series("DCGM_FI_DEV_GPU_UTIL", LABELS, 0.0)]
    prom = start_prometheus(load_blocks(series, time.time()), remote_read=store)
    try:
        warnings: list[str] = []
        client = Prometheus(prom.url)
        (sample,) = client.query_all(["DCGM_FI_DEV_GPU_UTIL"], warnings=warnings)[0]
        assert sample[0]["pod"] == "p"  # the local data is there
        assert len(warnings) == 1 and warnings[0].startswith("remote_read: ")
        assert client.query("DCGM_FI_DEV_GPU_UTIL")  # not asked: not kept
    finally:
        prom.stop()


def test_warnings_of_an_answer_decoded_whole(query_server):
    body = {"warnings": ["store eu-1 \x1b[31mdown\x1b[0m"], "status": "success",
            "data": {"resultType": "vector", "result": []}}  # fmt: skip
    server = query_server(lambda q: json.dumps(body).encode())
    warnings: list[str] = []
    assert Prometheus(server.url).query("up", warnings=warnings) == []
    assert warnings == ["store eu-1 \\x1b[31mdown\\x1b[0m"]  # shown, never obeyed
