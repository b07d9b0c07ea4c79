"""`gpuctl sched render` as a user runs it, offline and against the API emulator."""

import json

import pytest
import yaml


def test_render_prints_the_configuration(cli):
    r = cli("sched", "render")
    assert r.code == 0, r
    config = yaml.safe_load(r.out)
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["profiles"][0]["schedulerName"] == "gpuctl-binpack"
    r = cli(
        "sched", "render", "--strategy", "spread", "--gpu-weight", "3", "--name", "s", "-o", "json"
    )
    assert r.code == 0, r
    fit = json.loads(r.out)["profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"]
    assert fit["type"] == "LeastAllocated" and fit["resources"][2]["weight"] == 3


def test_help_states_the_default_gpu_weight(cli):
    from gpuctl.gpus.scoring import DEFAULT_GPU_WEIGHT

    r = cli("sched", "render", "--help")
    assert r.code == 0 and f"default {DEFAULT_GPU_WEIGHT}:" in " ".join(r.out.split())


def test_deploy_offline_with_the_version_given(cli):
    r = cli("sched", "render", "--deploy", "--kube-version", "v1.31.4-eks-0a1b2c3", "-n", "sched")
    assert r.code == 0, r
    docs = list(yaml.safe_load_all(r.out))
    dep = next(d for d in docs if d["kind"] == "Deployment")
    assert dep["metadata"]["namespace"] == "sched"
    image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.k8s.io/kube-scheduler:v1.31.4"
    r = cli("sched", "render", "--deploy", "--kube-version", "v1.31.4", "-o", "json")
    assert json.loads(r.out)["kind"] == "List" and len(json.loads(r.out)["items"]) == 8


def test_deploy_reads_the_clusters_version(kube, cli):
    r = cli("sched", "render", "--deploy")
    assert r.code == 0, r
    dep = next(d for d in yaml.safe_load_all(r.out) if d["kind"] == "Deployment")
    # the emulator reports v1.34.0-kmock
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":v1.34.0")
    # the version and the nodes (their taints), and nothing else
    assert [path for _, path, _ in kube.requests()] == ["/version/", "/api/v1/nodes"]


def test_deploy_without_a_cluster_or_a_version_says_how_to_go_offline(cli):
    r = cli("sched", "render", "--deploy")
    assert r.code == 1 and r.out == ""
    assert "no usable Kubernetes configuration" in r.err and "--kube-version" in r.err


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--gpu-weight", "0"], "--gpu-weight: 0 is outside 1..100"),
        (["--gpu-weight", "x"], "--gpu-weight"),
        (["--strategy", "pack"], "--strategy"),
        (["--name", "Pack"], "--name: 'Pack'"),
        (["--name", "default-scheduler"], "the default scheduler's name"),
        (["--name", "kube-scheduler", "--deploy", "--kube-version", "v1.30.0"], "its lease's"),
        (["--shape", "0:0,100:20"], "--shape"),
        (["-o", "table"], "--output"),
        (["-n", "Bad NS", "--deploy", "--kube-version", "v1.30.0"], "--namespace"),
        (["--deploy", "--kube-version", "v1.24.3"], "predates"),
        (
            ["--deploy", "--kube-version", "1.30"],
            "--kube-version: '1.30' is not a Kubernetes version",
        ),
    ],
)
def test_bad_options_exit_2_and_print_nothing(cli, args, needle):
    r = cli("sched", "render", *args)
    assert r.code == 2 and r.out == "" and needle in r.err, r


def test_the_docs_show_the_real_default_profile(cli):
    import os

    from tests import ROOT

    text = open(os.path.join(ROOT, "docs", "utilization.md")).read()
    shown = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert cli("sched", "render").out == shown


def test_offline_render_says_it_assumes_tainted_gpu_nodes(cli):
    r = cli("sched", "render")
    assert r.code == 0, r
    assert "no cluster to check: this assumes every GPU node carries a NoSchedule taint" in r.err
    assert "86.0 %" in " ".join(r.err.split())


def test_render_warns_when_gpu_nodes_let_pods_without_gpus_in(cli, kube, kube_api):
    from tests.gpu_cluster import node, seed

    tainted = node("gpu-a")
    tainted["spec"] = {
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    }
    soft = node("gpu-b")
    soft["spec"] = {"taints": [{"key": "x", "effect": "PreferNoSchedule"}]}
    seed(kube_api, tainted, soft, node("gpu-c"), node("cpu-1", gpus=0, gfd=False))
    r = cli("sched", "render", "--extender")
    assert r.code == 0, r
    err = " ".join(r.err.split())
    assert "warning: 2 of 3 GPU nodes carry no NoSchedule taint (gpu-b, gpu-c)" in err
    assert "the GPU nodes packing keeps free" in err
    assert yaml.safe_load(r.out)["profiles"][0]["schedulerName"] == "gpuctl-fgd"


def test_no_warning_when_every_gpu_node_is_tainted(cli, kube, kube_api):
    from tests.gpu_cluster import node, seed

    n = node("gpu-a")
    n["spec"] = {"taints": [{"key": "nvidia.com/gpu", "effect": "NoExecute"}]}
    seed(kube_api, n, node("cpu-1", gpus=0, gfd=False))
    r = cli("sched", "render")
    assert r.code == 0 and "warning" not in r.err, r


def test_extender_deploy_needs_an_image_with_gpuctl(cli):
    r = cli("sched", "render", "--extender", "--deploy", "--kube-version", "v1.31.4")
    assert r.code == 2 and "--extender-image" in r.err and r.out == ""
    r = cli(
        "sched", "render", "--extender", "--deploy", "--kube-version", "v1.31.4",
        "--extender-image", "registry.example/gpuctl:0.9",
    )  # fmt: skip
    assert r.code == 0, r
    dep = next(d for d in yaml.safe_load_all(r.out) if d["kind"] == "Deployment")
    containers = dep["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in containers] == [
        "registry.k8s.io/kube-scheduler:v1.31.4",
        "registry.example/gpuctl:0.9",
    ]


def test_extender_refuses_a_bad_port(cli):
    r = cli("sched", "extender", "--port", "70000")
    assert r.code == 2 and "--port must be 1 to 65535" in r.err
