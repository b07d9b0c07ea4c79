"""reclaim on DRA devices, pure: the holder of a device a claim allocates is the pod the
claim is reserved for (pod ↔ claim ↔ the device's uuid attribute), joined to DCGM's series by
UUID when the series names no pod; the pod's workload is judged by the same policy, every
claimed GPU counted (real slices: tests/data/dra)."""

from __future__ import annotations

from collections import Counter

from gpuctl.dcgm import holders
from gpuctl.gpus import dra
from gpuctl.reclaim.core import signal, workloads
from tests.gpus.test_dra import AKS, CLASSES, SLICES, T4, allocated
from tests.gpus.test_dra_mig_holders import AKS_GPU, mig
from tests.reclaim.test_decide import NOW, Q, judge, policy

UUIDS = ("GPU-da96f367-6e47-8dc4-fd29-4f0b97b9f174", "GPU-204349eb-0405-e927-278b-8804172f1be3")


def dra_pod(name: str) -> dict:
    """A pod whose GPUs come from a claim: no GPU limit, a resourceClaims entry."""
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeName": T4, "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "train-gpu"}]},
        "status": {"phase": "Running"},
    }  # fmt: skip


def series(uuid: str, value: float) -> tuple[dict, float]:
    """dcgm-exporter's series of a device no pod-resources entry names (no pod labels)."""
    return {"UUID": uuid, "gpu": "0", "Hostname": T4, "modelName": "Tesla T4"}, value


def test_a_claims_devices_are_its_pods_and_judged_idle():
    claim = allocated(
        "ml", "train", ("gpu.nvidia.com", T4, "gpu-0"), ("gpu.nvidia.com", T4, "gpu-1")
    )
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "train-0", "uid": "u"}]
    view = dra.view(CLASSES, SLICES, [claim])
    by_uuid = view.holders()
    assert by_uuid == {UUIDS[0]: ("ml", "train-0"), UUIDS[1]: ("ml", "train-0")}
    whole = [series(u, 7200 / Q.step_s) for u in UUIDS]  # every step of the window
    # newest, never busy in the lookback, then covered, measured and finite over the window
    answers = [[series(u, NOW - 10) for u in UUIDS], [], whole, whole, whole]
    readings = signal.read(Q, answers, holders.Exporter(), claimed=by_uuid)
    assert len(readings.devices(("ml", "train-0"))) == 2
    (w,) = workloads.group([dra_pod("train-0")], {}, [], Counter(by_uuid.values()))
    assert (w.kind, w.gpus) == ("Pod", 2)
    row = judge(policy("delete"), w, readings)
    assert row.status == "idle"
    # without the join the series hold nothing and the pod no GPU: nothing to judge
    assert signal.read(Q, answers, holders.Exporter()).by_pod == {}
    assert workloads.group([dra_pod("train-0")], {}, []) == []


def test_mig_devices_one_pod_holds_every_one_of_are_its():
    """DCGM's MIG series carry the parent's UUID and the profile, not the device's: joined by
    (parent, profile) where one pod holds every such device (DraView.mig_holders)."""
    view = dra.view(
        CLASSES, SLICES, [mig("ml", "tune", AKS, "gpu-0-mig-19-2-1", "gpu-0-mig-19-3-1")]
    )
    parent = {"UUID": AKS_GPU, "gpu": "0", "Hostname": AKS, "GPU_I_PROFILE": "1g.10gb"}
    migs = [{**parent, "GPU_I_ID": gi} for gi in ("7", "8")]
    answers = [[(m, NOW - 10) for m in migs], [], *[[(m, 7200 / Q.step_s) for m in migs]] * 3]
    readings = signal.read(
        Q, answers, holders.Exporter(), claimed=view.holders(), claimed_mig=view.mig_holders()
    )
    assert len(readings.devices(("ml", "tune-pod"))) == 2
    assert signal.read(Q, answers, holders.Exporter(), claimed=view.holders()).by_pod == {}
