"""The real Prometheus server (Debian package `prometheus`) and `promtool`, as test stand-ins.

`prometheus_with(series)` loads fixed DCGM-exporter-shaped data through
`promtool tsdb create-blocks-from openmetrics` and starts Prometheus on it (~0.2 s, no
scrape to wait for). Timestamps are relative to now, so gpuctl queries at "now" exactly
as it does against a live cluster. `dcgm_scrape` is Prometheus scraping dcgm-exporter
stand-ins (tests/standins/dcgm_exporter.py) through a real scrape configuration (the first
scrape takes a second or two).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import yaml

from tests.standins import dcgm_exporter, missing

STEP_S = 15  # DCGM-exporter's and Prometheus's usual scrape interval


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Series:
    """One DCGM metric series. `value` is a constant, or a function of the sample's age in
    seconds (so a GPU can be busy until 20 minutes ago and idle since)."""

    name: str
    labels: dict
    value: float | Callable[[float], float]
    history_s: int = 1800
    newest_s: int = 5  # age of the newest sample
    step_s: int = STEP_S  # a window of days loads faster with fewer samples

    def samples(self, now: float):
        for age in range(self.history_s, self.newest_s - 1, -self.step_s):
            v = self.value(age) if callable(self.value) else self.value
            yield now - age, v


def _label_text(labels: dict) -> str:
    def esc(v: str) -> str:
        return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())


def _number(value: float) -> str:
    """A sample's value as an exporter's Go code writes it (strconv: NaN, +Inf, -Inf)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def openmetrics(series: list, now: float) -> str:
    """OpenMetrics text: one family per metric name (contiguous), samples in time order."""
    families: dict[str, list] = {}
    for s in series:
        families.setdefault(s.name, []).append(s)
    lines = []
    for name, members in families.items():
        lines.append(f"# TYPE {name} gauge")
        for s in members:
            lab = _label_text(s.labels)
            lines += [f"{name}{{{lab}}} {_number(v)} {t:.3f}" for t, v in s.samples(now)]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def need(binary: str) -> str:
    path = shutil.which(binary)
    if not path:
        missing(f"{binary} not installed (Debian: apt-get install prometheus; `make system-deps`)")
    return path


@dataclass
class PrometheusServer:
    url: str
    proc: subprocess.Popen
    tmp: str
    stop_hooks: list = field(default_factory=list)

    def api(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.load(r)

    def query_requests(self) -> int:
        """How many /api/v1/query requests this server has answered, from its own /metrics."""
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        return int(
            sum(
                s.value
                for fam in text_string_to_metric_families(text)
                if fam.name == "prometheus_http_requests"
                for s in fam.samples
                if s.name.endswith("_total") and s.labels.get("handler") == "/api/v1/query"
            )
        )

    def stop(self):
        if self.proc.returncode is not None:
            return
        hooks, self.stop_hooks = self.stop_hooks, []
        for hook in hooks:
            hook()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        shutil.rmtree(self.tmp, ignore_errors=True)


def start_prometheus(
    data_dir_filler=None,
    scrape_target: str | None = None,
    tmp: str | None = None,
    scrape_configs: list | None = None,
    rule_files: list | None = None,
    remote_read: list | None = None,
) -> PrometheusServer:
    prom = need("prometheus")
    tmp = tmp or tempfile.mkdtemp(prefix="gpuctl-prom-")
    data = os.path.join(tmp, "data")
    if data_dir_filler:
        data_dir_filler(data)
    config = os.path.join(tmp, "prometheus.yml")
    scrapes = list(scrape_configs or [])
    if scrape_target:
        scrapes.append({"job_name": "dcgm", "static_configs": [{"targets": [scrape_target]}]})
    with open(config, "w") as f:
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": scrapes,
                "rule_files": list(rule_files or []),
                "remote_read": list(remote_read or []),
            },
            f,
        )
    # The free port can be taken (by a test in another xdist worker, or any connection's
    # local port) before Prometheus binds it: then try another one.
    for _attempt in range(3):
        server = _launch(prom, config, data, tmp)
        if server is not None:
            return server
    pytest.fail("prometheus found no free port in 3 tries")


