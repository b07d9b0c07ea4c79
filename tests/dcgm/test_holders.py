"""Who holds a GPU, per series, under every scrape setup (the pure rule in holders.py)."""

import pytest

from gpuctl.common.errors import UsageError
from gpuctl.dcgm import holders
from gpuctl.dcgm.holders import Exporter, Holder

EXPORTER_POD = {
    "pod": "nvidia-dcgm-exporter-x7k2p",
    "namespace": "gpu-operator",
    "container": "nvidia-dcgm-exporter",
    "job": "nvidia-dcgm-exporter",
}
DEFAULT = holders.exporter()


def test_honor_labels_false_the_holder_is_in_exported_labels():
    labels = {
        **EXPORTER_POD,
        "exported_pod": "train-0",
        "exported_namespace": "ml",
        "exported_container": "main",
    }
    assert holders.holder(labels, DEFAULT) == Holder("ml", "train-0", "main")
    assert holders.holder(EXPORTER_POD, DEFAULT) is None  # free: only the exporter's labels


def test_honor_labels_true_the_exporters_own_pod_is_a_free_gpu():
    held = {**EXPORTER_POD, "pod": "train-0", "namespace": "ml", "container": "main"}
    assert holders.holder(held, DEFAULT) == Holder("ml", "train-0", "main")
    assert holders.holder(EXPORTER_POD, DEFAULT) is None


@pytest.mark.parametrize(
    "container, job",
    [
        ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter"),  # GPU Operator
        ("nvidia-dcgm-exporter-dra", "nvidia-dcgm-exporter-dra"),  # GPU Operator, DRA
        ("dcgm-exporter", "dcgm-exporter"),  # dcgm-exporter.yaml
        ("exporter", "dcgm-exporter-1723456789"),  # dcgm-exporter's Helm chart
    ],
)
def test_the_default_names_are_what_nvidia_deploys(container, job):
    labels = {"pod": f"{job}-abcde", "namespace": "monitoring", "container": container, "job": job}
    assert holders.holder(labels, DEFAULT) is None


def test_without_a_container_label_the_job_decides():
    exporter_pod = {"pod": "dcgm-exporter-abcde", "namespace": "monitoring"}
    assert holders.holder({**exporter_pod, "job": "dcgm-exporter"}, DEFAULT) is None
    assert holders.holder({**exporter_pod, "job": "gpu-metrics"}, DEFAULT) == Holder(
        "monitoring", "dcgm-exporter-abcde", None
    )
    # A plain scrape of an exporter with no Kubernetes labels: the pod is dcgm-exporter's.
    plain = {"pod": "train-0", "namespace": "ml", "container": "main", "job": "dcgm-exporter"}
    assert holders.holder(plain, DEFAULT) == Holder("ml", "train-0", "main")


def test_exported_labels_win_over_the_old_and_plain_names():
    labels = {
        **EXPORTER_POD,
        "exported_pod": "a",
        "exported_namespace": "x",
        "pod_name": "b",
        "pod_namespace": "y",
    }
    assert holders.holder(labels, DEFAULT) == Holder("x", "a", None)
    del labels["exported_pod"], labels["exported_namespace"]
    assert holders.holder(labels, DEFAULT) == Holder("y", "b", None)  # --use-old-namespace


def test_the_exporter_is_named_by_options():
    custom = {"pod": "gpu-mon-abcde", "namespace": "mon", "container": "gpu-mon", "job": "gpu-mon"}
    assert holders.holder(custom, DEFAULT) == Holder("mon", "gpu-mon-abcde", "gpu-mon")
    named = holders.exporter(["gpu-mon"], [])
    assert holders.holder(custom, named) is None
    # The names replace the defaults.
    assert holders.holder(EXPORTER_POD, named) == Holder(
        "gpu-operator", "nvidia-dcgm-exporter-x7k2p", "nvidia-dcgm-exporter"
    )
    assert holders.exporter(None, None) == Exporter(
        holders.DEFAULT_CONTAINERS, holders.DEFAULT_JOBS
    )


@pytest.mark.parametrize("bad", ["", " x", "a\nb", "a\x1bb"])
def test_bad_names_are_refused(bad):
    with pytest.raises(UsageError, match="--exporter-job"):
        holders.exporter(None, [bad])


def test_matchers_escape_names_for_promql():
    matchers = holders.held_matchers(Exporter(("a.b", 'x"y'), ()))
    assert 'container!~"a\\\\.b|x\\"y"' in matchers[2]
    # No job names: a series without a container is never the exporter's.
    assert matchers[3] == 'exported_pod="", pod_name="", pod!="", container=""'
