"""reclaim's questions to Prometheus on a cluster of other vendors' accelerators, against a
real Prometheus holding each exporter's series as it emits them (tests/vendor_series.py,
which cites the sources): a held device is judged by its vendor's busy signal. A holder the
scrape kept apart from the exporter's own pod (exported_*, a Prometheus Operator
ServiceMonitor's default) is the series' own; one in the plain `pod` (honorLabels true, AMD's
Helm chart default; the TPU and Gaudi series of the corpus) is taken beside a container that
is not the exporter's, and acted on only when that pod runs on the series' node."""

import time

import pytest

from gpuctl.adapters.prometheus import Prometheus
from gpuctl.dcgm.holders import Exporter
from gpuctl.reclaim.core import signal
from tests.standins.prometheus import load_blocks, start_prometheus
from tests.vendor_series import amd_gpu, every_vendor

pytestmark = pytest.mark.integration
WINDOW_S = 600


def _read(series: list):
    """reclaim's readings of SERIES held in a real Prometheus, and the time they were read."""
    server = start_prometheus(load_blocks(series, time.time()))
    try:
        q = signal.queries([WINDOW_S], 5)
        answers = Prometheus(server.url, timeout=60).query_all(q.all())
        yield signal.read(q, answers, Exporter()), time.time()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def readings():
    yield from _read(every_vendor())


def test_an_amd_gpus_holder_is_judged_by_its_gfx_activity(readings):
    found, now = readings
    assert set(found.by_pod) == {
        ("ml", "train-0"),
        ("ml", "notebook-3"),
        ("ml", "bert-0"),
        ("test-namespace", "test-workload-pod"),
    }
    (idle,) = found.devices(("ml", "notebook-3"))
    assert idle.node == "mi300x-1" and idle.last_busy is None  # 0 % the whole lookback
    assert now - 60 < (idle.newest or 0) <= now
    steps = WINDOW_S // signal.step_for(86400)  # the lookback: a day, at least
    assert idle.covered[WINDOW_S] >= steps - 1 and idle.finite[WINDOW_S] >= steps - 1
    (busy,) = found.devices(("ml", "train-0"))
    assert busy.key == ("6b36-74a1-0010", "") and now - 120 < (busy.last_busy or 0)


def test_the_exporters_own_pod_holds_nothing_and_plain_pods_are_held_on_their_node_only(readings):
    found, _ = readings
    pods = {pod for _, pod in found.by_pod}
    assert "amd-metrics-exporter-7xk2p" not in pods  # the free GPU's only pod label
    assert {d.on_node_only for p in (("ml", "train-0"), ("ml", "notebook-3")) for d in found.devices(p)} == {False}  # fmt: skip
    (bert,) = found.devices(("ml", "bert-0"))  # Gaudi: plain pod labels
    assert bert.on_node_only and bert.node == "gaudi2-1"
    chips = found.devices(("test-namespace", "test-workload-pod"))  # TPU: per container
    assert len(chips) == 2 and {(c.node, c.on_node_only) for c in chips} == {("gke-tpu-a", True)}


def amd_pod(node: str) -> dict:
    return {
        "metadata": {"name": "rocm-2tlcz", "namespace": "ml"},
        "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"limits": {"amd.com/gpu": "2"}}}]},
        "status": {"phase": "Running"},
    }  # fmt: skip


@pytest.fixture(scope="module")
def honoured():
    """An idle AMD job's 2 GPUs scraped as AMD's Helm chart does (honorLabels true), beside a
    free GPU whose only pod label is the exporter's own."""
    held = ("ml", "rocm-2tlcz", "main")
    series = [*amd_gpu(0, 0.0, held, honor_labels=True), *amd_gpu(1, 0.0, held, honor_labels=True)]
    yield from _read(series + amd_gpu(2, 0.0))


@pytest.mark.parametrize(("node", "status"), [("mi300x-1", "idle"), ("mi300x-2", "missing")])
def test_a_plain_pod_label_is_trusted_only_where_that_pod_runs_on_the_series_node(honoured, node, status):  # fmt: skip
    from gpuctl.reclaim.core import decide, workloads
    from gpuctl.reclaim.core import policy as pol

    found, now = honoured
    assert set(found.by_pod) == {("ml", "rocm-2tlcz")}  # not the exporter's own pod
    (w,) = workloads.group([amd_pod(node)], {}, [])
    rule = pol.PolicyRule("r", ("ml",), None, (), WINDOW_S, ("delete",), 0)
    finding = decide.find(pol.Policy("p", 5, 120, 10, (), (rule,)), [w], found, now)
    (row,) = finding.rows
    assert row.status == status, row.why
    assert len(finding.plan.steps) == (status == "idle")  # the refused pod is not acted on
    if status == "missing":
        assert "on mi300x-1, not its node" in row.why


def test_a_pod_holding_another_vendors_devices_is_a_gpu_workload():
    from gpuctl.reclaim.core import workloads

    def pod(resources: dict) -> dict:
        return {
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": resources}}]},
            "status": {"phase": "Running"},
        }

    assert workloads.pod_gpus(pod({"amd.com/gpu": "2"})) == 2
    assert workloads.pod_gpus(pod({"google.com/tpu": "4", "cpu": "8"})) == 4
    assert workloads.pod_gpus(pod({"nvidia.com/sriov_rdma": "1"})) == 0  # no accelerator
