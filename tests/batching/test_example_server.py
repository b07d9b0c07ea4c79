"""The example server (examples/batched_server.py) over HTTP: concurrent requests are
answered from batches, and its /metrics endpoint says so in Prometheus' text format, under
the names a service's autoscaler queries; promtool accepts the text."""

import concurrent.futures
import importlib.util
import json
import os
import subprocess
import threading
import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuctl.common import batcher_metrics as names
from tests import ROOT
from tests.standins.prometheus import need

pytestmark = pytest.mark.integration


@pytest.fixture
def server():
    path = os.path.join(ROOT, "examples", "batched_server.py")
    spec = importlib.util.spec_from_file_location("batched_server", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    http, metrics = module.start(0, 0, max_batch=16, max_wait_ms=20)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield (
        f"http://127.0.0.1:{http.server_address[1]}",
        f"http://127.0.0.1:{metrics.server_address[1]}",
    )
    http.shutdown()
    metrics.shutdown()


def predict(url, x):
    body = json.dumps({"input": x.tolist()}).encode()
    req = urllib.request.Request(url + "/predict", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)["class"]


def test_concurrent_requests_are_batched_and_the_metrics_say_so(server):
    url, metrics_url = server
    with urllib.request.urlopen(url + "/healthz", timeout=5) as r:
        assert r.status == 200
    inputs = [np.random.default_rng(i).standard_normal(512) for i in range(48)]
    with concurrent.futures.ThreadPoolExecutor(48) as pool:
        answers = list(pool.map(lambda x: predict(url, x), inputs))
    assert all(0 <= a < 10 for a in answers)
    with urllib.request.urlopen(metrics_url + "/metrics", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    samples = {
        s.name: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if "le" not in s.labels
    }
    assert samples[names.REQUESTS] == 48
    assert samples[names.BATCHES] < 48  # some requests shared a batch
    assert samples[names.LATENCY + "_count"] == 48
    assert samples[names.QUEUE_DEPTH] == 0
    lint = subprocess.run(
        [need("promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_a_bad_request_is_refused_and_the_server_keeps_serving(server):
    url, _ = server
    req = urllib.request.Request(url + "/predict", b'{"input": [1, 2]}')
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 400
    assert 0 <= predict(url, np.zeros(512)) < 10
