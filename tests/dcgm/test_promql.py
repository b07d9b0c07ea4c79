"""Series of several metrics kept apart (gpuctl.dcgm.promql.per_metric), on a real Prometheus
holding what dcgm-exporter's default counters give a GPU: GPU_UTIL and GR_ENGINE_ACTIVE
with the same labels."""

import pytest

from gpuctl.adapters.prometheus import Prometheus
from gpuctl.common.errors import BackendError
from gpuctl.dcgm import busy
from gpuctl.dcgm.metrics import GR_ACTIVE, UTIL
from gpuctl.dcgm.promql import METRIC, per_metric
from tests.standins.dcgm_series import device_series

pytestmark = pytest.mark.integration

LABELS = {"gpu": "0", "UUID": "GPU-a", "Hostname": "n1", "modelName": "NVIDIA H100 80GB HBM3"}


@pytest.fixture(scope="module")
def prom():
    import time

    from tests.standins.prometheus import load_blocks, start_prometheus

    server = start_prometheus(load_blocks(device_series(LABELS, 40, 1000, 81559), time.time()))
    yield server
    server.stop()


def test_a_function_over_several_metrics_is_refused_and_the_hint_names_the_query(prom):
    naive = f'timestamp({{__name__=~"{UTIL}|{GR_ACTIVE}"}})'
    with pytest.raises(BackendError) as e:
        Prometheus(prom.url).query(naive)
    assert "HTTP 422" in str(e.value) and "same labelset" in str(e.value)
    assert "--prometheus" not in (e.value.hint or "")  # the URL is not to blame
    assert naive in (e.value.hint or "")


def test_per_metric_keeps_each_metrics_series(prom):
    answer = Prometheus(prom.url).query(per_metric(lambda m: f"timestamp({m})", busy.SIGNALS))
    # the default counters give no SM_ACTIVE: one series for each of the other two
    assert sorted(labels[METRIC] for labels, _ in answer) == sorted([GR_ACTIVE, UTIL])
    assert all(labels["UUID"] == "GPU-a" and "__name__" not in labels for labels, _ in answer)
