"""`gpuctl sched render` as a user runs it, offline and against the API emulator."""

import http.client
import json
import signal
import socket
import subprocess
import sys
import time

import pytest
import yaml

from tests import ROOT


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


def test_extender_deploy_runs_an_image_with_gpuctl(cli):
    from gpuctl.k8s import images

    r = cli("sched", "render", "--extender", "--deploy", "--kube-version", "v1.31.4")
    assert r.code == 0, r  # the image `make image` builds (tests/test_image.py)
    dep = next(d for d in yaml.safe_load_all(r.out) if d["kind"] == "Deployment")
    assert dep["spec"]["template"]["spec"]["containers"][1]["image"] == images.DEFAULT
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


@pytest.mark.parametrize(
    "image, needle",
    [
        ("", "--extender-image: the image with gpuctl in it"),
        ("registry.example/gpuctl 0.9", "'registry.example/gpuctl 0.9' is not an image reference"),
        ("Registry/GPUctl:0.9", "is not an image reference"),
        ("gpuctl:0.9:1", "is not an image reference"),
    ],
)
def test_the_extender_image_is_checked_before_the_cluster_is_read(kube, cli, image, needle):
    args = ["sched", "render", "--extender", "--deploy"]
    r = cli(*args, "--extender-image", image)
    assert r.code == 2 and needle in r.err and r.out == "", r
    assert kube.requests() == []


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--port", "70000"], "--port must be 1 to 65535, got 70000"),
        (["--port", "0"], "--port must be 1 to 65535, got 0"),
        (["--port", "-1"], "--port must be 1 to 65535, got -1"),
        (["--port", "http"], "--port"),
        (["--host", ""], "--host '': not an IP address or a host name"),
        (["--host", "not a host!"], "--host 'not a host!': not an IP address or a host name"),
        (["--host", "[::1]"], "--host '[::1]': not an IP address or a host name"),
        (["--host", "a" * 64 + ".example"], "not an IP address or a host name"),
        (["--gpu-label-key", "not a key!"], "gpu_label_key 'not a key!'"),
    ],
)
def test_extender_options_are_checked_before_anything_is_bound_or_read(kube, cli, args, needle):
    r = cli("sched", "extender", *args)
    assert r.code == 2 and needle in r.err and r.out == "", r
    assert kube.requests() == []


def test_an_address_the_extender_cannot_listen_on_is_one_clear_line(kube, cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = cli("sched", "extender", "--port", str(port))
    assert r.code == 1 and r.out == "", r
    assert r.err.splitlines() == [
        f"gpuctl: error: cannot listen on 127.0.0.1:{port}: the port is in use",
        "  hint: stop what listens there, or give another --port",
    ]
    r = cli("sched", "extender", "--host", "192.0.2.1")  # TEST-NET-1: no machine's own
    assert r.code == 2 and "--host '192.0.2.1' is not an address of this machine" in r.err, r
    assert kube.requests() == []  # it stops before it reads the cluster


@pytest.mark.integration
def test_the_extender_serves_kube_scheduler_until_interrupted(kube, kube_api):
    """The command as it runs beside kube-scheduler: it says where it listens, syncs with
    the cluster, answers a Go-encoded request, refuses a bad one in one line, and stops on
    Ctrl-C."""
    from tests.gpu_cluster import seed
    from tests.sched.kube_scheduler_wire import (
        api_node,
        extender_args,
        filter_read,
        go_json,
        gpu_pod,
    )

    nodes = [api_node("gfd-h100"), api_node("gfd-t4")]
    seed(kube_api, *({"apiVersion": "v1", "kind": "Node", **json.loads(go_json(n))} for n in nodes))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuctl", "sched", "extender", "--port", str(port)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        # as a terminal's Ctrl-C reaches it, even when this suite runs with SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert _healthy(port, proc, seconds=60), "the extender never became ready"
        names = ["xe9680-h100", "g4dn-t4"]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/filter", body=extender_args(gpu_pod("train-0", 2), nodes, True))
        response = conn.getresponse()
        assert filter_read(response.status, response.read(), True, names)[0] == ["xe9680-h100"]
        conn.request("POST", "/filter", body=b'{"Pod": {}, "NodeNames": "xe9680-h100"}')
        assert conn.getresponse().status == 400
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.splitlines() == [  # and nothing else: no traceback
        f"serving on http://127.0.0.1:{port}",
        "cluster view synced: 2 nodes, 0 bound pods",
        "POST /filter from 127.0.0.1: 400 NodeNames: expected a list, got a string",
        "gpuctl: interrupted",
    ]


def _healthy(port, proc, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            response.read()
            conn.close()
            if response.status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False
