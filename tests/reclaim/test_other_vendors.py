"""reclaim's questions to Prometheus on a cluster of other vendors' accelerators, against a
real Prometheus holding each exporter's series as it emits them (tests/vendor_series.py,
which cites the sources): a held device is judged by its vendor's busy signal. Only holders
the scrape kept apart from the exporter's own pod (exported_*, a Prometheus Operator
ServiceMonitor's default) are acted on: an AMD GPU's here; the TPU and Gaudi series of the
corpus name their holder in the plain `pod`, which an action does not trust."""

import time

import pytest

from gpuctl.adapters.prometheus import Prometheus
from gpuctl.dcgm.holders import Exporter
from gpuctl.reclaim.core import signal
from tests.standins.prometheus import load_blocks, start_prometheus
from tests.vendor_series import every_vendor

pytestmark = pytest.mark.integration
WINDOW_S = 600


@pytest.fixture(scope="module")
def readings():
    server = start_prometheus(load_blocks(every_vendor(), time.time()))
    try:
        q = signal.queries([WINDOW_S], 5)
        answers = Prometheus(server.url, timeout=60).query_all(q.all())
        yield signal.read(q, answers, Exporter()), time.time()
    finally:
        server.stop()


def test_an_amd_gpus_holder_is_judged_by_its_gfx_activity(readings):
    found, now = readings
    assert set(found.by_pod) == {("ml", "train-0"), ("ml", "notebook-3")}
    (idle,) = found.devices(("ml", "notebook-3"))
    assert idle.node == "mi300x-1" and idle.last_busy is None  # 0 % the whole lookback
    assert now - 60 < (idle.newest or 0) <= now
    steps = WINDOW_S // signal.step_for(86400)  # the lookback: a day, at least
    assert idle.covered[WINDOW_S] >= steps - 1 and idle.finite[WINDOW_S] >= steps - 1
    (busy,) = found.devices(("ml", "train-0"))
    assert busy.key == ("6b36-74a1-0010", "") and now - 120 < (busy.last_busy or 0)


def test_the_exporters_own_pod_and_plain_pod_labels_hold_nothing(readings):
    found, _ = readings
    pods = {pod for _, pod in found.by_pod}
    assert "amd-metrics-exporter-7xk2p" not in pods  # the free GPU's only pod label
    assert "test-workload-pod" not in pods and "bert-0" not in pods


def test_a_pod_holding_another_vendors_devices_is_a_gpu_workload():
    from gpuctl.reclaim.core import workloads

    def pod(resources: dict) -> dict:
        return {
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": resources}}]},
            "status": {"phase": "Running"},
        }

    assert workloads.pod_gpus(pod({"amd.com/gpu": "2"})) == 2
    assert workloads.pod_gpus(pod({"google.com/tpu": "4", "cpu": "8"})) == 4
    assert workloads.pod_gpus(pod({"nvidia.com/sriov_rdma": "1"})) == 0  # no accelerator
