"""Rendering rules, and every rendered manifest against the Kubernetes schema (strict)."""

import glob
import os

import pytest

from gpuctl.common.specfile import load_yaml, load_yaml_file
from gpuctl.jobs.core.manifests import render
from gpuctl.jobs.core.spec import parse_job
from gpuctl.jobs.sources import load_job
from gpuctl.k8s.placement import terms_match
from tests import ROOT
from tests.crd_schema import assert_valid_cr
from tests.k8s_schema import assert_valid

EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.yaml")))
JOB_EXAMPLES = [
    p for p in EXAMPLES if "gpuctl/v1" in open(p).read() and "kind: Cluster" not in open(p).read()
]
BASE = "apiVersion: gpuctl/v1\nname: train\nimage: nvidia/cuda:12.0-runtime\n"

TEST_SPECS = [
    BASE,
    BASE + "kind: Pod\ngpus: 4\nshm: 1Gi\ndeadline: 1h\n",
    BASE + "mig: 3g.40gb\ngpu_type: h100\ncpu: 500m\nmemory: 8Gi\n",
    BASE + "gpus: 1\nshared: true\npriority: low\nservice_account: trainer\n"
    "image_pull_secrets: [regcred]\nscheduler: gpuctl-binpack\n",
    BASE + "gpus: 0\ncommand: [sleep, '1']\n",
    BASE + "nodes: 4\ngpus: 8\nmaster_port: 23456\nttl_after_finished: 10m\nretries: 3\n"
    "tolerations: [{key: spot, operator: Exists, effect: NoExecute, tolerationSeconds: 60}]\n",
    BASE + "env: {CUDA: 12.10, FLAG: yes, T: 1:30}\nargs: [--gpus, 010]\nlabels: {version: 12.10}\n"
    "cpu: 010\nmemory: 0.50\n",
]


def rendered(text: str, key: str = "gpu-type"):
    return render(parse_job(load_yaml(text, "t.yaml")), key)


def pod_spec(objs):
    last = objs[-1]
    return last["spec"] if last["kind"] == "Pod" else last["spec"]["template"]["spec"]


@pytest.mark.parametrize("path", JOB_EXAMPLES, ids=os.path.basename)
def test_every_example_is_schema_valid(path):
    objs = render(load_job(path)[0])  # with the templates it names
    assert objs
    for obj in objs:
        # a service's ScaledObject: KEDA's CRD; a ComputeDomain: NVIDIA's DRA driver's
        if obj["apiVersion"].startswith(("keda.sh/", "resource.nvidia.com/")):
            assert_valid_cr(obj)
        else:
            assert_valid(obj)


@pytest.mark.parametrize("text", TEST_SPECS)
def test_every_test_spec_is_schema_valid(text):
    for obj in rendered(text):
        assert_valid(obj)


def test_examples_cover_the_three_cases():
    names = {os.path.basename(p) for p in JOB_EXAMPLES}
    assert {"seed-pod.yaml", "mig-job.yaml", "multinode-train.yaml"} <= names


def test_seed_pod_matches_the_hand_written_one():
    (pod,) = render(parse_job(load_yaml_file(os.path.join(ROOT, "examples", "seed-pod.yaml"))))
    assert pod["kind"] == "Pod" and pod["apiVersion"] == "v1"
    # no cluster read: gpu_type a100 selects A100 nodes under every scheme (both sizes)
    terms = [
        t["matchExpressions"]
        for t in pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
    ]
    assert terms_match({"gpu-type": "a100"}, terms)
    assert terms_match({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}, terms)
    assert terms_match({"nvidia.com/gpu.product": "A100-SXM4-40GB"}, terms)
    assert terms_match({"node.kubernetes.io/instance-type": "p4d.24xlarge"}, terms)
    assert not terms_match({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, terms)
    assert not terms_match({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}, terms)
    assert not terms_match(
        {"gpu-type": "a100", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED"}, terms
    )
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert pod["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert pod["spec"]["restartPolicy"] == "Never"


def test_gpu_label_key_is_configurable():
    spec = pod_spec(rendered(BASE + "gpu_type: NVIDIA-H100-80GB-HBM3\n", "nvidia.com/gpu.product"))
    expr = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"][0]
    assert expr == {
        "key": "nvidia.com/gpu.product",
        "operator": "In",
        "values": ["NVIDIA-H100-80GB-HBM3"],
    }


def test_mig_resource_name_and_me_suffix():
    limits = pod_spec(rendered(BASE + "mig: 1g.10gb+me\n"))["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/mig-1g.10gb.me": "1"}


def test_shm_is_memory_backed_emptydir_at_dev_shm():
    spec = pod_spec(rendered(BASE + "shm: 16Gi\n"))
    assert spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    ]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]


def test_single_node_job_fields():
    (job,) = rendered(BASE + "ttl_after_finished: 1h\ndeadline: 2h\nretries: 2\n")
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["spec"]["backoffLimit"] == 2
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600
    assert job["spec"]["activeDeadlineSeconds"] == 7200
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert "completionMode" not in job["spec"]


def test_scheduler_becomes_every_pods_scheduler_name():
    assert "schedulerName" not in pod_spec(rendered(BASE))  # the default scheduler
    for text in (BASE, BASE + "kind: Pod\n", BASE + "nodes: 2\n"):
        spec = pod_spec(rendered(text + "scheduler: gpuctl-binpack\n"))
        assert spec["schedulerName"] == "gpuctl-binpack"


def test_no_gpu_means_no_gpu_toleration_or_limit():
    spec = pod_spec(rendered(BASE + "gpus: 0\n"))
    assert "tolerations" not in spec and "resources" not in spec["containers"][0]


def test_user_tolerations_are_added_to_the_gpu_one():
    spec = pod_spec(rendered(BASE + "tolerations: [{key: spot, operator: Exists}]\n"))
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists"},
    ]


