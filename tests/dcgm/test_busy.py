"""The one busy-signal rule: GPU_UTIL on a whole GPU, else 100 × GR_ENGINE_ACTIVE (the
PromQL every view, alert and advice builds on is checked against a real Prometheus in
tests/top and tests/advise, and by promtool in tests/top/test_alerts.py)."""

from gpuctl.dcgm import busy
from gpuctl.dcgm.metrics import GR_ACTIVE, UTIL


def test_a_whole_gpu_is_judged_by_its_utilization_else_its_engine_activity():
    assert busy.percent({UTIL: 70.0, GR_ACTIVE: 0.2}, mig=False) == 70.0
    assert busy.percent({GR_ACTIVE: 0.25}, mig=False) == 25.0
    assert busy.percent({"DCGM_FI_DEV_FB_USED": 1.0}, mig=False) is None


def test_a_mig_device_is_judged_by_its_engine_activity_only():
    # dcgm-exporter 3.x reports a MIG device's GPU_UTIL as a constant 0
    assert busy.percent({UTIL: 0.0, GR_ACTIVE: 0.5}, mig=True) == 50.0
    assert busy.percent({UTIL: 0.0}, mig=True) is None


def test_the_promql_prefers_utilization_on_whole_gpus():
    def side(metric, matcher):
        return f"f({metric}{{{matcher}}})"

    assert busy.promql(side) == (f'(f({UTIL}{{GPU_I_ID=""}})) or 100 * (f({GR_ACTIVE}{{}}))')
    assert busy.promql(side, whole_only=True) == (
        f'(f({UTIL}{{GPU_I_ID=""}})) or 100 * (f({GR_ACTIVE}{{GPU_I_ID=""}}))'
    )
