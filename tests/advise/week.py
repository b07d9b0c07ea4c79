"""A week of DCGM-exporter data (and kube-state-metrics owner series) for the advisor:
one workload per case, with utilization and memory that vary over the week."""

from tests.cluster_data import A100, H100, TOTAL_MIB
from tests.standins.dcgm_series import device_series
from tests.standins.prometheus import Series

WEEK_S = 7 * 86400
STEP_S = 600  # one sample per 10 minutes: 1,008 per series over the week
HISTORY_S = WEEK_S + 5  # the newest sample 5 s old: within the 5-minute lookback of "now"
L4, L4_MIB = "NVIDIA L4", 23034


def device(
    host,
    index,
    pod,
    namespace,
    util,
    used_mib,
    *,
    model=H100,
    total=TOTAL_MIB,
    extra=None,
    profiling="default",
):
    """A GPU held by POD for the whole week. util and used_mib: constants or functions of
    the sample's age in seconds."""
    labels = {
        "gpu": str(index),
        "UUID": f"GPU-{host}-{index:04d}",
        "device": f"nvidia{index}",
        "modelName": model,
        "Hostname": host,
        "instance": f"{host}:9400",
        "job": "dcgm",
    }
    if pod:
        labels.update(pod=pod, namespace=namespace, container="main")
    labels.update(extra or {})
    # every field of dcgm-exporter's default counters (GR_ENGINE_ACTIVE beside GPU_UTIL)
    return device_series(
        labels, util, used_mib, total, history_s=HISTORY_S, step_s=STEP_S, profiling=profiling
    )


def owner(metric, namespace, kind, name, **subject):
    labels = {"namespace": namespace, **subject, "owner_kind": kind, "owner_name": name}
    labels.update(owner_is_controller="true", job="kube-state-metrics")
    return Series(metric, labels, 1, history_s=HISTORY_S, step_s=STEP_S)


def wave(low, high, period_s=86400):
    """Utilization that is `high` one hour a day and `low` otherwise (p95 = low)."""
    return lambda age: high if age % period_s < 3600 else low


def week() -> list:
    """
    ml/infer      Deployment (pod names only), 2 × H100, ~10 %, 8 GB    → MIG 1g.10gb × 2
    ml/embed      Deployment (kube_pod_owner → ReplicaSet → Deployment),
                  1 × H100, 35 % (p95), 30 GB                          → MIG 3g.40gb
    ml/train      CronJob (pod → Job → CronJob), one pod on 8 × H100 at 90 % → keep
    ml/etl        NAME-xxxxx pod (kind unknown), 1 × H100, busy one hour a day, 2 GB
                                                                        → MIG 1g.10gb
    research/notebook StatefulSet (pod name), 1 × H100, at most 4 % all week → release
    speech/asr    Deployment (pod name), 1 × L4 (no MIG), 20 %, 4 GB    → time-slice 1/5
    node-m        a MIG device held by a pod (not advised on), a free GPU
    """
    s = []
    s += device("node-a", 0, "infer-7d4f8b9c5d-x2x4z", "ml", wave(10, 12), 8000)
    s += device("node-a", 1, "infer-7d4f8b9c5d-k9p2q", "ml", wave(9, 12), 7500)
    s += device("node-a", 2, "embed-5f6d7c8b9-qwx7z", "ml", wave(35, 60), 30000)
    s.append(
        owner("kube_pod_owner", "ml", "ReplicaSet", "embed-5f6d7c8b9", pod="embed-5f6d7c8b9-qwx7z")
    )
    s.append(
        owner("kube_replicaset_owner", "ml", "Deployment", "embed", replicaset="embed-5f6d7c8b9")
    )
    for i in range(8):
        s += device("node-b", i, "train-28391460-fx2vz", "ml", 90, 70000)
    s.append(owner("kube_pod_owner", "ml", "Job", "train-28391460", pod="train-28391460-fx2vz"))
    s.append(owner("kube_job_owner", "ml", "CronJob", "train", job_name="train-28391460"))
    s += device("node-a", 3, "etl-b7x9k", "ml", wave(0, 80), 2000)
    s += device(
        "node-a", 4, "notebook-0", "research", lambda age: 4 if age // STEP_S % 12 == 0 else 0, 1200
    )
    s += device(
        "node-l4", 0, "asr-6c9d8f7b5-x7k2p", "speech", wave(20, 40), 4000, model=L4, total=L4_MIB
    )
    s += device("node-a", 5, None, None, 0, 300)  # free
    s += device(
        "node-m",
        0,
        "small-0",
        "ml",
        50,
        3000,
        model=A100,
        total=9728,
        extra={"GPU_I_ID": "1", "GPU_I_PROFILE": "1g.10gb"},
    )
    return s
