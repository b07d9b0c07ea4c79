"""`gpuctl top --prometheus URL` against a real Prometheus holding DCGM-exporter data."""

import http.server
import json
import os
import threading
import time

import pytest

from tests import ROOT, children
from tests.clirun import run_gpuctl as gpuctl
from tests.clirun import top_snapshot as snapshot
from tests.cluster_data import (
    A100,
    H100,
    TOTAL_MIB,
    dcgm_values,
    gpu,
    mixed_cluster,
    stranded_cluster,
)
from tests.standins import dcgm_exporter as dcgm
from tests.standins.faults import wait_until
from tests.standins.prometheus import free_port, load_blocks, start_dcgm_scrape, start_prometheus

pytestmark = pytest.mark.integration  # Prometheus, shared by the module (`prom`)

GPU_KEYS = {
    "node",
    "gpu",
    "uuid",
    "vendor",
    "model",
    "utilization_gpu",
    "memory_used_mib",
    "memory_total_mib",
    "temperature_c",
    "power_w",
    "pod",
    "namespace",
    "holders",
    "idle",
    "signal",
}


@pytest.fixture(scope="module")
def prom():
    server = start_prometheus(load_blocks(mixed_cluster(), time.time()))
    yield server
    server.stop()


def by_device(doc) -> dict:
    return {(g["node"], g["gpu"]): g for g in doc["gpus"]}


def test_json_has_exactly_the_documented_shape(prom, capsys):
    doc = snapshot(capsys, prom.url)
    assert set(doc) == {"gpus", "mig_gpus", "namespaces", "summary"}
    assert all(set(g) == GPU_KEYS for g in doc["gpus"])
    assert all(
        set(g) == {"node", "gpu", "uuid", "model", "mig_slices", "temperature_c", "power_w"}
        for g in doc["mig_gpus"]
    )
    assert all(
        set(n)
        == {"namespace", "gpus", "mig_slices", "mean_utilization", "idle_gpus", "idle_mig_slices"}
        for n in doc["namespaces"]
    )
    assert set(doc["summary"]) == {
        "gpus",
        "mig_gpus",
        "mig_slices",
        "mean_utilization",
        "idle_gpus",
        "idle_mig_slices",
        "idle_allocated_gpus",
        "idle_allocated_mig_slices",
        "request_shape_gpus",
        "stranded_gpus",
        "signal",
    }


def test_one_row_per_gpu_grouped_by_node_with_values(prom, capsys):
    doc = snapshot(capsys, prom.url)
    assert [(g["node"], g["gpu"]) for g in doc["gpus"]] == [
        ("node-10", "0/mig1"),
        ("node-10", "0/mig2"),
        ("node-a", "0"),
        ("node-a", "1"),
        ("node-a", "2"),
        ("node-a", "3"),
        ("node-b", "0"),
        ("node-b", "1"),
    ]  # the twice-scraped GPU is one row
    a0 = by_device(doc)[("node-a", "0")]
    used = round(TOTAL_MIB * 0.9 * 0.9) + 500
    assert a0 == {
        "node": "node-a",
        "gpu": "0",
        "uuid": "GPU-node-a-0000",
        "vendor": "nvidia",  # dcgm-exporter's devices
        "model": "NVIDIA H100 80GB HBM3",
        "utilization_gpu": 90.0,
        "memory_used_mib": used,
        "memory_total_mib": TOTAL_MIB,  # used + free
        "temperature_c": 60.0,
        "power_w": 610.5,
        "pod": "train-0",
        "namespace": "ml",
        "holders": [{"namespace": "ml", "pod": "train-0", "container": "main"}],
        "idle": False,
        "signal": "gr_engine_active",  # the default counters' profiling field
    }
    # node-b's exporter has no profiling fields: its duty cycle judges it
    assert by_device(doc)[("node-b", "0")]["signal"] == "gpu_util"


