"""The advice from samples as Prometheus answers them (no server): profile choice, shares,
release, totals packed by the MIG planner, and who holds a GPU."""

import pytest

from gpuctl.advise.core import decide
from gpuctl.advise.core.decide import KEEP, MAX_SHARE, MIG, RELEASE, SHARE, advise, smallest_profile
from gpuctl.gpus.geometry import find_model
from tests.cluster_data import A100, H100, TOTAL_MIB

L4 = "NVIDIA L4"


class Gpu:
    """One whole GPU held now by POD, with its statistics over the window."""

    def __init__(self, n, pod, ns="ml", *, model=H100, total=TOTAL_MIB, peak=8000, p95=10,
                 top=30, extra=None):  # fmt: skip
        self.labels = {"UUID": f"GPU-{n}", "gpu": "0", "Hostname": f"node-{n}", "modelName": model}
        if pod:
            self.labels.update(pod=pod, namespace=ns)
        self.labels.update(extra or {})
        self.total, self.peak, self.p95, self.top = total, peak, p95, top

    def now(self):
        used = 1000
        return [
            ({**self.labels, "__name__": "DCGM_FI_DEV_FB_USED"}, used),
            ({**self.labels, "__name__": "DCGM_FI_DEV_FB_FREE"}, self.total - used),
        ]


def run(gpus, owners=(), idle=5.0, namespace=None, history=()):
    """advise() over GPUS held now, plus window-only samples of pods gone since (HISTORY)."""
    past = list(gpus) + list(history)
    return advise(
        [s for g in gpus for s in g.now()],
        [(g.labels, g.peak) for g in past if g.peak is not None],
        [(g.labels, g.p95) for g in past if g.p95 is not None],
        [(g.labels, g.top) for g in past if g.top is not None],
        list(owners),
        idle,
        namespace,
    )


def only(result):
    (row,) = result.workloads
    return row


@pytest.mark.parametrize(
    "model, memory, utilization, profile",
    [
        ("H100-80GB", 8800, 10, "1g.10gb"),
        ("H100-80GB", 8800, 14.2, "1g.10gb"),  # 1/7 of the compute is 14.29 %
        ("H100-80GB", 8800, 14.3, "2g.20gb"),
        ("H100-80GB", 15000, 10, "1g.20gb"),  # more memory, same compute
        ("H100-80GB", 15000, 20, "2g.20gb"),
        ("H100-80GB", 33000, 35, "3g.40gb"),
        ("H100-80GB", 33000, 50, "4g.40gb"),
        ("H100-80GB", 50000, 10, "7g.80gb"),
        ("H100-80GB", 90000, 10, None),
        ("A100-80GB", 15000, 10, "2g.20gb"),  # its 1g.20gb memory is unconfirmed: not offered
        ("A30", 5000, 20, "1g.6gb"),  # 1/4 of an A30's compute
        ("A30", 5000, 30, "2g.12gb"),
    ],
)
def test_smallest_profile_holds_the_memory_and_covers_the_utilization(
    model, memory, utilization, profile
):
    found = smallest_profile(find_model(model), memory, utilization)
    assert (found.name if found else None) == profile
    if found:
        assert "+" not in found.name  # never a media-engine variant


def test_mig_profile_from_peak_memory_with_headroom_and_p95():
    row = only(run([Gpu(1, "infer-0", peak=9000, p95=10)]))  # 9,900 MiB ≤ 9,984
    assert (row.advice, row.mig_profile) == (MIG, "1g.10gb")
    row = only(run([Gpu(1, "infer-0", peak=9100, p95=10)]))  # 10,010 MiB > 9,984
    assert (row.advice, row.mig_profile) == (MIG, "1g.20gb")


def test_idle_the_whole_window_means_release():
    row = only(run([Gpu(1, "nb-0", p95=0, top=4.9)]))
    assert row.advice == RELEASE and "idle the whole window" in row.reason
    assert only(run([Gpu(1, "nb-0", p95=0, top=5)])).advice == MIG  # not strictly below
    assert only(run([Gpu(1, "nb-0", p95=0, top=9)], idle=10)).advice == RELEASE


def test_pods_with_several_gpus_keep_them_unless_idle():
    gpus = [Gpu(i, "train-0", p95=5, top=50) for i in range(4)]
    row = only(run(gpus))
    assert (row.advice, row.gpus, row.gpus_per_pod) == (KEEP, 4, 4)
    assert only(run([Gpu(i, "train-0", p95=0, top=0) for i in range(4)])).advice == RELEASE


def test_a_whole_gpu_needed_or_no_samples_means_keep():
    assert only(run([Gpu(1, "big-0", peak=60000)])).advice == KEEP
    assert only(run([Gpu(1, "hot-0", p95=90)])).advice == KEEP
    row = only(run([Gpu(1, "new-0", peak=None, p95=None, top=None)]))
    assert row.advice == KEEP and "no utilization samples" in row.reason


