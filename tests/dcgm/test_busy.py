"""The one busy-signal rule: SM_ACTIVE, else GR_ENGINE_ACTIVE, else (whole GPUs only)
GPU_UTIL (the PromQL every view, alert and advice builds on is checked against a real
Prometheus in tests/top, tests/advise and tests/report, and by promtool in
tests/top/test_alerts.py)."""

from gpuctl.dcgm import busy
from gpuctl.dcgm.metrics import GR_ACTIVE, SM_ACTIVE, UTIL


def test_a_whole_gpu_is_judged_by_the_best_signal_it_reports():
    # a kernel on a few SMs: the duty cycles read 100 %, SM activity tells the truth
    readings = {UTIL: 100.0, GR_ACTIVE: 1.0, SM_ACTIVE: 0.03}
    assert busy.percent(readings, mig=False) == 3.0
    assert busy.signal(readings, mig=False) == "sm_active"
    assert busy.percent({UTIL: 70.0, GR_ACTIVE: 0.2}, mig=False) == 20.0
    assert busy.signal({UTIL: 70.0, GR_ACTIVE: 0.2}, mig=False) == "gr_engine_active"
    assert busy.percent({UTIL: 70.0}, mig=False) == 70.0
    assert busy.signal({UTIL: 70.0}, mig=False) == "gpu_util"
    assert busy.percent({"DCGM_FI_DEV_FB_USED": 1.0}, mig=False) is None
    assert busy.signal({}, mig=False) is None


def test_a_mig_device_is_never_judged_by_its_gpu_util():
    # dcgm-exporter 3.x reports a MIG device's GPU_UTIL as a constant 0
    assert busy.percent({UTIL: 0.0, GR_ACTIVE: 0.5}, mig=True) == 50.0
    assert busy.percent({UTIL: 0.0, SM_ACTIVE: 0.4, GR_ACTIVE: 0.5}, mig=True) == 40.0
    assert busy.percent({UTIL: 0.0}, mig=True) is None


def test_the_promql_takes_the_best_signal_first():
    def side(metric, matcher):
        return f"f({metric}{{{matcher}}})"

    assert busy.promql(side) == (
        f'100 * (f({SM_ACTIVE}{{}})) or 100 * (f({GR_ACTIVE}{{}})) or (f({UTIL}{{GPU_I_ID=""}}))'
    )
    whole = 'GPU_I_ID=""'
    assert busy.promql(side, whole_only=True) == (
        f"100 * (f({SM_ACTIVE}{{{whole}}})) or 100 * (f({GR_ACTIVE}{{{whole}}})) "
        f"or (f({UTIL}{{{whole}}}))"
    )


def test_the_labelled_promql_names_the_signal_and_still_keeps_one_per_device():
    text = busy.promql(lambda m, x: f"f({m})", labelled=True)
    assert text.count(" or ignoring (signal) ") == 2
    for name in ("sm_active", "gr_engine_active", "gpu_util"):
        assert f'"signal", "{name}", "", ""' in text


def test_the_summary_names_each_signal_best_first():
    assert busy.summary(["gpu_util", "sm_active", "sm_active", None]) == "sm_active 2, gpu_util 1"
    assert busy.summary(["gr_engine_active"] * 3) == "gr_engine_active"
    assert busy.summary([]) == "none"
    assert busy.duty_cycle_only(["gpu_util", "gr_engine_active"])
    assert not busy.duty_cycle_only(["gpu_util", "sm_active"])
