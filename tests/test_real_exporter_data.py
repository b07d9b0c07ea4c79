"""Every capability that reads DCGM, on what dcgm-exporter sends by default.

Stand-ins serve every field of dcgm-exporter's default counters file
(tests/dcgm/upstream/default-counters.csv: GR_ENGINE_ACTIVE beside GPU_UTIL, both with the
same labels), scraped by a real Prometheus through the scrape config the Prometheus
Operator generates for the GPU Operator's ServiceMonitor (honorLabels false: the holder in
exported_*, the exporter pod in pod/namespace/container), with the alert rules loaded:

- node-1: two H100s, the default profiling fields; GPU 0 held by ml/train, GPU 1 free;
- node-2: a GPU without profiling fields (GPU_UTIL alone), held by research/nb-0, idle;
- node-3: an A100 split into two 3g.40gb MIG slices (GPU_UTIL 0 on each, the GPU's
  temperature and power on each), one held by ml/infer;
- node-4: a counters file with SM_ACTIVE on (gpuctl's own), held by the service ml/svc.
"""

import json
import time

import pytest
import yaml

from gpuctl.adapters.prometheus import Prometheus
from gpuctl.alerts.core import rules as alert_rules
from gpuctl.dcgm.holders import Exporter
from gpuctl.doctor.core import checks as doctor
from gpuctl.jobs.core import autoscale
from gpuctl.reclaim.core import signal
from tests.standins import dcgm_exporter as dcgm
from tests.standins.prometheus import start_dcgm_scrape

pytestmark = pytest.mark.integration

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
SVC_POD = "svc-7d9f8b6c5-x2k4q"  # a pod of Deployment ml/svc


def values(busy, profiling="default", mig=False, **board):
    return dcgm.default_values(busy, 30000, 50000, 1559, mig=mig, profiling=profiling, **board)


def exporters() -> list:
    a3 = dict(mig=True, temp=61, power=390.0)  # the A100's board, on each slice's series
    return [
        ("node-1", [
            dcgm.Device(0, "GPU-n1-0", H100, values(80), [dcgm.Holder("ml", "train", "main")]),
            dcgm.Device(1, "GPU-n1-1", H100, values(0)),
        ], dcgm.Release()),
        ("node-2", [
            dcgm.Device(0, "GPU-n2-0", H100, values(1, "off"), [dcgm.Holder("research", "nb-0", "nb")]),
        ], dcgm.Release()),
        ("node-3", [
            dcgm.Device(0, "GPU-n3-0", A100, values(70, **a3), [dcgm.Holder("ml", "infer", "srv")],
                        mig=("3g.40gb", 1)),
            dcgm.Device(0, "GPU-n3-0", A100, values(0, **a3), mig=("3g.40gb", 2)),
        ], dcgm.Release()),
        ("node-4", [
            dcgm.Device(0, "GPU-n4-0", H100, values(60, "sm"), [dcgm.Holder("ml", SVC_POD, "app")]),
        ], dcgm.Release()),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    rules = tmp_path_factory.mktemp("rules") / "rules.yml"
    rules.write_text(yaml.safe_dump(alert_rules.rules()))
    server = start_dcgm_scrape(exporters(), dcgm.GPU_OPERATOR, False, rule_files=[str(rules)])
    yield server
    server.stop()


def test_what_the_exporters_send_is_the_default_counter_set(prom):
    names = Prometheus(prom.url).query('count by (__name__) ({__name__=~"DCGM_.+"})')
    assert {labels["__name__"] for labels, _ in names} >= set(dcgm.DEFAULT_COUNTERS)


def test_top(prom, capsys):
    from tests.clirun import top_snapshot

    doc = top_snapshot(capsys, prom.url)
    s = doc["summary"]
    assert (s["gpus"], s["mig_gpus"], s["mig_slices"]) == (5, 1, 2)
    assert s["signal"] == "sm_active 1, gr_engine_active 4, gpu_util 1"
    held = {(g["node"], g["gpu"]): g["pod"] for g in doc["gpus"]}
    assert held == {("node-1", "0"): "train", ("node-1", "1"): None, ("node-2", "0"): "nb-0",
                    ("node-3", "0/mig1"): "infer", ("node-3", "0/mig2"): None,
                    ("node-4", "0"): SVC_POD}  # fmt: skip
    assert doc["mig_gpus"][0]["power_w"] == 390.0


def test_advise(prom, cli):
    r = cli("advise", "--prometheus", prom.url, "--window", "1m", "-o", "json")
    assert r.code == 0, r
    doc = json.loads(r.out)
    assert {(w["namespace"], w["pods"][0]) for w in doc["workloads"]} == {
        ("ml", "train"),
        ("research", "nb-0"),
        ("ml", SVC_POD),
    }  # fmt: skip (whole GPUs only: the MIG slice is not advised on)
    assert doc["totals"]["signal"] == "sm_active 1, gr_engine_active 1, gpu_util 1"


def test_report(prom, cli):
    # the window's last step ends after the samples (steps are aligned to the step)
    end = str(int(time.time()) // 60 * 60 + 60)
    r = cli("report", "--prometheus", prom.url, "--window", "2m", "--step", "1m", "--end", end,
            "-o", "json")  # fmt: skip
    assert r.code == 0, r
    teams = {t["team"] for t in json.loads(r.out)["teams"]}
    assert teams == {"ml", "research"}


def test_reclaim_reads_every_holder(prom):
    q = signal.queries([3600], 5)
    readings = signal.read(q, Prometheus(prom.url).query_all(q.all()), Exporter())
    assert set(readings.by_pod) == {("ml", "train"), ("research", "nb-0"), ("ml", "infer"),
                                    ("ml", SVC_POD)}  # fmt: skip
    for pod in readings.by_pod:
        [device] = readings.devices(pod)
        assert device.newest is not None and device.newest > time.time() - 120


def test_autoscaling_query(prom):
    query = autoscale.gpu_busy("svc", "ml", "1m", Exporter())
    [(_, value)] = Prometheus(prom.url).query(query)
    assert value == pytest.approx(60.0)  # its SM activity


def test_doctor_busy_signal(prom):
    counts = Prometheus(prom.url).query(doctor.busy_signal_query())
    # 4 whole GPUs and 2 MIG slices, node-4's GPU with SM_ACTIVE
    assert {labels["field"]: int(v) for labels, v in counts} == {"sm": 1, "any": 4, "any_mig": 2}


def test_every_alert_rule_evaluates(prom):
    deadline = time.monotonic() + 20
    while True:
        groups = prom.api("/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        if rules and all(r.get("lastEvaluation", "").startswith("2") for r in rules):
            break
        assert time.monotonic() < deadline, rules
        time.sleep(0.3)
    assert [(r["name"], r["health"], r.get("lastError", "")) for r in rules] == [
        (r["name"], "ok", "") for r in rules
    ]
