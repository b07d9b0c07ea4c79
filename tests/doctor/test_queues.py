"""`gpuctl doctor`'s Kueue and JobSet checks: each from plain objects, and the command on
the API emulator serving their CRDs, with Kueue's own default manager configuration
(gpuctl/sim/crds/controller_manager_config.yaml, kubernetes-sigs/kueue v0.19.2)."""

import json

import pytest
import yaml

from gpuctl.doctor.core import checks as doctor
from gpuctl.doctor.core import queue_checks as queues
from tests.crd_schema import CRD_DIR
from tests.doctor.test_doctor import DCGM, PLUGIN
from tests.gpu_cluster import node, seed

UPSTREAM_CONFIG = (CRD_DIR / "controller_manager_config.yaml").read_text()


def deployment(name, namespace, image, args=(), config_map=None):
    pod = {"containers": [{"name": "manager", "image": image, "args": list(args)}]}
    if config_map:
        pod["volumes"] = [{"name": "manager-config", "configMap": {"name": config_map}}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        },
    }


KUEUE = deployment(
    "kueue-controller-manager",
    "kueue-system",
    "registry.k8s.io/kueue/kueue:v0.19.2",
    ["--config=/controller_manager_config.yaml", "--zap-log-level=2"],
    "kueue-manager-config",
)
JOBSET = deployment(
    "jobset-controller-manager", "jobset-system", "registry.k8s.io/jobset/jobset:v0.12.0"
)


def config(text):
    return yaml.safe_load(text)


def test_versions_come_from_the_controllers_images():
    assert queues.controller([JOBSET, KUEUE], queues.KUEUE_IMAGE) is KUEUE
    assert queues.image_version(KUEUE, queues.KUEUE_IMAGE) == "v0.19.2"
    mirrored = deployment("kueue", "ops", "harbor.example.com/k8s/kueue/kueue:v0.16.1@sha256:ab")
    assert queues.image_version(mirrored, queues.KUEUE_IMAGE) == "v0.16.1"
    assert (
        queues.controller([deployment("x", "y", "example.com/notkueue:v1")], "kueue/kueue") is None
    )
    c = queues.check_kueue(["v1beta1", "v1beta2"], KUEUE)
    assert (c.status, c.detail) == (
        doctor.PASS,
        "Kueue v0.19.2 in kueue-system/kueue-controller-manager, API kueue.x-k8s.io/v1beta2",
    )
    assert queues.check_kueue(["v1beta1"], KUEUE).detail.endswith("API kueue.x-k8s.io/v1beta1")
    assert queues.check_kueue([], None).status == doctor.WARN
    assert queues.check_kueue(["v1beta2"], None).status == doctor.WARN  # CRDs, no controller
    assert queues.check_kueue(["v1alpha1"], KUEUE).status == doctor.FAIL
    c = queues.check_jobset(["v1alpha2"], JOBSET)
    assert c.status == doctor.PASS and "JobSet v0.12.0" in c.detail
    assert "Indexed Jobs" in queues.check_jobset([], None).detail


@pytest.mark.parametrize(
    "text, version, args, on, words",
    [
        # Kueue's own default file leaves waitForPodsReady commented out
        (UPSTREAM_CONFIG, "v0.19.2", (), True, "which Kueue v0.19.2 takes as on"),
        (UPSTREAM_CONFIG, "v0.18.1", (), False, "which Kueue v0.18.1 takes as off"),
        (UPSTREAM_CONFIG, None, (), None, "Kueue's version is unknown"),
        (
            UPSTREAM_CONFIG + "waitForPodsReady:\n  timeout: 10m\n  blockAdmission: true\n",
            "v0.17.0",
            (),
            True,
            "waitForPodsReady is set; timeout 10m, blockAdmission True",
        ),
        (
            UPSTREAM_CONFIG,
            "v0.19.2",
            ("--feature-gates=DisableWaitForPodsReady=true",),
            False,
            "feature gate",
        ),
        (
            UPSTREAM_CONFIG + "featureGates:\n  DisableWaitForPodsReady: true\n",
            "v0.19.2",
            (),
            False,
            "feature gate",
        ),
        (
            "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
            "waitForPodsReady:\n  enable: false\n  timeout: 5m\n",
            "v0.19.2",
            (),
            False,
            "enable is not true",
        ),
        (
            "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
            "waitForPodsReady:\n  enable: true\n",
            "v0.14.0",
            (),
            True,
            "enable is true",
        ),
    ],
)
def test_wait_for_pods_ready_as_each_kueue_reads_its_config(text, version, args, on, words):
    manager = deployment(
        "kueue-controller-manager", "kueue-system", f"r/kueue/kueue:{version}", args
    )
    c = queues.check_wait_for_pods_ready(
        config(text), "kueue-system/kueue-manager-config", version, manager
    )
    assert c.status == {True: doctor.PASS, False: doctor.WARN, None: doctor.WARN}[on]
    assert words in c.detail
    if on is False:
        assert "keeps its quota and GPUs" in c.detail and "waitForPodsReady" in c.fix


