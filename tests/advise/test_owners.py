"""A pod's workload: from kube-state-metrics' owner series, else from its name."""

import pytest

from gpuctl.advise.core.owners import KSM, POD_NAME, Workload, from_pod_name, parse


@pytest.mark.parametrize(
    "pod, kind, name",
    [
        ("infer-7d4f8b9c5d-x2x4z", "Deployment", "infer"),
        ("my-app-v2-5f6d7c8b9-qwx7z", "Deployment", "my-app-v2"),
        ("train-3-k9p2q", "Job", "train"),  # an Indexed Job's pod: NAME-INDEX-xxxxx
        ("etl-b7x9k", None, "etl"),  # a Job's, ReplicaSet's or DaemonSet's
        ("notebook-0", "StatefulSet", "notebook"),
        ("db-replica-12", "StatefulSet", "db-replica"),
        ("debug", "Pod", "debug"),
        ("asr-abcde", "Pod", "asr-abcde"),  # vowels: not a generated suffix
        ("x-7d4f8b9c5d-aaaaa", "Pod", "x-7d4f8b9c5d-aaaaa"),
    ],
)
def test_workload_from_the_pod_name(pod, kind, name):
    assert from_pod_name("ns", pod) == Workload("ns", kind, name, POD_NAME)


def series(**labels):
    return (labels, 1.0)


def test_kube_state_metrics_owners_one_level_up():
    owners = parse(
        [
            series(namespace="ml", pod="embed-5f6d7c8b9-qwx7z", owner_kind="ReplicaSet",
                   owner_name="embed-5f6d7c8b9", owner_is_controller="true"),
            series(namespace="ml", replicaset="embed-5f6d7c8b9", owner_kind="Deployment",
                   owner_name="embed", owner_is_controller="true"),
            series(namespace="ml", pod="nightly-28391460-fx2vz", owner_kind="Job",
                   owner_name="nightly-28391460", owner_is_controller="true"),
            series(namespace="ml", job_name="nightly-28391460", owner_kind="CronJob",
                   owner_name="nightly", owner_is_controller="true"),
            series(namespace="ml", pod="one-off", owner_kind="<none>", owner_name="<none>",
                   owner_is_controller="<none>"),
            series(namespace="ml", pod="ray-worker-x", owner_kind="RayCluster",
                   owner_name="ray", owner_is_controller="true"),
            # a ReplicaSet with no kube_replicaset_owner series: the hash is stripped
            series(namespace="ml", pod="web-6b7c8d9f5-abcdz", owner_kind="ReplicaSet",
                   owner_name="web-6b7c8d9f5", owner_is_controller="true"),
            # the same names in another namespace are other objects
            series(namespace="dev", pod="embed-5f6d7c8b9-qwx7z", owner_kind="Job",
                   owner_name="embed", owner_is_controller="true"),
        ]
    )  # fmt: skip
    assert owners.workload(("ml", "embed-5f6d7c8b9-qwx7z")) == Workload(
        "ml", "Deployment", "embed", KSM
    )
    assert owners.workload(("ml", "nightly-28391460-fx2vz")) == Workload(
        "ml", "CronJob", "nightly", KSM
    )
    assert owners.workload(("ml", "one-off")) == Workload("ml", "Pod", "one-off", KSM)
    assert owners.workload(("ml", "ray-worker-x")) == Workload("ml", "RayCluster", "ray", KSM)
    assert owners.workload(("ml", "web-6b7c8d9f5-abcdz")) == Workload(
        "ml", "Deployment", "web", KSM
    )
    assert owners.workload(("dev", "embed-5f6d7c8b9-qwx7z")) == Workload("dev", "Job", "embed", KSM)
    # a pod kube-state-metrics does not know (yet): its name
    assert owners.workload(("ml", "infer-7d4f8b9c5d-x2x4z")).source == POD_NAME


def test_a_controller_owner_wins_and_exported_labels_are_read():
    owners = parse(
        [
            series(exported_namespace="ml", exported_pod="p", namespace="monitoring",
                   pod="kube-state-metrics-0", owner_kind="StatefulSet", owner_name="db",
                   owner_is_controller="true"),
            series(exported_namespace="ml", exported_pod="p", namespace="monitoring",
                   pod="kube-state-metrics-0", owner_kind="ConfigMap", owner_name="x",
                   owner_is_controller="false"),
        ]
    )  # fmt: skip
    assert owners.workload(("ml", "p")) == Workload("ml", "StatefulSet", "db", KSM)
    assert owners.workload(("monitoring", "kube-state-metrics-0")).source == POD_NAME
