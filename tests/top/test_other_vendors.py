"""`gpuctl top --prometheus URL` on a cluster of every vendor, against a real Prometheus holding
each exporter's series as it emits them (tests/vendor_series.py, which cites the sources)."""

import io
import time

import pytest

from tests.clirun import run_gpuctl
from tests.clirun import top_snapshot as snapshot
from tests.standins.prometheus import load_blocks, start_prometheus
from tests.vendor_series import every_vendor

pytestmark = pytest.mark.integration


def rows(doc) -> dict:
    return {(g["vendor"], g["node"], g["gpu"]): g for g in doc["gpus"]}


def test_every_vendors_devices_are_rows_with_vendor_model_and_busy_signal(
    vendors_prometheus, capsys
):
    got = rows(snapshot(capsys, vendors_prometheus.url))
    amd = got["amd", "mi300x-1", "0"]
    assert (amd["model"], amd["utilization_gpu"], amd["signal"]) == (
        "102-D65209-0C",
        87.0,
        "gfx_activity",
    )
    assert amd["uuid"] == "6b36-74a1-0010" and amd["idle"] is False
    assert (amd["memory_used_mib"], amd["memory_total_mib"]) == (81920, 196592)
    assert (amd["temperature_c"], amd["power_w"]) == (61.0, 712.0)
    assert amd["holders"] == [{"namespace": "ml", "pod": "train-0", "container": "trainer"}]
    # Neuron: a device per 2 NeuronCores of a trn1n.32xlarge, its cores' mean, in percent
    trn = got["aws", "i-09db9b55e0095612f", "0"]
    assert (trn["model"], trn["utilization_gpu"], trn["signal"]) == (
        "Trainium",
        80.0,
        "neuroncore_utilization",
    )
    assert got["aws", "i-09db9b55e0095612f", "1"]["idle"] is True
    tpu = got["google", "gke-tpu-a", "4"]
    assert (tpu["model"], tpu["utilization_gpu"], tpu["signal"]) == ("TPU7x", 42.0, "duty_cycle")
    assert tpu["uuid"] == "1234567890123456789-4" and tpu["memory_used_mib"] == 32768
    assert tpu["pod"] == "test-workload-pod" and tpu["namespace"] == "test-namespace"
    hl = got["intel", "gaudi2-1", "accel0"]
    assert (hl["utilization_gpu"], hl["signal"], hl["power_w"]) == (
        65.0,
        "habanalabs_utilization",
        410.0,
    )
    assert hl["pod"] == "bert-0" and hl["memory_total_mib"] == 98304


def test_free_devices_name_no_holder_even_where_the_scrape_names_the_exporters_pod(
    vendors_prometheus, capsys
):
    got = rows(snapshot(capsys, vendors_prometheus.url))
    assert got["amd", "mi300x-1", "2"]["holders"] == []  # only the exporter's own pod
    assert got["google", "gke-tpu-a", "0"]["holders"] == []  # duty_cycle_node alone
    assert got["aws", "i-09db9b55e0095612f", "0"]["holders"] == []  # neuron-monitor knows none


def test_waste_is_counted_for_every_vendor_alike(vendors_prometheus, capsys):
    doc = snapshot(capsys, vendors_prometheus.url)
    s = doc["summary"]
    # 3 AMD + 16 Neuron devices (2 reporting) + 3 TPU chips + 2 Gaudi: the reporting ones
    assert s["gpus"] == 3 + 2 + 3 + 2
    idle = {(g["vendor"], g["gpu"]) for g in doc["gpus"] if g["idle"]}
    assert idle == {("amd", "1"), ("amd", "2"), ("aws", "1"), ("google", "5"), ("google", "0"),
                    ("intel", "accel1")}  # fmt: skip
    assert s["idle_allocated_gpus"] == 2  # AMD 1 (notebook-3) and TPU chip 5
    assert s["signal"] == (
        "duty_cycle 3, gfx_activity 3, habanalabs_utilization 2, neuroncore_utilization 2"
    )
    ml = {n["namespace"]: n for n in doc["namespaces"]}["ml"]
    assert (ml["gpus"], ml["idle_gpus"]) == (3, 1)


def test_the_table_names_each_vendor_beside_its_model(vendors_prometheus, capsys):
    code, out, err = run_gpuctl(capsys, "top", "--prometheus", vendors_prometheus.url, "--once")
    assert code == 0, err
    assert "AMD 102-D65209-0C" in out and "Google TPU7x" in out and "AWS Trainium" in out