def test_idle_and_idle_allocated(prom, capsys):
    doc = snapshot(capsys, prom.url)
    rows = by_device(doc)
    idle = {k for k, g in rows.items() if g["idle"]}
    assert idle == {("node-a", "1"), ("node-a", "2"), ("node-a", "3"), ("node-10", "0/mig2")}
    # node-a/3 is at 0 % now and has been for 20 minutes: idle over the default 10m window.
    assert rows[("node-a", "3")]["utilization_gpu"] == 0
    assert doc["summary"] == {
        # 6 whole GPUs and node-10's A100, split into 2 MIG slices
        "gpus": 7,
        "mig_gpus": 1,
        "mig_slices": 2,
        "mean_utilization": pytest.approx(30.5, abs=0.1),
        "idle_gpus": 3,
        "idle_mig_slices": 1,
        "idle_allocated_gpus": 2,
        "idle_allocated_mig_slices": 1,
        # every pod holds one whole GPU, and one fits wherever a GPU is free
        "request_shape_gpus": 1,
        "stranded_gpus": 0,
        # node-a's GPUs and the MIG slices by their engine activity, node-b's (no profiling
        # fields) by their duty cycle
        "signal": "gr_engine_active 6, gpu_util 2",
    }
    assert doc["mig_gpus"] == [
        {"node": "node-10", "gpu": "0", "uuid": "GPU-node-10-0000", "model": A100,
         "mig_slices": 2, "temperature_c": 46.0, "power_w": 370.5}
    ]  # fmt: skip


def test_window_and_threshold_are_honoured(prom, capsys):
    # Over 30 minutes node-a/3 averaged ~30 %: no longer idle.
    doc = snapshot(capsys, prom.url, "--window", "30m")
    assert by_device(doc)[("node-a", "3")]["idle"] is False
    assert doc["summary"]["idle_allocated_gpus"] == 1
    # At a 1.5 % threshold the 2 % GPU is busy enough, the 1 % ones are not.
    doc = snapshot(capsys, prom.url, "--idle-threshold", "1.5")
    rows = by_device(doc)
    assert rows[("node-a", "2")]["idle"] is False and rows[("node-a", "1")]["idle"] is True
    assert doc["summary"]["idle_gpus"] == 2


def test_both_host_label_spellings(prom, capsys):
    rows = by_device(snapshot(capsys, prom.url))
    assert rows[("node-b", "0")]["pod"] == "job-1"  # `hostname`
    assert rows[("node-a", "0")]["pod"] == "train-0"  # `Hostname`


def test_mig_rows_use_gr_engine_active(prom, capsys):
    rows = by_device(snapshot(capsys, prom.url))
    m1, m2 = rows[("node-10", "0/mig1")], rows[("node-10", "0/mig2")]
    assert m1["model"] == f"{A100} MIG 3g.40gb" and m1["uuid"] == "GPU-node-10-0000"
    assert m1["utilization_gpu"] == 50.0 and m1["idle"] is False  # 0.5 ratio -> 50 %
    assert m2["utilization_gpu"] == 1.0 and m2["idle"] is True
    assert m1["memory_total_mib"] == 40192 and m1["pod"] == "infer"
    # the GPU's readings, on each device's series: the GPU's, not the devices'
    assert (m1["power_w"], m1["temperature_c"], m2["power_w"]) == (None, None, None)


def test_missing_power_is_null_not_zero(prom, capsys):
    rows = by_device(snapshot(capsys, prom.url))
    assert rows[("node-b", "1")]["power_w"] is None
    assert rows[("node-b", "1")]["utilization_gpu"] == 60.0


def test_namespace_summary(prom, capsys):
    doc = snapshot(capsys, prom.url)
    ns = {n["namespace"]: n for n in doc["namespaces"]}
    assert set(ns) == {"ml", "research"}
    assert ns["ml"] == {
        "namespace": "ml",
        "gpus": 2,
        "mig_slices": 1,
        "idle_gpus": 1,
        "idle_mig_slices": 0,
        "mean_utilization": pytest.approx((90 + 0 + 50) / 3, abs=0.1),
    }
    assert ns["research"] == {
        "namespace": "research",
        "gpus": 2,
        "mig_slices": 1,
        "idle_gpus": 1,
        "idle_mig_slices": 1,
        "mean_utilization": pytest.approx((1 + 40 + 1) / 3, abs=0.1),
    }


