"""`gpuctl report` prices other vendors' devices by the model their node's labels name, as
`top --prometheus` and `advise` show it (tests/top/test_vendor_models.py), through the one
rule (Application.cluster_exporter, gpuctl.dcgm.exporters.relabelled): AMD's
device-metrics-exporter labels a GPU with its board part number only and Intel's Gaudi
exporter names no model (tests/vendor_series.py cites both), while AMD's node labeller,
Habana's feature discovery and GKE name them on the nodes (tests/data/nodes/, each citing
its source). Against a real Prometheus and the Kubernetes API emulator."""

from __future__ import annotations

import copy
import json

import pytest

from tests.gpu_cluster import seed
from tests.node_corpus import corpus
from tests.vendor_series import amd_gpu, gaudi, tpu_chip

pytestmark = pytest.mark.integration
HOUR = 20 / 60  # each device held the whole 20-minute window
PRICES = {"MI300X": 3.0, "Gaudi2": 2.0, "TPU-v5e": 1.0, "TPU7x": 5.0}


def node(corpus_name: str, name: str) -> dict:
    out = copy.deepcopy(corpus()[corpus_name])
    out["metadata"]["name"] = out["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return out


@pytest.fixture
def series():
    return [
        *amd_gpu(0, 87.0, ("ml", "train-0", "trainer")),  # on mi300x-1
        *gaudi(0, 65.0, pod="bert-0"),  # on gaudi2-1, team ml
        *tpu_chip(4, 42.0, held=True),  # on gke-tpu-a, labelled model tpu7x
        *amd_gpu(0, 50.0, ("lab", "notebook-1", "lab"), node="mi300x-9"),
    ]


def _report(cli, url: str, tmp_path) -> dict:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"currency": "USD", "prices": PRICES}))
    r = cli("report", "--prometheus", url, "--window", "20m", "--prices", str(prices), "-o", "json")  # fmt: skip
    assert r.code == 0, r
    return {t["team"]: t for t in json.loads(r.out)["teams"]}


def test_report_prices_the_model_the_node_s_labels_name(cli, kube_api, prometheus_with, series, tmp_path):  # fmt: skip
    # the TPU node's labels name a v5e (GKE's label), its chip's series tpu7x: the node wins
    nodes = [("amd-mi300x-labeller", "mi300x-1"), ("gaudi2-hfd", "gaudi2-1"), ("gke-tpu-v5e-2x4", "gke-tpu-a")]  # fmt: skip
    seed(kube_api, *(node(c, n) for c, n in nodes))
    teams = _report(cli, prometheus_with(series).url, tmp_path)
    assert teams["ml"]["unpriced_models"] == []
    assert teams["ml"]["cost"] == pytest.approx((3.0 + 2.0) * HOUR, abs=0.01)
    assert teams["test-namespace"]["cost"] == pytest.approx(1.0 * HOUR, abs=0.01)
    # no such node in the cluster: the model the series label, AMD's part number
    assert teams["lab"]["unpriced_models"] == ["102-D65209-0C"]


def test_without_a_cluster_the_series_labels_name_the_model(cli, prometheus_with, series, tmp_path):  # fmt: skip
    teams = _report(cli, prometheus_with(series).url, tmp_path)
    assert teams["ml"]["unpriced_models"] == ["102-D65209-0C", "?"]  # Gaudi's series: no model
    # GKE's accelerator name read as the cluster view reads it (tpu7x: TPU7x)
    assert teams["test-namespace"]["cost"] == pytest.approx(5.0 * HOUR, abs=0.01)
