"""Other vendors' exporters' series turned into the DCGM views' shape (gpuctl.dcgm.exporters).
Label sets as tests/top/test_other_vendors.py cites them."""

from gpuctl.dcgm import busy, exporters, metrics

CHIP = {"accelerator_id": "1234567890123456789-4", "make": "cloud-tpu", "model": "tpu7x"}
POD = {"pod": "test-workload-pod", "namespace": "test-namespace", "container": "vllm-worker"}


def means(*series):
    return [({**labels, "metric": metric}, value) for metric, labels, value in series]


def test_a_tpu_chip_is_judged_by_tensorcore_utilization_before_its_duty_cycle():
    shaped = exporters.shape(
        [],
        means(
            ("duty_cycle", {**CHIP, **POD, "node": "n"}, 100.0),
            ("tensorcore_utilization", {**CHIP, **POD, "node": "n"}, 12.5),
        ),
    )
    [(labels, value)] = shaped.means
    assert (labels[busy.LABEL], value, labels["UUID"], labels["gpu"]) == (
        "tensorcore_utilization",
        12.5,
        CHIP["accelerator_id"],
        "4",
    )


def test_per_series_keeps_each_devices_best_signal_and_every_holder_of_it():
    """A TPU chip shared by two pods reports tensorcore_utilization per pod: both kept, its
    duty_cycle dropped; a chip with duty_cycle alone keeps that; DCGM's series pass."""
    other = {**POD, "pod": "second-pod"}
    chip2 = {**CHIP, "accelerator_id": "1234567890123456789-5", "node": "n"}
    dcgm = ({"__name__": metrics.UTIL, "UUID": "GPU-1"}, 3.0)
    out = exporters.per_series(
        [
            dcgm,
            ({**CHIP, **POD, "node": "n", "__name__": "duty_cycle"}, 100.0),
            ({**CHIP, **POD, "node": "n", "__name__": "tensorcore_utilization"}, 10.0),
            ({**CHIP, **other, "node": "n", "__name__": "duty_cycle"}, 100.0),
            ({**CHIP, **other, "node": "n", "__name__": "tensorcore_utilization"}, 20.0),
            ({**chip2, **POD, "__name__": "duty_cycle"}, 40.0),
        ]
    )
    assert out[0] == dcgm
    kept = sorted((s[0]["gpu"], s[0][busy.LABEL], s[0]["exported_pod"], s[1]) for s in out[1:])
    assert kept == [
        ("4", "tensorcore_utilization", "second-pod", 20.0),
        ("4", "tensorcore_utilization", "test-workload-pod", 10.0),
        ("5", "duty_cycle", "test-workload-pod", 40.0),
    ]


def test_neuron_cores_make_devices_by_the_instance_type():
    base = {"instance_id": "i-1", "instance_type": "trn2.48xlarge"}  # 8 cores a device
    current = [
        ({**base, "__name__": "neuroncore_utilization_ratio", "neuroncore": str(c)}, r)
        for c, r in ((0, 1.0), (7, 0.5), (8, 0.0))
    ]
    shaped = exporters.shape(current, [])
    util = {s[0]["gpu"]: s[1] for s in shaped.current if s[0]["__name__"] == metrics.UTIL}
    assert util == {"0": 75.0, "1": 0.0}
    assert {s[0]["modelName"] for s in shaped.current} == {"Trainium2"}
    assert set(shaped.vendors.values()) == {("aws", "neuroncore_utilization")}


def test_the_exporters_own_pod_holds_nothing_and_a_renamed_holder_does():
    amd = {"__name__": "gpu_gfx_activity", "hostname": "h", "gpu_id": "0"}
    own = {"pod": "amd-metrics-exporter-x", "container": "amd-device-metrics-exporter-container"}
    held = {**own, "exported_pod": "train-0", "exported_namespace": "ml"}
    free = exporters.shape([({**amd, **own}, 0.0)], []).attributes
    taken = exporters.shape([({**amd, **held}, 0.0)], []).attributes
    assert "exported_pod" not in free[0][0]
    assert (taken[0][0]["exported_pod"], taken[0][0]["exported_namespace"]) == ("train-0", "ml")


def test_series_of_a_common_name_without_the_exporters_labels_are_no_device():
    shaped = exporters.shape([({"__name__": "memory_used", "instance": "x"}, 5.0)], [])
    assert shaped.current == [] and shaped.attributes == []


def test_the_queries_select_each_exporter_and_keep_the_metric_name():
    assert 'accelerator_id!=""' in exporters.current_query()
    text = exporters.means_query("10m")
    for metric in exporters.BUSY:
        assert f'"metric", "{metric}"' in text
