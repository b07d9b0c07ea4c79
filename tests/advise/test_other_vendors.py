"""`gpuctl advise` on a cluster of every vendor, against a real Prometheus holding each
exporter's series as it emits them (tests/vendor_series.py, which cites the sources): an idle
held device of any vendor is advised released; a busy one is kept (no MIG or time-slicing
advice for other vendors)."""

import json

import pytest

pytestmark = pytest.mark.integration


def test_every_vendors_held_devices_are_advised(vendors_prometheus, cli):
    r = cli("advise", "--prometheus", vendors_prometheus.url, "--window", "20m", "-o", "json")
    assert r.code == 0, r
    rows = {(w["namespace"], w["pods"][0]): w for w in json.loads(r.out)["workloads"]}
    notebook = rows["ml", "notebook-3"]  # an AMD MI300X held and idle
    assert (notebook["vendor"], notebook["advice"], notebook["model"]) == (
        "amd",
        "release",
        "102-D65209-0C",
    )
    assert notebook["peak_memory_mib"] == 81920 and notebook["max_utilization"] == 0
    train = rows["ml", "train-0"]  # busy: kept, and said why
    assert (train["vendor"], train["advice"], train["p95_utilization"]) == ("amd", "keep", 87.0)
    assert "advised only to be released" in train["reason"]
    tpu = rows["test-namespace", "test-workload-pod"]  # two chips, one of them busy
    assert (tpu["vendor"], tpu["gpus_held"], tpu["max_utilization"]) == ("google", 2, 42.0)
    assert (tpu["advice"], tpu["model"], tpu["peak_memory_mib"]) == ("keep", "TPU7x", 32768)
    bert = rows["ml", "bert-0"]
    assert (bert["vendor"], bert["advice"], bert["p95_utilization"]) == ("intel", "keep", 65.0)
    assert ("ml", "neuron") not in rows  # neuron-monitor names no pods: nothing to advise
    totals = json.loads(r.out)["totals"]
    assert totals["gpus_held"] == 5 and totals["gpus_freed"] == 1  # the idle MI300X
