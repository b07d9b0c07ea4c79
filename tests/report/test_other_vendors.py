"""`gpuctl report` on a cluster of every vendor, against a real Prometheus holding each
exporter's series as it emits them (tests/vendor_series.py, which cites the sources): a team's
held, busy and idle-held device-hours count AMD GPUs, TPU chips and Gaudi devices as they
count NVIDIA's (neuron-monitor names no pods, and its series are per NeuronCore: not here)."""

import dataclasses
import math
import time

import pytest

from gpuctl.adapters.prometheus import Prometheus
from gpuctl.dcgm.holders import Exporter
from gpuctl.report import service
from tests.standins.prometheus import load_blocks, start_prometheus
from tests.vendor_series import AMD_SCRAPE, amd_gpu, every_vendor, tpu_chip

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


# prometheus-community/helm-charts charts/prometheus/values.yaml @005bec23, job
# `kubernetes-pods`: honor_labels true, and the scraped pod's namespace and name as
# `namespace` and `pod`, but no `container`. A free device's series (AMD's empty holder
# labels, the TPU plugin's per-chip series) then carry the exporter's own pod as its holder.
PODS_JOB = {"job": "kubernetes-pods", "instance": "10.0.4.17:5000"}


def _pods_job(series: list, pod: str, namespace: str) -> list:
    """SERIES as the annotation-driven `kubernetes-pods` job stores them: the target's pod
    fills the holder labels the series lacks."""
    out = []
    for s in series:
        labels = {k: v for k, v in s.labels.items() if k not in ("container", "job", "instance")}
        if "pod" not in labels:
            labels |= {"pod": pod, "namespace": namespace}
        else:
            labels["container"] = s.labels["container"]
        out.append(dataclasses.replace(s, labels=labels | PODS_JOB))
    return out


@pytest.fixture(scope="module")
def scraped_by_pods_job():
    """An AMD GPU and a TPU chip held (and idle), beside a free one of each, scraped by the
    `kubernetes-pods` job: on the free ones, the exporter's own pod and no container."""
    amd = amd_gpu(0, 0.0, ("ml", "rocm-2tlcz", "main"), honor_labels=True)
    free_amd = [
        dataclasses.replace(s, labels={k: v for k, v in s.labels.items() if k not in AMD_SCRAPE})
        for s in amd_gpu(1, 0.0)
    ]
    tpu = tpu_chip(5, 0.0, held=True) + tpu_chip(0, 0.0, held=False)
    series = _pods_job(amd + free_amd, AMD_SCRAPE["pod"], "kube-amd-gpu")
    series += _pods_job(tpu, "tpu-device-plugin-x8k2q", "kube-system")
    now = time.time()
    server = start_prometheus(load_blocks(series, now))
    try:
        yield Prometheus(server.url, timeout=60), now
    finally:
        server.stop()


def test_report_counts_as_held_what_reclaim_would_act_on(scraped_by_pods_job):
    """report and reclaim read one rule of who holds another vendor's device
    (exporters.held_branches): a pod named beside no container may be the exporter's own,
    so neither takes it for a holder (reclaim's safety), and both find the same holders."""
    from gpuctl.reclaim.core import signal

    client, now = scraped_by_pods_job
    end = math.floor((now - 10) / STEP_S) * STEP_S
    found = service.report(client, service.Request(window="20m", step="5m", end=end), Exporter())
    q = signal.queries([600], 5)
    reclaim = signal.read(q, client.query_all(q.all()), Exporter())
    held = {("ml", "rocm-2tlcz"), ("test-namespace", "test-workload-pod")}
    assert set(reclaim.by_pod) == held
    assert {(h.namespace, h.pod) for h in found.idle_holders} == held  # both idle
    assert {t.team for t in found.teams} == {"ml", "test-namespace"}
