"""`gpuctl advise` against a real Prometheus holding a week of DCGM-exporter data."""

import dataclasses
import json
import time

import pytest

from tests.advise.week import week
from tests.standins.prometheus import Series, load_blocks, start_prometheus

pytestmark = pytest.mark.integration  # Prometheus, shared by the module

WORKLOAD_KEYS = {
    "namespace", "kind", "name", "owner_from", "pods", "vendor", "model", "gpus_held",
    "gpus_per_pod",
    "peak_memory_mib", "p95_utilization", "max_utilization", "advice", "mig_profile", "share",
    "reason",
}  # fmt: skip


@pytest.fixture(scope="module")
def prom():
    server = start_prometheus(load_blocks(week(), time.time()))
    yield server
    server.stop()


def advice(cli, url, *args) -> dict:
    r = cli("advise", "--prometheus", url, "-o", "json", *args)
    assert r.code == 0, r
    return json.loads(r.out)


def by_name(doc) -> dict:
    return {(w["namespace"], w["name"]): w for w in doc["workloads"]}


def test_advice_per_workload_over_the_week(prom, cli):
    doc = advice(cli, prom.url)
    assert set(doc) == {"window", "workloads", "totals"}
    assert all(set(w) == WORKLOAD_KEYS for w in doc["workloads"])
    rows = by_name(doc)
    assert set(rows) == {
        ("ml", "infer"),
        ("ml", "embed"),
        ("ml", "train"),
        ("ml", "etl"),
        ("research", "notebook"),
        ("speech", "asr"),
    }  # not the MIG device's pod, not the free GPU
    infer = rows[("ml", "infer")]
    assert (infer["kind"], infer["owner_from"], infer["gpus_held"]) == ("Deployment", "pod name", 2)
    assert (infer["peak_memory_mib"], infer["p95_utilization"], infer["max_utilization"]) == (
        8000,
        10.0,
        12.0,
    )
    assert (infer["advice"], infer["mig_profile"]) == ("mig", "1g.10gb")
    embed = rows[("ml", "embed")]
    assert (embed["kind"], embed["owner_from"]) == ("Deployment", "kube-state-metrics")
    assert (embed["p95_utilization"], embed["advice"], embed["mig_profile"]) == (
        35.0,
        "mig",
        "3g.40gb",
    )
    train = rows[("ml", "train")]
    assert (train["kind"], train["gpus_held"], train["gpus_per_pod"]) == ("CronJob", 8, 8)
    assert train["advice"] == "keep"
    # busy one hour a day: p95 0 %, but not idle the whole window
    etl = rows[("ml", "etl")]
    assert (etl["p95_utilization"], etl["max_utilization"], etl["advice"]) == (0.0, 80.0, "mig")
    notebook = rows[("research", "notebook")]
    assert (notebook["kind"], notebook["max_utilization"], notebook["advice"]) == (
        "StatefulSet",
        4.0,
        "release",
    )
    asr = rows[("speech", "asr")]
    assert (asr["model"], asr["advice"], asr["share"]) == ("NVIDIA L4", "time-slice", 5)
    # 14 held; kept 8 + MIG 3 × 1g.10gb and 1 × 3g.40gb on one H100 + one L4 shared
    assert doc["totals"] == {
        "gpus_held": 14,
        "gpus_needed": 10,
        "gpus_freed": 4,
        "signal": "gr_engine_active",  # the default counters' engine activity, no SM_ACTIVE
        "gpus_freed_by_duty_cycle": None,
    }


def test_the_window_decides_what_counts(prom, cli):
    # The busy hour of each day is the newest one: over the last 30 minutes etl is busy
    # all the time (over the week its p95 is 0 %) and needs its whole GPU.
    rows = by_name(advice(cli, prom.url, "--window", "30m"))
    etl = rows[("ml", "etl")]
    assert (etl["p95_utilization"], etl["advice"]) == (80.0, "keep")
    assert rows[("ml", "infer")]["p95_utilization"] == 12.0
    doc = advice(cli, prom.url, "--idle-threshold", "0")  # nothing is below 0 %
    assert "release" not in {w["advice"] for w in doc["workloads"]}


def test_namespace_filter(prom, cli):
    doc = advice(cli, prom.url, "-n", "research")
    assert [(w["namespace"], w["name"]) for w in doc["workloads"]] == [("research", "notebook")]
    assert doc["totals"] == {
        "gpus_held": 1,
        "gpus_needed": 0,
        "gpus_freed": 1,
        "signal": "gr_engine_active",
        "gpus_freed_by_duty_cycle": None,
    }


def test_table(prom, cli):
    r = cli("advise", "--prometheus", prom.url)
    assert r.code == 0, r
    assert "Deployment/infer" in r.out and "MIG 1g.10gb ×2" in r.out
    assert "CronJob/train" in r.out and "time-slice 1/5" in r.out and "release" in r.out
    assert "GPUs held now 14 · needed after the advice 10 · freed 4" in r.out


