"""`gpuctl report` on a cluster of every vendor, against a real Prometheus holding each
exporter's series as it emits them (tests/vendor_series.py, which cites the sources): a team's
held, busy and idle-held device-hours count AMD GPUs, TPU chips and Gaudi devices as they
count NVIDIA's (neuron-monitor names no pods, and its series are per NeuronCore: not here)."""

import math
import time

import pytest

from gpuctl.adapters.prometheus import Prometheus
from gpuctl.dcgm.holders import Exporter
from gpuctl.report import service
from tests.standins.prometheus import load_blocks, start_prometheus
from tests.vendor_series import every_vendor

pytestmark = pytest.mark.integration
STEP_S = 300


@pytest.fixture(scope="module")
def report():
    now = time.time()
    server = start_prometheus(load_blocks(every_vendor(), now))
    try:
        end = math.floor((now - 10) / STEP_S) * STEP_S  # within the series' half hour
        request = service.Request(window="20m", step="5m", end=end)
        yield service.report(Prometheus(server.url, timeout=60), request, Exporter())
    finally:
        server.stop()


def test_each_vendors_held_devices_count_for_their_team(report):
    teams = {t.team: t for t in report.teams}
    hour = 20 / 60  # each device held the whole window
    ml = teams["ml"]  # AMD train-0 (87 %), AMD notebook-3 (idle), Gaudi bert-0 (65 %)
    assert ml.held_gpu_hours == pytest.approx(3 * hour, rel=0.01)
    assert ml.busy_gpu_hours == pytest.approx((0.87 + 0.65) * hour, rel=0.01)
    assert ml.idle_held_gpu_hours == pytest.approx(hour, rel=0.01)
    tpu = teams["test-namespace"]  # TPU chips 4 (42 % duty cycle) and 5 (idle)
    assert tpu.held_gpu_hours == pytest.approx(2 * hour, rel=0.01)
    assert tpu.busy_gpu_hours == pytest.approx(0.42 * hour, rel=0.01)
    assert tpu.idle_held_gpu_hours == pytest.approx(hour, rel=0.01)
    assert set(tpu.busy_by_signal) == {"duty_cycle"}
    assert set(ml.busy_by_signal) == {"gfx_activity", "habanalabs_utilization"}


def test_the_cluster_counts_every_vendors_devices(report):
    # 3 AMD GPUs, 3 TPU chips, 2 Gaudi devices report a busy signal at each of 4 steps
    assert report.signal == (
        f"duty_cycle {3 * 4}, gfx_activity {3 * 4}, habanalabs_utilization {2 * 4}"
    )
