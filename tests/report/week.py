"""A week of DCGM-exporter series for several teams, in dcgm-exporter's labels (see
tests/standins/dcgm_exporter.py), every field of its default counters on each device
(tests/standins/dcgm_series.py), on a 5-minute sample grid placed between the report's
hour steps, and the figures a person computes from it by hand.

    node-a (H100, profiling fields on)   GPU 0  ml/train-0     SM_ACTIVE 0.60 (GPU_UTIL 100)
                                         GPU 1  ml/train-1     SM_ACTIVE 0.02 (GPU_UTIL 100: the
                                                               duty cycle lies; idle by SM)
    node-b (A100 80GB, no profiling)     GPU 0  research/nb    GPU_UTIL 50, held the first 84 h
                                                               of the window, free after
                                         GPU 1  free           GPU_UTIL 0
    node-c (A100 80GB, MIG)              1g.10gb #7  infer/a    GR_ENGINE_ACTIVE 0.5 (GPU_UTIL 0)
                                         1g.10gb #8  infer/b    GR_ENGINE_ACTIVE 0.0
                                         3g.40gb #1  ml/tune    SM_ACTIVE 0.3, GR 0.9
    node-d (L4, time-sliced, no prof.)   GPU 0  speech/asr + chat/bot   GPU_UTIL 40 (device)
"""

from __future__ import annotations

from tests.standins.dcgm_series import device_series, shared_device_series
from tests.standins.prometheus import Series

H100, A100, L4 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L4"
UTIL, GR, SM = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE"
HOUR, WEEK = 3600, 7 * 86400
SAMPLE_S = 300
PRICES = {"H100": 12.29, "A100 80GB": 5.1207, "L4": 1.6688}  # the shipped table's

# By hand, over the 168 hours of the window (MIG 1g = 1/7 of an A100, 3g = 3/7):
EXPECTED = {
    #           held     busy                       idle-held
    "ml": (2 * 168 + 72, (0.6 + 0.02) * 168 + 0.3 * 72, 168),
    "research": (84, 0.5 * 84, 0),
    "infer": (48, 0.5 * 24, 24),
    "speech": (84, 0.4 * 84, 0),
    "chat": (84, 0.4 * 84, 0),
}
COST = {
    "ml": 336 * 12.29 + 72 * 5.1207,
    "research": 84 * 5.1207,
    "infer": 48 * 5.1207,
    "speech": 84 * 1.6688,
    "chat": 84 * 1.6688,
}
CLUSTER_GPU_HOURS = (2 + 2 + 5 / 7 + 1) * 168


def _holder(namespace, pod) -> dict:
    return {"container": "main", "namespace": namespace, "pod": pod}


def _device(host, gpu, model, mig=None, holder=None):
    labels = {
        "gpu": str(gpu),
        "UUID": f"GPU-{host}-{gpu:04d}",
        "pci_bus_id": f"00000000:{gpu + 16:02X}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": model,
    }
    if mig:
        labels.update(GPU_I_PROFILE=mig[0], GPU_I_ID=str(mig[1]))
    labels.update(Hostname=host, DCGM_FI_DRIVER_VERSION="580.95.05")
    if holder:
        labels.update(_holder(*holder))
    labels.update(instance=f"{host}:9400", job="dcgm-exporter")
    return labels


def series(end: float, now: float) -> tuple[list, float]:
    """The series (their samples on a grid between `end`'s hour steps) and the `now` the
    openmetrics ages are relative to. `end`: the report's end, an hour boundary."""
    history = WEEK + 2 * HOUR
    split = end - 84 * HOUR  # research holds node-b's GPU 0 until then

    def ages(until=None, since=None) -> dict:
        # samples at ages that are multiples of SAMPLE_S; `until`/`since`: a time between two
        newest = 0 if until is None else int(now - until) // SAMPLE_S * SAMPLE_S + SAMPLE_S
        oldest = history if since is None else int(now - since) // SAMPLE_S * SAMPLE_S
        return {"history_s": oldest, "newest_s": newest, "step_s": SAMPLE_S}

    def s(name, labels, value, until=None, since=None):
        return Series(name, labels, value, **ages(until, since))

    def d(labels, busy, total, profiling="default", until=None, since=None, **fields):
        """Every default field of a device (tests/standins/dcgm_series.py); `fields`: its
        busy-signal fields' own values."""
        return device_series(labels, busy, 1000, total, profiling=profiling,
                             overrides=fields or None, **ages(until, since))  # fmt: skip

    a0, a1 = (
        _device("node-a", 0, H100, holder=("ml", "train-0")),
        _device("node-a", 1, H100, holder=("ml", "train-1")),
    )
    out = d(a0, 100, 81559, "sm", **{SM: 0.6, GR: 0.95})
    out += d(a1, 100, 81559, "sm", **{SM: 0.02, GR: 1.0})
    b0 = _device("node-b", 0, A100, holder=("research", "nb"))
    out += d(b0, 50, 81920, "off", until=split)
    out += d(_device("node-b", 0, A100), 0, 81920, "off", since=split)
    out += d(_device("node-b", 1, A100), 0, 81920, "off")
    mig_a = _device("node-c", 0, A100, ("1g.10gb", 7), ("infer", "a"))
    mig_b = _device("node-c", 0, A100, ("1g.10gb", 8), ("infer", "b"))
    mig_t = _device("node-c", 0, A100, ("3g.40gb", 1), ("ml", "tune"))
    out += d(mig_a, 50, 9856) + d(mig_b, 0, 9856)  # their GPU_UTIL 0, as MIG devices report it
    out += d(mig_t, 90, 40192, "sm", **{SM: 0.3})
    # time-slicing: every field copied per pod, GPU_UTIL also the device's own total (40),
    # each pod's copy its share
    pods = [(_holder("speech", "asr"), 30), (_holder("chat", "bot"), 10)]
    out += shared_device_series(_device("node-d", 0, L4), pods, 40, 1000, 23034,
                                profiling="off", **ages())  # fmt: skip
    # kube-state-metrics' pod labels (--metric-labels-allowlist=pods=[team]) for --by label
    for namespace, pod, team in (("ml", "train-0", "alpha"), ("speech", "asr", "voice")):
        labels = {"namespace": namespace, "pod": pod, "label_team": team}
        out.append(s("kube_pod_labels", {**labels, "job": "kube-state-metrics"}, 1))
    return out, now


# --by label team: the two labelled pods' holdings, everything else team "-"
BY_LABEL = {"alpha": 168, "voice": 84, "-": sum(h for h, _, _ in EXPECTED.values()) - 168 - 84}
