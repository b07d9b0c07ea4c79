"""DCGM-exporter-shaped test data for the cluster view: a small cluster with every case."""

from tests.standins.prometheus import Series

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
TOTAL_MIB = 81559


def gpu(
    host_label: str,
    host: str,
    index: int,
    util,
    *,
    model=H100,
    pod=None,
    namespace=None,
    power=True,
    mig=None,
    extra=None,
) -> list:
    """All series of one device. util: percent (or a function of sample age); for a MIG
    device (mig=(instance_id, profile, total_mib)) it is reported as GR_ENGINE_ACTIVE, and
    GPU_UTIL reads 0 as dcgm-exporter reports it for MIG devices."""
    labels = {
        "gpu": str(index),
        "UUID": f"GPU-{host}-{index:04d}",
        "device": f"nvidia{index}",
        "modelName": model,
        host_label: host,
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
        "instance": f"10.0.0.{index}:9400",
        "job": "dcgm",
    }
    total = TOTAL_MIB
    if mig:
        labels.update(GPU_I_ID=str(mig[0]), GPU_I_PROFILE=mig[1])
        total = mig[2]
    if pod:
        labels.update(pod=pod, namespace=namespace, container="main")
    labels.update(extra or {})
    now_util = util(0) if callable(util) else util
    used = round(total * now_util / 100 * 0.9) + 500
    out = [
        Series(
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE" if mig else "DCGM_FI_DEV_GPU_UTIL",
            labels,
            (lambda age: util(age) / 100)
            if mig and callable(util)
            else (util / 100 if mig else util),
        ),
        Series("DCGM_FI_DEV_FB_USED", labels, used, history_s=60),
        Series("DCGM_FI_DEV_FB_FREE", labels, total - used, history_s=60),
        Series("DCGM_FI_DEV_GPU_TEMP", labels, 30 + now_util // 3, history_s=60),
    ]
    if power:
        out.append(Series("DCGM_FI_DEV_POWER_USAGE", labels, 70.5 + 6 * now_util, history_s=60))
    if mig:  # dcgm-exporter 3.x reports GPU_UTIL as 0 for MIG devices (NVIDIA/dcgm-exporter#216)
        out.append(Series("DCGM_FI_DEV_GPU_UTIL", labels, 0.0))
    return out


def busy_until(minutes_ago: float, busy: float):
    return lambda age: busy if age > minutes_ago * 60 else 0.0
