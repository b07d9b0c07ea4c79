"""The sandbox's DRA node pool end to end: a simulated DRA driver publishes the A100 node's
GPUs in a ResourceSlice, a job asking for A100s is submitted with a claim (no device plugin
offers them), the simulated scheduler allocates the claim by evaluating its selectors on the
published devices and writes status.allocation and reservedFor, a second job waits with the
scheduler's reason, and `gpuctl nodes` counts the devices the claim holds."""

from __future__ import annotations

import json

import pytest

from tests.clirun import run_gpuctl
from tests.sandbox.test_sandbox import SPEC, _until

pytestmark = pytest.mark.integration
pytest.importorskip("kmock")


def test_a_dra_pool_beside_device_plugin_nodes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    code, out, err = run_gpuctl(
        capsys, "sandbox", "start", "--gpu-nodes", "1xH100-80GB,1xA100-80GB:dra",
        "--prometheus-bin", "", "-o", "json",
    )  # fmt: skip
    assert code == 0, err
    info = json.loads(out)
    try:
        monkeypatch.setenv("KUBECONFIG", info["kubeconfig"])
        for name, gpus in (("claims", 4), ("waits", 6)):
            spec = SPEC.format(name=name, gpus=gpus, runtime=600).replace("h100", "a100")
            (tmp_path / f"{name}.yaml").write_text(spec)
            code, out, err = run_gpuctl(capsys, "submit", tmp_path / f"{name}.yaml", "-o", "json")
            assert code == 0, err

        def states():
            code, out, _ = run_gpuctl(capsys, "jobs", "list", "-o", "json")
            return {r["name"]: r["status"] for r in json.loads(out)["jobs"]} if code == 0 else {}

        _until(lambda: states() == {"claims": "Running", "waits": "Pending"})
        code, out, _ = run_gpuctl(capsys, "nodes", "-o", "json")
        rows = {n["name"]: n["accelerators"] for n in json.loads(out)["nodes"]}
        (a100,) = rows["a100-dra-node-1"]
        assert (a100["source"], a100["device_class"], a100["model"]) == ("dra", "gpu.nvidia.com", "A100-80GB")  # fmt: skip
        assert (a100["count"], a100["allocated"], a100["free"]) == (8, 4, 4)
        code, out, _ = run_gpuctl(capsys, "jobs", "why", "waits")
        assert code == 0 and "cannot allocate all claims" in out, out
        assert "4 of 8 matching devices free, a worker claims 6" in out
    finally:
        code, out, _ = run_gpuctl(capsys, "sandbox", "stop")
    assert code == 0 and "stopped" in out


def _dra_node_sim(kube):
    """The sandbox's controllers over one A100 node of the DRA driver, seeded as the sandbox
    seeds it (no Kueue), the emulator's bookmarks as often as the sandbox asks for them."""
    from gpuctl.sim import cluster, mig_manager
    from gpuctl.sim.controllers import BOOKMARK_S, Api, Simulation
    from gpuctl.sim.sandbox import seed

    layouts = mig_manager.shipped_layouts()
    nodes = cluster.node_objects(cluster.parse_nodes("1xA100-80GB:dra", layouts), layouts)
    api = Api(kube.url)
    seed(api, nodes, kueue=False)
    kube.bookmark_every(BOOKMARK_S)
    return api, Simulation(api, {}, kube)


def test_a_claim_goes_when_its_pod_ends_or_is_gone(kube, tmp_path, capsys):
    """The resource claim controller's part: a claim made from a template for a pod is
    deleted when the pod finishes, and when the pod is gone with its Job (the garbage
    collector), so its devices are free for the next claim."""
    kube.install_crds("JobSet")
    api, sim = _dra_node_sim(kube)
    claims = "/apis/resource.k8s.io/v1/resourceclaims"
    for name, runtime in (("short", 0), ("long", 600)):
        spec = SPEC.format(name=name, gpus=4, runtime=runtime).replace("h100", "a100")
        (tmp_path / f"{name}.yaml").write_text(spec)
        assert run_gpuctl(capsys, "submit", tmp_path / f"{name}.yaml")[0] == 0
    for _ in range(5):  # the Jobs' pods made, placed, run; short's ended
        sim.step()
    held = {c["metadata"]["ownerReferences"][0]["name"].rsplit("-", 1)[0] for c in api.items(claims)}  # fmt: skip
    assert held == {"long"}, held  # short ran (runtime 0), ended, and its claim went
    (long_pod,) = [p for p in api.items("/api/v1/pods") if p["metadata"]["name"].startswith("long-")]  # fmt: skip
    (claim,) = api.items(claims)
    assert claim["status"]["reservedFor"][0]["uid"] == long_pod["metadata"]["uid"]
    api.delete("/apis/batch/v1/namespaces/default/jobs/long")
    for _ in range(2):  # the Job's pod collected, then its claim
        sim.step()
    assert not [p for p in api.items("/api/v1/pods") if p["metadata"]["name"].startswith("long-")]
    assert api.items(claims) == []


def test_a_plain_gpu_limit_gets_the_claim_kube_scheduler_makes(kube, tmp_path, capsys):
    """KEP-5004 end to end: the driver's chart maps gpu.nvidia.com to nvidia.com/gpu, so a
    job asking plain GPUs keeps its limit (gpuctl renders no claim); on the DRA node, which
    advertises no nvidia.com/gpu, the simulated scheduler makes the pod's claim (annotated,
    owned by the pod, request container-0-request-0), allocates it, names it in the pod's
    extendedResourceClaimStatus, and the pod runs; `quota list` charges the class's key and
    the pod's own limit, once each; the claim goes when the pod ends."""
    api, sim = _dra_node_sim(kube)
    spec = SPEC.format(name="plain", gpus=2, runtime=600).replace("gpu_type: h100\n", "")
    (tmp_path / "plain.yaml").write_text(spec)
    code, out, err = run_gpuctl(capsys, "submit", tmp_path / "plain.yaml", "-o", "yaml")
    assert code == 0, err
    for _ in range(4):
        sim.step()
    (pod,) = [p for p in api.items("/api/v1/pods") if p["metadata"]["name"].startswith("plain-")]
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "resourceClaims" not in pod["spec"] and pod["status"]["phase"] == "Running"
    (claim,) = api.items("/apis/resource.k8s.io/v1/resourceclaims")
    status = pod["status"]["extendedResourceClaimStatus"]
    assert status == {"resourceClaimName": claim["metadata"]["name"], "requestMappings": [
        {"containerName": pod["spec"]["containers"][0]["name"], "resourceName": "nvidia.com/gpu",
         "requestName": "container-0-request-0"}]}  # fmt: skip
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}  # fmt: skip
    assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    assert [r["request"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["container-0-request-0"] * 2  # fmt: skip
    code, out, _ = run_gpuctl(capsys, "nodes", "-o", "json")
    (a100,) = json.loads(out)["nodes"][0]["accelerators"]
    assert (a100["source"], a100["allocated"], a100["free"]) == ("dra", 2, 6)
    code, out, _ = run_gpuctl(capsys, "quota", "list", "-o", "json")
    used = {(q["resource"], q["source"]): q["used"] for q in json.loads(out)["quotas"]}
    assert used == {("gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "claims"): 2, ("nvidia.com/gpu", "pods"): 2}  # fmt: skip
    api.delete("/apis/batch/v1/namespaces/default/jobs/plain")
    for _ in range(3):
        sim.step()
    assert api.items("/apis/resource.k8s.io/v1/resourceclaims") == []