def test_multinode_indexed_job_with_headless_service_and_torchrun_env():
    svc, job = rendered(BASE + "nodes: 3\ngpus: 8\nnamespace: ml\n")
    assert svc["kind"] == "Service" and svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"gpuctl.io/job": "train"}
    assert svc["spec"]["publishNotReadyAddresses"] is True  # workers resolve before Ready
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == svc["metadata"]["name"]
    # the Service selects exactly the job's pods
    assert svc["spec"]["selector"].items() <= job["spec"]["template"]["metadata"]["labels"].items()
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    # what torchrun reads by itself (PET_<option>), as a Kubeflow PyTorchJob sets it
    assert env["PET_NNODES"]["value"] == "3"
    assert env["PET_NPROC_PER_NODE"]["value"] == "8"
    assert env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == index
    assert env["PET_MASTER_ADDR"]["value"] == "train-0.train"
    assert env["PET_MASTER_PORT"]["value"] == "29500"
    # for one process per worker calling init_process_group("env://"): one rank per worker
    assert env["MASTER_ADDR"]["value"] == "train-0.train"
    assert env["MASTER_PORT"]["value"] == "29500"
    assert env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == index
    assert env["WORLD_SIZE"]["value"] == "3"
    # gpuctl's own names, for torchrun --nnodes=$(NNODES) ... as in examples/
    assert env["NNODES"]["value"] == "3"
    assert env["NPROC_PER_NODE"]["value"] == "8"
    assert env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == index


def test_every_object_is_labelled():
    for obj in rendered(BASE + "nodes: 2\nlabels: {team: a}\n"):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "gpuctl"
        assert labels["gpuctl.io/job"] == "train" and labels["team"] == "a"


def test_render_cli_yaml_and_json(cli, tmp_path):
    import json

    import yaml

    r = cli("render", os.path.join(ROOT, "examples", "multinode-train.yaml"))
    assert r.code == 0
    docs = list(yaml.safe_load_all(r.out))
    assert [d["kind"] for d in docs] == ["Service", "Job"]
    r = cli("render", os.path.join(ROOT, "examples", "seed-pod.yaml"), "-o", "json")
    assert json.loads(r.out)["items"][0]["kind"] == "Pod"
    (tmp_path / "cfg.yaml").write_text("gpu_label_key: node.kubernetes.io/gpu\n")
    os.environ["GPUCTL_CONFIG"] = str(tmp_path / "cfg.yaml")
    try:
        r = cli("render", os.path.join(ROOT, "examples", "seed-pod.yaml"))
        assert "key: node.kubernetes.io/gpu" in r.out
        r = cli("render", os.path.join(ROOT, "examples", "seed-pod.yaml"), "--gpu-label-key", "x/y")
        assert "key: x/y" in r.out
    finally:
        del os.environ["GPUCTL_CONFIG"]


def test_bad_gpu_label_key_is_refused_naming_where_it_came_from(cli, tmp_path, monkeypatch):
    seed = os.path.join(ROOT, "examples", "seed-pod.yaml")
    r = cli("render", seed, "--gpu-label-key", "gpu type")
    assert r.code == 2 and "'gpu type' (from the command line): not a node label key" in r.err
    assert cli("render", seed, "--gpu-label-key", "").code == 2
    monkeypatch.setenv("GPUCTL_GPU_LABEL_KEY", "a/b/c")
    r = cli("render", seed)
    assert r.code == 2 and "(from GPUCTL_GPU_LABEL_KEY)" in r.err and r.out == ""
    monkeypatch.delenv("GPUCTL_GPU_LABEL_KEY")
    (tmp_path / "cfg.yaml").write_text("prometheus_url: http://p:9090\ngpu_label_key: 'x!'\n")
    monkeypatch.setenv("GPUCTL_CONFIG", str(tmp_path / "cfg.yaml"))
    r = cli("render", seed)
    assert (
        r.code == 2 and f"{tmp_path / 'cfg.yaml'}:2: gpu_label_key: not a node label key" in r.err
    )


def test_render_has_no_table_output(cli):
    r = cli("render", os.path.join(ROOT, "examples", "seed-pod.yaml"), "-o", "table")
    assert r.code == 2 and r.out == ""


def test_render_warns_about_a_gpu_type_no_node_may_have(cli, tmp_path):
    for path in JOB_EXAMPLES:  # gpuctl's own spelling: no warning, only the scheme assumed
        r = cli("render", path)
        assert r.code == 0, path
        assert all(
            " selects nodes under " in w or "no cluster read" in w for w in r.err.splitlines()
        )
    spec = tmp_path / "job.yaml"
    spec.write_text(BASE + "gpu_type: [h100, H100]\n")
    r = cli("render", str(spec), "--gpu-label-key", "gpu-type")
    assert r.code == 0 and "values:\n                - h100\n                - H100\n" in r.out
    assert r.err.splitlines()[:1] == [
        f"warning: {spec}:4: gpu_type[1]: 'H100' differs only in case from 'h100': node "
        "labels are case-sensitive, so nodes labelled gpu-type=h100 do not match"
    ]
    # under GFD's key a GPU name becomes the products GFD writes for it: nothing to warn of
    r = cli("render", str(spec), "--gpu-label-key", "nvidia.com/gpu.product", "-o", "json")
    assert r.code == 0 and r.out.startswith("{") and '"NVIDIA-H100-80GB-HBM3"' in r.out
    assert "warning" not in r.err