def test_yaml_output(prom, capsys):
    import yaml

    code, out, err = gpuctl(capsys, "top", "--prometheus", prom.url, "--once", "-o", "yaml")
    assert code == 0, err
    assert yaml.safe_load(out)["summary"]["idle_allocated_gpus"] == 2


def test_table(prom, capsys):
    code, out, err = gpuctl(capsys, "top", "--prometheus", prom.url, "--once")
    assert code == 0, err
    assert out.startswith("Cluster 7 GPUs, 1 split into 2 MIG slices · ")
    assert "3 (2 GPUs, 1 MIG slice) idle but held by a pod" in out
    assert "4 (3 GPUs, 1 MIG slice) idle" in out
    assert "Busiest node node-b (50%)" in out and "idlest node node-a (23%)" in out
    assert out.count("IDLE, held") == 3
    lines = out.splitlines()
    node_b = [ln for ln in lines if ln.startswith("node-b")]
    assert node_b and "research/job-1" in node_b[0]
    no_power = lines[lines.index(node_b[0]) + 1]
    assert "60%" in no_power and " - " in no_power  # node-b/1: no power metric
    # NAMESPACE, GPUS HELD, MIG SLICES HELD, MEAN UTIL, IDLE GPUS, IDLE MIG SLICES
    assert any(ln.startswith("research ") and ln.split()[1:] == ["2", "1", "14%", "1", "1"]
               for ln in lines)  # fmt: skip
    # node-10's A100 once, with its power; its MIG slices without
    gpu = next(i for i, ln in enumerate(lines) if ln.startswith("node-10"))
    assert "(MIG, 2 slices)" in lines[gpu] and "370W" in lines[gpu] and "46C" in lines[gpu]
    assert all("0/mig" in ln and "W " not in ln for ln in lines[gpu + 1 : gpu + 3])