def cq(*covered):
    return {"spec": {"resourceGroups": [{"coveredResources": list(covered), "flavors": []}]}}


def test_gpu_resources_covered_by_some_cluster_queue():
    nodes = [
        node("h1"),
        node("a1", 0, alloc={"nvidia.com/mig-1g.5gb": "7"}),
        node("cpu", 0, gfd=False),
    ]
    c = queues.check_gpu_queues(nodes, [cq("cpu", "memory", "nvidia.com/gpu")])
    assert c.status == doctor.WARN and "no ClusterQueue covers nvidia.com/mig-1g.5gb" in c.detail
    c = queues.check_gpu_queues(nodes, [cq("nvidia.com/gpu"), cq("nvidia.com/mig-1g.5gb")])
    assert c.status == doctor.PASS and c.detail == (
        "nvidia.com/gpu, nvidia.com/mig-1g.5gb covered by 2 ClusterQueue(s)"
    )
    assert "no ClusterQueue" in queues.check_gpu_queues(nodes, []).detail


def checks_of(cli):
    r = cli("doctor", "-o", "json")
    return r, {c["name"]: c for c in json.loads(r.out)["checks"]}


def test_doctor_on_a_cluster_with_kueue_and_jobset(cli, kube, kube_api):
    kube.install_crds("ClusterQueue", "LocalQueue", "ResourceFlavor", "Workload", "JobSet")
    seed(
        kube_api,
        node("gpu-1"),
        node("gpu-2", 0, alloc={"nvidia.com/mig-1g.10gb": "7"}),
        PLUGIN,
        DCGM,
        KUEUE,
        JOBSET,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": UPSTREAM_CONFIG},
        },
    )
    assert cli("quota", "set", "team-a", "--gpus", "8", "--cpu", "8", "--memory", "64Gi").code == 0
    r, checks = checks_of(cli)
    assert r.code == 0, r
    assert {
        k: checks[k]["status"] for k in ("kueue", "jobset", "kueue-all-or-nothing", "gpu-queues")
    } == {
        "kueue": "pass",
        "jobset": "pass",
        "kueue-all-or-nothing": "pass",
        "gpu-queues": "warn",
    }
    assert "no ClusterQueue covers nvidia.com/mig-1g.10gb" in checks["gpu-queues"]["detail"]
    assert (
        cli(
            "quota",
            "set",
            "team-b",
            "--gpus",
            "0",
            "--mig",
            "1g.10gb=7",
            "--cpu",
            "8",
            "--memory",
            "64Gi",
        ).code
        == 0
    )
    assert checks_of(cli)[1]["gpu-queues"]["status"] == "pass"


def test_doctor_reads_the_config_map_the_manager_mounts(cli, kube, kube_api):
    kube.install_crds("ClusterQueue")
    seed(
        kube_api,
        node("gpu-1"),
        PLUGIN,
        DCGM,
        deployment(
            "kueue", "queues", "registry.k8s.io/kueue/kueue:v0.18.0", config_map="kueue-cfg"
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-cfg", "namespace": "queues"},
            "data": {"controller_manager_config.yaml": UPSTREAM_CONFIG},
        },
    )
    r, checks = checks_of(cli)
    c = checks["kueue-all-or-nothing"]
    assert c["status"] == "warn" and "which Kueue v0.18.0 takes as off" in c["detail"]
    assert "ConfigMap queues/kueue-cfg" in c["fix"]
