"""DCGM-exporter-shaped test data for the cluster view and the alert rules: a small cluster
with every case, as backfilled series and as exporter stand-ins to scrape."""

from tests.standins import dcgm_exporter as dcgm
from tests.standins.dcgm_series import device_series

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
    board=None,
    profiling="default",
    extra=None,
) -> list:
    """All series of one device, every field of dcgm-exporter's default counters
    (tests/standins/dcgm_series.py). util: percent (or a function of sample age). A MIG
    device (mig=(instance_id, profile, total_mib)) reports GR_ENGINE_ACTIVE and GPU_UTIL 0,
    as dcgm-exporter does, and its GPU's board readings: board=(temperature, power), the
    same on every device of that GPU. power=False: no DCGM_FI_DEV_POWER_USAGE."""
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
    temp, watts = board or (30 + now_util // 3, 70.5 + 6 * now_util)
    out = device_series(labels, util, used, total, temp=temp, power=watts, profiling=profiling)
    return [s for s in out if power or s.name != "DCGM_FI_DEV_POWER_USAGE"]


def busy_until(minutes_ago: float, busy: float):
    return lambda age: busy if age > minutes_ago * 60 else 0.0


def mixed_cluster() -> list:
    """Every device with dcgm-exporter's default counters. node-a (`Hostname`): busy held,
    idle held, idle free, busy until 20 min ago (held), plus gpu 0 scraped a second time by
    another job. node-b (`hostname`, no profiling fields): held at 40 %, free at 60 % with
    no power metric. node-10: two MIG devices of one A100, each with the GPU's board readings."""
    return (
        gpu("Hostname", "node-a", 0, 90, pod="train-0", namespace="ml")
        + gpu(
            "Hostname",
            "node-a",
            0,
            90,
            pod="train-0",
            namespace="ml",
            extra={"job": "dcgm-again", "instance": "10.9.9.9:9400"},
        )
        + gpu("Hostname", "node-a", 1, 1, pod="notebook", namespace="research")
        + gpu("Hostname", "node-a", 2, 2)
        + gpu("Hostname", "node-a", 3, busy_until(20, 90), pod="train-3", namespace="ml")
        + gpu("hostname", "node-b", 0, 40, pod="job-1", namespace="research", profiling="off")
        + gpu("hostname", "node-b", 1, 60, power=False, profiling="off")
        + gpu(
            "Hostname",
            "node-10",
            0,
            50,
            model=A100,
            pod="infer",
            namespace="ml",
            mig=(1, "3g.40gb", 40192),
            board=(46, 370.5),
        )
        + gpu(
            "Hostname",
            "node-10",
            0,
            1,
            model=A100,
            pod="nb-2",
            namespace="research",
            mig=(2, "3g.40gb", 40192),
            board=(46, 370.5),
        )
    )


L40S = "NVIDIA L40S"


def dcgm_values(util, used, free, reserved=0, temp=45, power=120.5, mig=False) -> dict:
    """A device's values for every field of dcgm-exporter's default counters."""
    return dcgm.default_values(util, used, free, reserved, temp=temp, power=power, mig=mig)


def scraped_cluster() -> list:
    """dcgm-exporter stand-ins, one per node, each a different release or option:
    (node, devices, release). Free GPUs on every node; idle held ones on node-2 (shared by
    two pods) and node-4."""
    shared = [
        dcgm.Holder(
            "research",
            "nb-b",
            "notebook",
            share={"DCGM_FI_DEV_GPU_UTIL": 2, "DCGM_FI_DEV_FB_USED": 5000},
        ),
        dcgm.Holder(
            "research",
            "nb-a",
            "notebook",
            share={"DCGM_FI_DEV_GPU_UTIL": 1, "DCGM_FI_DEV_FB_USED": 3000},
        ),
    ]
    return [
        (  # a current release: `hostname`, reserved memory reported
            "node-1",
            [
                dcgm.Device(
                    0,
                    "GPU-n1-0",
                    H100,
                    dcgm_values(90, 70000, 10920, 639),
                    [dcgm.Holder("ml", "train-0", "main")],
                ),
                dcgm.Device(1, "GPU-n1-1", H100, dcgm_values(0, 0, 80920, 639)),
            ],
            dcgm.Release(),
        ),
        (  # time-slicing: two pods share GPU 0 (--kubernetes-virtual-gpus)
            "node-2",
            [dcgm.Device(0, "GPU-n2-0", L40S, dcgm_values(3, 8000, 37000, 0), shared)],
            dcgm.Release(shared=True),
        ),
        (  # 4.x before `hostname` and FB_RESERVED; MIG instances, one held
            "node-3",
            [
                dcgm.Device(
                    0,
                    "GPU-n3-0",
                    A100,
                    dcgm_values(50, 20000, 20192, mig=True),
                    [dcgm.Holder("ml", "infer", "server")],
                    mig=("3g.40gb", 1),
                ),
                dcgm.Device(
                    0, "GPU-n3-0", A100, dcgm_values(1, 0, 40192, mig=True), mig=("3g.40gb", 2)
                ),
            ],
            dcgm.Release(host_label="Hostname", driver_version="550.144.03"),
        ),
        (  # --use-old-namespace: `uuid`, container_name/pod_name/pod_namespace
            "node-4",
            [
                dcgm.Device(
                    0,
                    "GPU-n4-0",
                    H100,
                    dcgm_values(1, 500, 80000),
                    [dcgm.Holder("ml", "old-job", "main")],
                ),
                dcgm.Device(1, "GPU-n4-1", H100, dcgm_values(0, 0, 80500)),
            ],
            dcgm.Release(host_label="Hostname", uuid_label="uuid", old_namespace=True),
        ),
        (  # an old release writing empty pod labels on a free GPU
            "node-5",
            [dcgm.Device(0, "GPU-n5-0", H100, dcgm_values(0, 0, 80500))],
            dcgm.Release(host_label="Hostname", empty_attributes=True),
        ),
    ]


# Each way a Prometheus comes to scrape dcgm-exporter: (Deployment or None, honor_labels).
SCRAPE_SETUPS = {
    "gpu-operator, honorLabels false": (dcgm.GPU_OPERATOR, False),
    "gpu-operator, honorLabels true": (dcgm.GPU_OPERATOR, True),
    "helm chart, honorLabels false": (dcgm.HELM_CHART, False),
    "helm chart, honorLabels true": (dcgm.HELM_CHART, True),
    "static scrape, no Kubernetes labels": (None, False),
}


def stranded_cluster() -> list:
    """Most pods hold 2 GPUs: s1's last free GPU can take none of them; s2's two can."""
    holders = {
        "s1": ["p1", "p1", "p2", "p2", "p3", "p3", "p4", None],
        "s2": ["q1", "q1", None, None],
    }
    return [
        s
        for host, pods in holders.items()
        for i, pod in enumerate(pods)
        for s in gpu("Hostname", host, i, 50, pod=pod, namespace="ml" if pod else None)
    ]