def test_env_var_gives_the_url(prom, capsys, monkeypatch):
    monkeypatch.setenv("GPUCTL_PROMETHEUS_URL", prom.url)
    code, out, err = gpuctl(capsys, "top", "--once", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["gpus"] == 7


def test_config_file_gives_the_url(prom, capsys, monkeypatch, tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"prometheus_url: {prom.url}\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(cfg))
    code, out, err = gpuctl(capsys, "top", "--once", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["gpus"] == 7


def test_three_queries_per_frame_whatever_the_cluster_size(prom, capsys, prometheus_with):
    big = prometheus_with(
        [
            s
            for n in range(60)
            for i in range(8)
            for s in gpu(
                "Hostname", f"big-{n}", i, 30 + i, pod=f"p{n}-{i}", namespace=f"team-{n % 5}"
            )
        ]
    )
    for server, gpus in ((prom, 7), (big, 480)):
        before = server.query_requests()
        assert snapshot(capsys, server.url)["summary"]["gpus"] == gpus
        assert server.query_requests() - before == 3


def test_stranded_gpus_against_the_most_common_request(prometheus_with, capsys):
    """Most pods hold 2 GPUs: s1's last free GPU can take none of them; s2's two can."""
    server = prometheus_with(stranded_cluster())
    summary = snapshot(capsys, server.url)["summary"]
    assert (summary["request_shape_gpus"], summary["stranded_gpus"]) == (2, 1)
    code, out, _ = gpuctl(capsys, "top", "--prometheus", server.url, "--once")
    assert (
        code == 0
        and "1 stranded (free GPUs on nodes with fewer than 2 free; most pods hold 2)" in out
    )


def test_exported_labels_from_a_servicemonitor_scrape(prometheus_with, capsys):
    """prometheus-operator puts the exporter's own pod/namespace on every series and renames
    DCGM's to exported_*: the GPU holder is exported_pod; a GPU without one is free."""
    exporter = {"pod": "dcgm-exporter-7x", "namespace": "gpu-operator", "container": "exporter"}
    server = prometheus_with(
        gpu(
            "Hostname",
            "n1",
            0,
            1,
            extra={**exporter, "exported_pod": "train", "exported_namespace": "ml"},
        )
        + gpu("Hostname", "n1", 1, 1, extra=exporter)
    )
    doc = snapshot(capsys, server.url)
    rows = by_device(doc)
    assert (rows[("n1", "0")]["pod"], rows[("n1", "0")]["namespace"]) == ("train", "ml")
    assert rows[("n1", "1")]["pod"] is None
    assert doc["summary"]["idle_allocated_gpus"] == 1
    assert doc["namespaces"] == [
        {"namespace": "ml", "gpus": 1, "mig_slices": 0, "mean_utilization": 1.0, "idle_gpus": 1,
         "idle_mig_slices": 0}
    ]  # fmt: skip


# ---- real scrapes of dcgm-exporter stand-ins, under each deployment setting ----


CUSTOM = dcgm.Deployment(
    "monitoring", "gpu-metrics", "http", "dcgm", None, (("app", "gpu-metrics"),)
)


@pytest.fixture(scope="module")
def custom_deployment():
    """An exporter deployed under names of its own, honorLabels true: GPU 0 held, 1 free."""
    devices = [
        dcgm.Device(0, "GPU-c-0", H100, dcgm_values(1, 500, 80000), [dcgm.Holder("ml", "a", "m")]),
        dcgm.Device(1, "GPU-c-1", H100, dcgm_values(0, 0, 80500)),
    ]
    server = start_dcgm_scrape([("node-c", devices, dcgm.Release())], CUSTOM, True)
    yield server
    server.stop()


def pods(doc) -> list:
    return [g["pod"] for g in doc["gpus"]]


def test_an_exporter_with_other_names_is_named_by_option(custom_deployment, capsys):
    url = custom_deployment.url
    assert pods(snapshot(capsys, url)) == ["a", "gpu-metrics-00000"]  # taken as a holder
    assert pods(snapshot(capsys, url, "--exporter-container", "dcgm")) == ["a", None]
    assert pods(snapshot(capsys, url, "--exporter-container", "x,dcgm")) == ["a", None]


def test_the_exporter_names_come_from_the_environment_or_the_config_file(
    custom_deployment, capsys, monkeypatch, tmp_path
):
    url = custom_deployment.url
    cfg = tmp_path / "config.yaml"
    cfg.write_text("exporter_containers: [dcgm]\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(cfg))
    assert pods(snapshot(capsys, url)) == ["a", None]
    monkeypatch.setenv("GPUCTL_EXPORTER_CONTAINERS", "other")  # the environment wins
    assert pods(snapshot(capsys, url)) == ["a", "gpu-metrics-00000"]
    # ...and the option wins over both.
    assert pods(snapshot(capsys, url, "--exporter-container", "dcgm")) == ["a", None]


def test_a_bad_exporter_setting_is_one_line_naming_the_file(
    custom_deployment, capsys, monkeypatch, tmp_path
):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("exporter_containers: {a: b}\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(cfg))
    before = custom_deployment.query_requests()
    code, out, err = gpuctl(capsys, "top", "--prometheus", custom_deployment.url, "--once")
    assert_one_line_error(code, out, err, 2, str(cfg), "exporter_containers")
    assert custom_deployment.query_requests() == before


# ---- failures: one line, non-zero exit, nothing sent when the input is bad ----


def assert_one_line_error(code, out, err, expected_code, *fragments):
    assert code == expected_code, err
    assert out == ""
    first = err.splitlines()[0]
    assert first.startswith("gpuctl: error: ")
    for f in fragments:
        assert f in first, first
    assert "Traceback" not in err and len(err.splitlines()) <= 2


def test_prometheus_down(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = gpuctl(capsys, "top", "--prometheus", url, "--once", "-o", "json")
    assert_one_line_error(code, out, err, 1, f"cannot reach Prometheus at {url}", "refused")


def test_unresolvable_host(capsys):
    code, out, err = gpuctl(
        capsys, "top", "--prometheus", "http://no-such-host.invalid:9090", "--once"
    )
    assert_one_line_error(
        code, out, err, 1, "cannot reach Prometheus at http://no-such-host.invalid:9090"
    )


@pytest.mark.parametrize(
    "url",
    [
        "localhost:9090",
        "ftp://prom:21",
        "http://",
        "http://h:99999",
        "prometheus",
        "http://h:9090/?q=1",
        "http://exa mple:9090",
        "http://prom:9090/a b",
        "http://prom\t:9090",
    ],
)
def test_bad_url_is_a_usage_error(capsys, url):
    code, out, err = gpuctl(capsys, "top", "--prometheus", url, "--once")
    assert_one_line_error(code, out, err, 2, "bad Prometheus URL")


def test_wrong_path_is_an_http_error_with_a_hint(prom, capsys):
    code, out, err = gpuctl(capsys, "top", "--prometheus", prom.url + "/not-prometheus", "--once")
    assert_one_line_error(code, out, err, 1, "answered HTTP 404")
    assert "is this the Prometheus base URL" in err


def test_something_that_is_not_prometheus(capsys):
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>hello</html>")

        def log_message(self, *a):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Hello)
    # gpuctl cuts its other queries off once one answer is refused: the server's broken
    # pipes are expected and must not be printed into the captured stderr.
    httpd.handle_error = lambda request, address: None
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_port}"
        code, out, err = gpuctl(capsys, "top", "--prometheus", url, "--once")
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
    assert_one_line_error(code, out, err, 1, "did not answer like a Prometheus server")


def test_empty_prometheus_means_no_dcgm_exporter(prometheus_with, capsys):
    server = prometheus_with([])
    code, out, err = gpuctl(capsys, "top", "--prometheus", server.url, "--once", "-o", "json")
    assert_one_line_error(
        code, out, err, 1, "no DCGM-exporter metrics in Prometheus at " + server.url
    )
    assert "dcgm-exporter" in err.splitlines()[1]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--window", "10"], "--window: '10' is not a Prometheus duration"),
        (["--window", "5m) or vector(1"], "--window"),
        (["--idle-threshold", "101"], "--idle-threshold: 101 is not a percentage"),
    ],
)
def test_bad_options_send_nothing(prom, capsys, args, fragment):
    before = prom.query_requests()
    code, out, err = gpuctl(capsys, "top", "--prometheus", prom.url, "--once", *args)
    assert_one_line_error(code, out, err, 2, fragment)
    assert prom.query_requests() == before


def test_live_view_refreshes_then_shows_stale_when_prometheus_goes_away(prometheus_with):
    """The live view on a real terminal (a pty): frames keep coming; when Prometheus stops,
    the last frame stays with a `stale:` line; Ctrl-C ends it: `interrupted`, exit 130."""
    import pty
    import signal
    import sys

    server = prometheus_with(gpu("Hostname", "live-node", 0, 1, pod="nb", namespace="ml"))
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=ROOT, COLUMNS="160", LINES="40", TERM="xterm")
    proc = children.start(
        [sys.executable, "-m", "gpuctl", "top", "--prometheus", server.url, "-d", "0.2"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    seen = b""

    def read_until(marker: bytes, timeout: float) -> bool:
        nonlocal seen
        import select

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    return marker in seen
            if marker in seen:
                return True
        return False

    try:
        assert read_until(b"IDLE, held", 120), seen[-2000:]  # a loaded machine starts slowly
        before = server.query_requests()
        # refreshing: 3 queries per frame, two more frames (each 0.2 s apart when idle)
        assert wait_until(lambda: server.query_requests() - before >= 6, 60), "no refresh"
        server.stop()
        assert read_until(b"stale: cannot reach Prometheus", 60), seen[-2000:]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
        read_until(b"gpuctl: interrupted", 5)
        assert b"gpuctl: interrupted" in seen and b"Traceback" not in seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(master)
