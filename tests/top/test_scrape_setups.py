"""dcgm-exporter stand-ins scraped by a real Prometheus under each deployment setting
(the Prometheus Operator's ServiceMonitor for the GPU Operator and for dcgm-exporter's Helm
chart, honorLabels false and true; a hand-written static scrape): the cluster view and the
alert rules give the same answer under every one."""

import time

import pytest
import yaml

from gpuctl.alerts.core import rules as alert_rules
from tests.clirun import run_gpuctl as gpuctl
from tests.clirun import top_snapshot as snapshot
from tests.cluster_data import SCRAPE_SETUPS, scraped_cluster
from tests.standins.prometheus import start_dcgm_scrape
from tests.top.test_live import assert_live_equals_full

pytestmark = pytest.mark.integration  # Prometheus, shared by the module's tests per setting


@pytest.fixture(scope="module", params=SCRAPE_SETUPS)
def scraped(request, tmp_path_factory):
    """Prometheus having scraped scraped_cluster() under one setting, with the alert rules
    loaded (idle over 1m, no `for`, so that they fire at the next evaluation)."""
    rules = tmp_path_factory.mktemp("rules") / "rules.yml"
    options = alert_rules.AlertOptions(idle_window="1m", idle_for="0s")
    rules.write_text(yaml.safe_dump(alert_rules.rules(options)))
    deployment, honor = SCRAPE_SETUPS[request.param]
    server = start_dcgm_scrape(scraped_cluster(), deployment, honor, rule_files=[str(rules)])
    yield server
    server.stop()


def holders_of(*triples) -> list:
    return [{"namespace": ns, "pod": p, "container": c} for ns, p, c in triples]


def test_the_cluster_view_is_the_same_under_every_setting(scraped, capsys):
    doc = snapshot(capsys, scraped.url)
    rows = [
        (g["node"], g["gpu"], g["utilization_gpu"], g["memory_total_mib"], g["holders"], g["idle"])
        for g in doc["gpus"]
    ]
    assert rows == [
        ("node-1", "0", 90.0, 81559, holders_of(("ml", "train-0", "main")), False),
        ("node-1", "1", 0.0, 81559, [], True),  # free, not held by the exporter pod
        (
            "node-2",
            "0",
            3.0,  # the device's own utilization, not one pod's share
            45000,
            holders_of(("research", "nb-a", "notebook"), ("research", "nb-b", "notebook")),
            True,
        ),
        ("node-3", "0/mig1", 50.0, 40192, holders_of(("ml", "infer", "server")), False),
        ("node-3", "0/mig2", 1.0, 40192, [], True),
        ("node-4", "0", 1.0, 80500, holders_of(("ml", "old-job", "main")), True),
        ("node-4", "1", 0.0, 80500, [], True),
        ("node-5", "0", 0.0, 80500, [], True),
    ]
    node2 = doc["gpus"][2]
    assert (node2["namespace"], node2["pod"], node2["memory_used_mib"]) == (
        "research",
        "nb-a",
        8000,
    )
    assert doc["summary"] == {
        "gpus": 7,  # 6 whole GPUs and node-3's A100, split into 2 MIG slices
        "mig_gpus": 1,
        "mig_slices": 2,
        "mean_utilization": pytest.approx(145 / 8, abs=0.1),
        "idle_gpus": 5,
        "idle_mig_slices": 1,
        "idle_allocated_gpus": 2,
        "idle_allocated_mig_slices": 0,
        "request_shape_gpus": 1,  # every holder, the two sharing node-2's GPU too, holds one
        "stranded_gpus": 0,
        "signal": "gr_engine_active",  # the default counters' profiling field, everywhere
    }
    assert doc["namespaces"] == [
        {
            "namespace": "ml",
            "gpus": 2,
            "mig_slices": 1,
            "mean_utilization": pytest.approx(47, abs=0.1),
            "idle_gpus": 1,
            "idle_mig_slices": 0,
        },
        {"namespace": "research", "gpus": 1, "mig_slices": 0, "mean_utilization": 3.0,
         "idle_gpus": 1, "idle_mig_slices": 0},
    ]  # fmt: skip
    code, out, err = gpuctl(capsys, "top", "--prometheus", scraped.url, "--once")
    assert code == 0, err
    assert out.count("IDLE, held") == 2 and "research/nb-a, research/nb-b" in out
    assert "gpu-operator/" not in out and "dcgm-exporter-" not in out


def test_idle_allocated_fires_for_each_holder_and_never_for_a_free_gpu(scraped):
    """The rendered rules, evaluated by the real Prometheus on what it scraped: each pod
    holding an idle GPU (both pods of the shared one), never a free GPU."""
    prom = scraped
    deadline = time.monotonic() + 30
    firing: set = set()
    while time.monotonic() < deadline:
        alerts = prom.api("/api/v1/alerts")["data"]["alerts"]
        firing = {
            a["annotations"]["description"].split(" whose ")[0]
            for a in alerts
            if a["labels"]["alertname"] == "GPUIdleAllocated" and a["state"] == "firing"
        }
        if len(firing) >= 3:
            break
        time.sleep(0.3)
    time.sleep(2)  # two more evaluations: nothing else fires
    alerts = prom.api("/api/v1/alerts")["data"]["alerts"]
    assert (
        {
            a["annotations"]["description"].split(" whose ")[0]
            for a in alerts
            if a["labels"]["alertname"] == "GPUIdleAllocated"
        }
        == firing
        == {
            "research/nb-a holds GPU 0 on node-2",
            "research/nb-b holds GPU 0 on node-2",
            "ml/old-job holds GPU 0 on node-4",
        }
    )


def test_the_live_frame_is_the_full_frame_under_every_setting(scraped):
    """Figures aggregated by Prometheus, and the rows on screen in every order, equal what
    gpuctl computes from every GPU: shared GPU, MIG devices, old names, empty pod labels."""
    assert_live_equals_full(scraped.url)