def test_time_slice_share_on_a_gpu_without_mig():
    row = only(run([Gpu(1, "asr-0", model=L4, total=23034, peak=4000, p95=20)]))
    assert (row.advice, row.share) == (SHARE, 5)  # 23034 // 4400 = 5, 100 // 20 = 5
    row = only(run([Gpu(1, "asr-0", model=L4, total=23034, peak=10000, p95=20)]))
    assert (row.advice, row.share) == (SHARE, 2)  # memory limits it
    row = only(run([Gpu(1, "asr-0", model=L4, total=23034, peak=100, p95=0, top=50)]))
    assert row.share == MAX_SHARE
    assert only(run([Gpu(1, "asr-0", model=L4, total=23034, p95=60)])).advice == KEEP


def test_totals_pack_mig_demand_with_the_planner():
    # seven 1g.10gb fit one H100 (at most 7 such instances), the eighth needs another
    seven = [Gpu(i, f"svc-{i}", p95=5) for i in range(7)]
    t = run(seven).totals
    assert (t.gpus_held, t.gpus_needed, t.gpus_freed) == (7, 1, 6)
    t = run(seven + [Gpu(7, "svc-7", p95=5)]).totals
    assert (t.gpus_held, t.gpus_needed, t.gpus_freed) == (8, 2, 6)
    # kept GPUs count whole, released ones not at all, shares k pods to a GPU
    shares = [Gpu(10 + i, f"asr-{i}", model=L4, total=23034, peak=4000, p95=20) for i in range(6)]
    t = run([Gpu(20, "hot-0", p95=90), Gpu(21, "nb-0", top=0)] + shares).totals
    assert (t.gpus_held, t.gpus_needed, t.gpus_freed) == (8, 1 + 2, 5)


def test_a_workload_is_its_pods_together():
    gpus = [Gpu(1, "infer-7d4f8b9c5d-x2x4z", peak=4000), Gpu(2, "infer-7d4f8b9c5d-k9p2q")]
    # a pod of the same Deployment that ran earlier in the window and used more memory
    gone = Gpu(3, "infer-7d4f8b9c5d-zz9zz", peak=12000, p95=12)
    row = only(run(gpus, history=[gone]))
    assert (row.workload.kind, row.workload.name) == ("Deployment", "infer")
    assert row.pods == ["infer-7d4f8b9c5d-k9p2q", "infer-7d4f8b9c5d-x2x4z"]
    assert (row.gpus, row.peak_memory_mib, row.p95_utilization) == (2, 12000, 12)
    assert row.mig_profile == "1g.20gb"


def test_owner_series_decide_the_workload():
    owner = (
        {"namespace": "ml", "pod": "w-1", "owner_kind": "StatefulSet", "owner_name": "db",
         "owner_is_controller": "true"},
        1.0,
    )  # fmt: skip
    row = only(run([Gpu(1, "w-1")], owners=[owner]))
    assert (row.workload.kind, row.workload.name, row.workload.source) == (
        "StatefulSet",
        "db",
        "kube-state-metrics",
    )


def test_free_gpus_mig_devices_and_other_namespaces_are_left_out():
    gpus = [Gpu(1, None), Gpu(2, "a-0", ns="team-a"), Gpu(3, "b-0", ns="team-b")]
    assert [r.workload.namespace for r in run(gpus).workloads] == ["team-a", "team-b"]
    result = run(gpus, namespace="team-b")
    assert [r.pods for r in result.workloads] == [["b-0"]]
    assert result.totals.gpus_held == 1


def test_holder_from_exported_labels_when_the_scrape_renamed_them():
    # the exporter's own labels as the Prometheus Operator writes them (honorLabels false)
    exporter = {
        "pod": "nvidia-dcgm-exporter-7x",
        "namespace": "gpu-operator",
        "container": "nvidia-dcgm-exporter",
        "job": "nvidia-dcgm-exporter",
    }
    gpus = [
        Gpu(1, None, extra={**exporter, "exported_pod": "train-0", "exported_namespace": "ml"}),
        Gpu(2, None, extra=exporter),  # free: not held by the exporter's own pod
    ]
    row = only(run(gpus))
    assert (row.workload.namespace, row.pods) == ("ml", ["train-0"])


def test_a_gpu_of_unknown_model_is_kept():
    gpu = Gpu(1, "x-0")
    del gpu.labels["modelName"]
    row = only(run([gpu]))
    assert row.advice == KEEP and "model is unknown" in row.reason


def test_gpus_of_several_models_are_kept():
    row = only(run([Gpu(1, "x-0"), Gpu(2, "x-0", model=A100)]))
    assert row.advice == KEEP and "several models" in row.reason


def test_queries_are_five_and_check_the_window():
    q = decide.queries("7d")
    assert len(q.all()) == 5
    assert all("[7d]" in text for text in q.all()[1:])
    assert "quantile_over_time(0.95," in q.p95_utilization
    assert 'GPU_I_ID=""' in q.now  # whole GPUs only
    from gpuctl.common.errors import UsageError

    with pytest.raises(UsageError, match="--window"):
        decide.queries("7 days")