def _launch(prom: str, config: str, data: str, tmp: str) -> PrometheusServer | None:
    """Prometheus on a free port, once ready; None when that port was taken meanwhile."""
    port = free_port()
    log_path = os.path.join(tmp, "log")
    with open(log_path, "w") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [
                prom,
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=error",
                "--storage.tsdb.retention.time=15d",  # test data may span a week
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", proc, tmp)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = open(log_path).read()[-2000:]
            if "address already in use" in tail:
                return None
            server.stop()
            pytest.fail(f"prometheus exited: {tail}")
        try:
            with urllib.request.urlopen(server.url + "/-/ready", timeout=1) as r:
                if r.status == 200:
                    return server
        except OSError:
            pass
        time.sleep(0.05)
    server.stop()
    pytest.fail("prometheus did not become ready in 30 s")


def load_blocks(series: list, now: float):
    def fill(data_dir: str):
        promtool = need("promtool")
        os.makedirs(data_dir, exist_ok=True)
        om = os.path.join(os.path.dirname(data_dir), "data.om")
        with open(om, "w") as f:
            f.write(openmetrics(series, now))
        # One block for the whole history: a week cut into 2-hour blocks takes 20 s, not 0.6.
        hours = max(2, -(-max((s.history_s for s in series), default=0) // 3600) + 1)
        proc = subprocess.run(
            [
                promtool,
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                f"--max-block-duration={hours}h",
                om,
                data_dir,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"promtool create-blocks-from failed: {proc.stderr[-2000:]}")

    return fill


@pytest.fixture
def prometheus_with():
    """Factory: prometheus_with([Series...]) -> a running PrometheusServer holding that data."""
    servers = []

    def start(series: list) -> PrometheusServer:
        server = start_prometheus(load_blocks(series, time.time()) if series else None)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def promtool() -> str:
    return need("promtool")


def start_dcgm_scrape(
    exporters: list, deployment=None, honor_labels: bool = False, rule_files=()
) -> PrometheusServer:
    """A Prometheus that has scraped dcgm-exporter stand-ins once, one per
    (node, devices, release) in exporters: with the scrape config the Prometheus Operator
    generates for the deployment's ServiceMonitor, or, for deployment None, a hand-written
    static one. Stopping it stops the exporters."""
    need("prometheus")
    servers, targets = [], []
    for i, (node, devices, release) in enumerate(exporters):
        servers.append(
            dcgm_exporter.ExporterServer(dcgm_exporter.metrics_text(devices, node, release))
        )
        # A DaemonSet's pods are named after it (its service's name here) plus 5 characters.
        pod = f"{deployment.service if deployment else 'dcgm-exporter'}-{i:05d}"
        targets.append((servers[-1].address, pod, node))
    if deployment is None:
        config = dcgm_exporter.static_scrape_config([t[0] for t in targets])
    else:
        config = dcgm_exporter.servicemonitor_scrape_config(deployment, targets, honor_labels)
    try:
        prom = start_prometheus(scrape_configs=[config], rule_files=list(rule_files))
    except BaseException:
        for server in servers:
            server.stop()
        raise
    prom.stop_hooks += [server.stop for server in servers]
    q = urllib.parse.quote("sum(up)")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        result = prom.api(f"/api/v1/query?query={q}")["data"]["result"]
        if result and float(result[0]["value"][1]) == len(targets):
            return prom
        time.sleep(0.2)
    prom.stop()
    pytest.fail(f"prometheus did not scrape the {len(targets)} exporters within 30 s")


@pytest.fixture
def dcgm_scrape():
    """Factory: dcgm_scrape(exporters, deployment, honor_labels, rule_files=()) ->
    start_dcgm_scrape's server, stopped after the test."""
    servers: list = []

    def start(*args, **kwargs) -> PrometheusServer:
        servers.append(start_dcgm_scrape(*args, **kwargs))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


class QueryServer(dcgm_exporter.ThreadedServer):
    """A stand-in Prometheus API: answers each /api/v1/query with answer(query) (bytes a test
    writes itself), or passes it to a real Prometheus at `upstream`; either way it records
    every (query, answer) pair in `exchanges`."""

    def __init__(self, answer: Callable[[str], bytes] | None = None, upstream: str | None = None):
        import http.server

        self.exchanges: list[tuple[str, bytes]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                form = self.rfile.read(length)
                if len(form) < length:  # gpuctl cut this query off mid-send (see below)
                    return
                query = urllib.parse.parse_qs(form.decode())["query"][0]
                if upstream:
                    request = urllib.request.Request(upstream + self.path, data=form)
                    with urllib.request.urlopen(request, timeout=30) as r:
                        body = r.read()
                else:
                    body = answer(query) if answer else b""
                owner.exchanges.append((query, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                view = memoryview(body)
                for start in range(0, len(view), 1 << 16):
                    self.wfile.write(view[start : start + (1 << 16)])

            def log_message(self, *args):
                pass

        super().__init__(Handler)
        self.url = "http://" + self.address
        # gpuctl cuts its other queries off once one answer is refused: the broken pipes
        # that leaves are expected and must not be printed into a test's captured stderr.
        report = self.httpd.handle_error

        def handle_error(request, address) -> None:
            if not isinstance(sys.exc_info()[1], ConnectionError):
                report(request, address)

        self.httpd.handle_error = handle_error  # type: ignore[method-assign, assignment]


@pytest.fixture
def query_server():
    """Factory: query_server(answer=None, upstream=None) -> a running QueryServer."""
    servers: list[QueryServer] = []

    def start(*args, **kwargs) -> QueryServer:
        servers.append(QueryServer(*args, **kwargs))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def vendors_prometheus():
    """A Prometheus holding every other vendor's series as their exporters emit them
    (tests/vendor_series.py, which cites the sources), ending now: the views' tests."""
    from tests.vendor_series import every_vendor

    server = start_prometheus(load_blocks(every_vendor(), time.time()))
    yield server
    server.stop()