def test_five_queries_whatever_the_cluster_size(prom, prometheus_with, cli):
    def node(n):
        labels = {"UUID": f"GPU-big-{n}", "gpu": "0", "Hostname": f"big-{n}",
                  "modelName": "NVIDIA H100 80GB HBM3", "pod": f"svc-{n}", "namespace": "ml"}  # fmt: skip
        return [
            Series("DCGM_FI_DEV_GPU_UTIL", labels, 5 + n % 10),
            Series("DCGM_FI_DEV_FB_USED", labels, 4000),
            Series("DCGM_FI_DEV_FB_FREE", labels, 77559),
        ]

    big = prometheus_with([s for n in range(300) for s in node(n)])
    for server, held in ((prom, 14), (big, 300)):
        before = server.query_requests()
        assert advice(cli, server.url, "--window", "1h")["totals"]["gpus_held"] == held
        assert server.query_requests() - before == 5


def test_no_dcgm_data_is_an_error(prometheus_with, cli):
    server = prometheus_with([])
    r = cli("advise", "--prometheus", server.url)
    assert r.code == 1 and r.out == "" and "no DCGM-exporter metrics" in r.err


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--window", "7 days"], "--window"),
        (["--window", "0s"], "--window"),
        (["--window", "100y"], "--window"),
        (["--window", "99999999999999999999d"], "--window"),
        (["--idle-threshold", "101"], "--idle-threshold"),
        (["-n", "Bad_NS"], "--namespace"),
        (["-o", "csv"], "--output"),
    ],
)
def test_bad_options_send_nothing(prom, cli, args, needle):
    before = prom.query_requests()
    r = cli("advise", "--prometheus", prom.url, *args)
    assert r.code == 2 and r.out == "" and needle in r.err, r
    assert prom.query_requests() == before


def test_no_url_is_a_usage_error(cli):
    r = cli("advise")
    assert r.code == 2 and "--prometheus" in r.err


def test_sm_activity_decides_where_present_and_the_advice_says_what_it_changed(cli):
    """A pod spinning a kernel on a few SMs: GPU_UTIL (and GR_ENGINE_ACTIVE) read 100 %, SM
    activity 3 %: released by SM activity, kept by the duty cycle. A node without the
    profiling fields is judged by GPU_UTIL."""
    from tests.advise.week import device

    # a counters file with SM_ACTIVE on (gpuctl's own); a node without profiling fields
    spin = device("node-p", 0, "spin-0", "ml", 100, 20000, profiling="sm")
    spin = [
        dataclasses.replace(s, value=0.03) if s.name == "DCGM_FI_PROF_SM_ACTIVE" else s
        for s in spin
    ]
    idle = device("node-q", 0, "notebook-0", "research", 2, 1000, profiling="off")
    server = start_prometheus(load_blocks(spin + idle, time.time()))
    try:
        doc = advice(cli, server.url)
    finally:
        server.stop()
    rows = by_name(doc)
    assert rows[("ml", "spin")]["advice"] == "release"
    assert rows[("ml", "spin")]["max_utilization"] == pytest.approx(3.0)
    assert rows[("research", "notebook")]["advice"] == "release"
    totals = doc["totals"]
    assert (totals["gpus_freed"], totals["gpus_freed_by_duty_cycle"]) == (2, 1)
    assert totals["signal"] == "sm_active 1, gpu_util 1"


def test_label_values_reach_the_table_shown_not_obeyed(prometheus_with, cli):
    """Label values are whatever the exporter or a relabelling wrote: an OSC title sequence
    and a colour escape in the pod and namespace labels are shown escaped."""
    labels = {"UUID": "GPU-x", "gpu": "0", "Hostname": "n1", "modelName": "NVIDIA H100 80GB HBM3",
              "pod": "svc\x1b]0;pwned\x07-1", "namespace": "ml\x1b[2J"}  # fmt: skip
    server = prometheus_with(
        [
            Series("DCGM_FI_DEV_GPU_UTIL", labels, 5),
            Series("DCGM_FI_DEV_FB_USED", labels, 4000),
            Series("DCGM_FI_DEV_FB_FREE", labels, 77559),
        ]
    )
    r = cli("advise", "--prometheus", server.url, "--window", "1h")
    assert r.code == 0, r
    assert "\x1b" not in r.out and "\\x1b]0;pwned" in r.out and "ml\\x1b[2J" in r.out, r.out


def test_memory_figures_whose_sum_overflows_are_unknown_not_a_bug(prometheus_with, cli):
    labels = {"UUID": "GPU-y", "gpu": "0", "Hostname": "n1", "modelName": "NVIDIA X999",
              "pod": "svc-1", "namespace": "ml"}  # fmt: skip
    server = prometheus_with(
        [
            Series("DCGM_FI_DEV_GPU_UTIL", labels, 5),
            Series("DCGM_FI_DEV_FB_USED", labels, 1.7e308),
            Series("DCGM_FI_DEV_FB_FREE", labels, 1.7e308),
        ]
    )
    r = cli("advise", "--prometheus", server.url, "--window", "1h", "-o", "json")
    assert r.code == 0, r
    (row,) = json.loads(r.out)["workloads"]
    assert row["advice"] == "keep" and "memory size is unknown" in row["reason"], row
