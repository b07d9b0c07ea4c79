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
    # the emulator reports v1.29.0-kmock
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":v1.29.0")
    assert [path for _, path, _ in kube.requests()] == ["/version/"]  # and nothing else


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