def test_the_live_view_shows_a_cluster_without_nvidia_gpus(vendors_prometheus):
    """The live frames' figures are computed from dcgm-exporter's series: on a cluster of
    other vendors only, each frame reads every device whole instead."""
    from gpuctl.adapters.prometheus import Prometheus
    from gpuctl.dcgm.holders import Exporter
    from gpuctl.top.cluster import service as cluster

    frames = cluster.LiveFrames(
        Prometheus(vendors_prometheus.url), "10m", 5.0, Exporter(), "util", 0.2
    )
    try:
        frame, _ = frames.frame(3)
        assert [(r.vendor, r.utilization_gpu) for r in frame.rows] == [
            ("amd", 87.0),
            ("aws", 80.0),
            ("intel", 65.0),
        ]  # the 3 busiest, sorted by utilization
        assert frame.summary.gpus == 10
        frames.filter = "TPU7x"
        frame, _ = frames.frame(3)
        assert frame.matched == 3 and {r.vendor for r in frame.rows} == {"google"}
    finally:
        frames.close()


@pytest.fixture(scope="module")
def mixed():
    from tests.cluster_data import gpu

    nvidia = gpu("Hostname", "h100-1", 0, 95.0, pod="llm-0", namespace="ml")
    server = start_prometheus(load_blocks(every_vendor() + nvidia, time.time()))
    yield server
    server.stop()


def test_the_live_view_of_a_mixed_cluster_shows_every_vendors_rows(mixed):
    """An NVIDIA GPU beside the other vendors' devices: the live frames read every device
    whole (the figures are dcgm-exporter's alone), as --once does."""
    from gpuctl.adapters.prometheus import Prometheus
    from gpuctl.dcgm.holders import Exporter
    from gpuctl.top.cluster import service as cluster

    frames = cluster.LiveFrames(Prometheus(mixed.url), "10m", 5.0, Exporter(), "util", 0.2)
    try:
        frame, _ = frames.frame(4)
        assert [(r.vendor, r.utilization_gpu) for r in frame.rows] == [
            ("nvidia", 95.0),
            ("amd", 87.0),
            ("aws", 80.0),
            ("intel", 65.0),
        ]
        assert frame.summary.gpus == 11 and not frame.others_left_out
    finally:
        frames.close()


def test_a_large_mixed_cluster_s_live_view_says_other_vendors_are_in_once(mixed, monkeypatch):
    """Beyond EVERY_DEVICE_ROWS NVIDIA devices a frame is not read whole: its rows and figures
    are dcgm-exporter's, and the status line says where the other vendors' devices are."""
    from rich.console import Console

    from gpuctl.adapters.prometheus import Prometheus
    from gpuctl.common.keys import View
    from gpuctl.dcgm.holders import Exporter
    from gpuctl.top.cluster import service as cluster
    from gpuctl.top.cluster import views

    monkeypatch.setattr(cluster, "EVERY_DEVICE_ROWS", 0)
    frames = cluster.LiveFrames(Prometheus(mixed.url), "10m", 5.0, Exporter(), "util", 0.2)
    try:
        frame, age = frames.frame(4)
        assert [r.vendor for r in frame.rows] == ["nvidia"] and frame.others_left_out
        screen = cluster.Screen(frame, 4, None, age)
        console = Console(width=200, file=io.StringIO())
        console.print(views.live_render(screen, View(sort="util"), "10m", 5.0, 0.2))
        assert "NVIDIA GPUs only: other vendors' devices are in --once" in console.file.getvalue()
    finally:
        frames.close()


def test_the_live_view_of_a_mixed_cluster_asks_no_figures_it_does_not_show(mixed, monkeypatch):
    """Read whole, a mixed cluster's frame is three queries (snapshot): the live figures,
    dcgm-exporter's alone, are asked once to choose that, not every tick beside it
    (counted by the real Prometheus's own /metrics); grown past EVERY_DEVICE_ROWS, the
    figures are asked again and the frames are NVIDIA's."""
    from gpuctl.adapters.prometheus import Prometheus
    from gpuctl.dcgm.holders import Exporter
    from gpuctl.top.cluster import service as cluster

    delay, ticks = 1.0, 3
    frames = cluster.LiveFrames(Prometheus(mixed.url), "10m", 5.0, Exporter(), "util", delay)
    try:
        before = mixed.query_requests()
        for _ in range(ticks):
            frame, _ = frames.frame(4)
            assert frame.summary.gpus == 11
            time.sleep(delay * 1.2)  # a tick: the figures' refresh is due in each
        assert mixed.query_requests() - before == 1 + 3 * ticks
        monkeypatch.setattr(cluster, "EVERY_DEVICE_ROWS", 0)
        frame, _ = frames.frame(4)  # read whole, which finds the cluster grown
        assert frame.summary.gpus == 11
        frame, _ = frames.frame(4)
        assert [r.vendor for r in frame.rows] == ["nvidia"] and frame.others_left_out
    finally:
        frames.close()
