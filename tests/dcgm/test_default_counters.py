"""The exporter stand-in exports what dcgm-exporter's default counters file turns on: the
same fields, Prometheus types and HELP texts as the upstream file (tests/dcgm/upstream)."""

import os

from gpuctl.sim import dcgm_exporter

UPSTREAM = os.path.join(os.path.dirname(__file__), "upstream")


def enabled(name: str) -> list[tuple[str, str, str]]:
    """(field, type, help) of each line the file turns on (dcgm-exporter: `#` comments)."""
    with open(os.path.join(UPSTREAM, name), encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    out = []
    for ln in lines:
        name, kind, help_text = (part.strip() for part in ln.split(",", 2))
        out.append((name, kind, help_text))
    return out


def test_the_stand_in_exports_the_default_counters():
    fields = [(n, t, h) for n, t, h in enabled("default-counters.csv") if t != "label"]
    assert [
        (n, dcgm_exporter.FIELDS[n][0], dcgm_exporter.FIELDS[n][1])
        for n in dcgm_exporter.DEFAULT_COUNTERS
    ] == fields
    labels = [n for n, t, _ in enabled("default-counters.csv") if t == "label"]
    assert labels == ["DCGM_FI_DRIVER_VERSION"]  # Release.driver_version, on every series


def test_the_gpu_operators_file_turns_on_the_same_fields():
    assert [n for n, _, _ in enabled("dcp-metrics-included.csv")] == [
        n for n, _, _ in enabled("default-counters.csv")
    ]


def test_a_device_reports_every_default_field_and_a_mig_device_no_gpu_util():
    whole = dcgm_exporter.default_values(40, 1000, 80000, 559)
    assert list(whole) == list(dcgm_exporter.DEFAULT_COUNTERS)
    assert whole["DCGM_FI_DEV_GPU_UTIL"] == 40 and whole["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == 0.4
    mig = dcgm_exporter.default_values(40, 1000, 9000, mig=True, temp=50, power=300.0)
    assert mig["DCGM_FI_DEV_GPU_UTIL"] == 0  # dcgm-exporter #216
    assert (mig["DCGM_FI_DEV_GPU_TEMP"], mig["DCGM_FI_DEV_POWER_USAGE"]) == (50, 300.0)
    off = dcgm_exporter.default_values(40, 1000, 80000, profiling="off")
    assert not [f for f in off if f.startswith("DCGM_FI_PROF_")]
    sm = dcgm_exporter.default_values(40, 1000, 80000, profiling="sm")
    assert "DCGM_FI_PROF_SM_ACTIVE" in sm and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in sm
