"""Volumes, secrets, working_dir, node_selector and extra_resources of a job spec: what they
render to (schema-valid), and one clear error, with file, line and field, for what they
refuse."""

import textwrap

import pytest

from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.jobs.core.manifests import render
from gpuctl.jobs.core.spec import parse_job
from tests.k8s_schema import assert_valid

BASE = "apiVersion: gpuctl/v1\nname: train\nimage: nvidia/cuda:12.0-runtime\n"

FULL = BASE + textwrap.dedent("""\
    shm: 16Gi
    env: {EPOCHS: "90"}
    volumes:
      - {name: data, pvc: imagenet, mount: /data, read_only: true}
      - {name: ckpt, pvc: ckpt, mount: /ckpt}
      - {name: scratch, empty_dir: 200Gi, mount: /scratch}
      - {name: cache, empty_dir: 8Gi, memory: true, mount: /cache}
      - {name: cfg, config_map: train-cfg, mount: /etc/train}
    secrets:
      - {secret: hf-token, env: {HF_TOKEN: token}}
      - {secret: wandb, mount: /etc/wandb}
      - {secret: s3.creds, env: {AWS_ACCESS_KEY_ID: id}, mount: /etc/s3}
    working_dir: /workspace
    node_selector: {topology.kubernetes.io/zone: us-east-1a}
    extra_resources: {vpc.amazonaws.com/efa: 32, example.com/fpga: 0}
    """)


def parse(text: str):
    return parse_job(load_yaml(text, "job.yaml"))


def pod_of(text: str) -> dict:
    objs = render(parse(text))
    for obj in objs:
        assert_valid(obj)
    last = objs[-1]
    return last["spec"] if last["kind"] == "Pod" else last["spec"]["template"]["spec"]


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as e:
        parse(text)
    return e.value


def test_every_volume_kind_renders_schema_valid():
    pod = pod_of(FULL)
    (container,) = pod["containers"]
    assert pod["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}},
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}},
        {"name": "scratch", "emptyDir": {"sizeLimit": "200Gi"}},
        {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        {"name": "cfg", "configMap": {"name": "train-cfg"}},
        {"name": "secret-wandb", "secret": {"secretName": "wandb"}},
        {"name": "secret-s3-creds", "secret": {"secretName": "s3.creds"}},
    ]
    assert container["volumeMounts"] == [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "data", "mountPath": "/data", "readOnly": True},
        {"name": "ckpt", "mountPath": "/ckpt"},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "cache", "mountPath": "/cache"},
        {"name": "cfg", "mountPath": "/etc/train"},
        {"name": "secret-wandb", "mountPath": "/etc/wandb", "readOnly": True},
        {"name": "secret-s3-creds", "mountPath": "/etc/s3", "readOnly": True},
    ]
    assert container["env"] == [
        {"name": "EPOCHS", "value": "90"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
        {
            "name": "AWS_ACCESS_KEY_ID",
            "valueFrom": {"secretKeyRef": {"name": "s3.creds", "key": "id"}},
        },
    ]
    assert container["workingDir"] == "/workspace"
    assert pod["nodeSelector"] == {"topology.kubernetes.io/zone": "us-east-1a"}
    # a count of 0 asks for none
    assert container["resources"]["limits"] == {
        "nvidia.com/gpu": "1",
        "vpc.amazonaws.com/efa": "32",
    }


def test_secret_volume_names_never_clash():
    pod = pod_of(
        BASE
        + "volumes: [{name: secret-a, empty_dir: 1Gi, mount: /x}]\n"
        + "secrets: [{secret: a, mount: /a}, {secret: "
        + "b" * 60
        + ", mount: /b}]\n"
    )
    names = [v["name"] for v in pod["volumes"]]
    assert names == ["secret-a", "secret-0", "secret-1"]


def test_multinode_secret_env_and_huge_pages_are_schema_valid():
    pod = pod_of(
        BASE
        + "nodes: 2\ngpus: 8\nmemory: 64Gi\nsecrets: [{secret: tok, env: {TOKEN: t}}]\n"
        + "extra_resources: {hugepages-2Mi: 5120Mi}\n"
    )
    names = [e["name"] for e in pod["containers"][0]["env"]]
    assert "MASTER_ADDR" in names and names[-1] == "TOKEN"  # the Secret's after gpuctl's
    assert pod["containers"][0]["resources"]["limits"]["hugepages-2Mi"] == "5120Mi"


def test_a_pod_with_volumes_is_schema_valid():
    pod = pod_of(BASE + "kind: Pod\nvolumes: [{name: d, pvc: d, mount: /d, read_only: true}]\n")
    assert pod["volumes"] == [
        {"name": "d", "persistentVolumeClaim": {"claimName": "d", "readOnly": True}}
    ]


V = "volumes:\n"


@pytest.mark.parametrize(
    "extra, line, field, needle",
    [
        # mounts
        (V + "  - {name: a, pvc: a, mount: data}\n", 5, "volumes[0].mount", "not an absolute path"),
        (V + "  - {name: a, pvc: a, mount: /}\n", 5, "volumes[0].mount", "cannot be /"),
        (V + "  - {name: a, pvc: a, mount: /data/../etc}\n", 5, "volumes[0].mount", "plain path"),
        (V + "  - {name: a, pvc: a, mount: /data/}\n", 5, "volumes[0].mount", "plain path"),
        (V + "  - {name: a, pvc: a, mount: //data}\n", 5, "volumes[0].mount", "plain path"),
        (V + "  - {name: a, pvc: a, mount: /data/./x}\n", 5, "volumes[0].mount", "plain path"),
        (V + '  - {name: a, pvc: a, mount: "/da\\tta"}\n', 5, "volumes[0].mount", "control"),
        (V + "  - {name: a, pvc: a, mount: /dev/shm}\n", 5, "volumes[0].mount", "shm:"),
        (V + "  - {name: a, pvc: a, mount: /dev/shm/x}\n", 5, "volumes[0].mount", "shm:"),
        (V + "  - {name: a, pvc: a, mount: /dev}\n", 5, "volumes[0].mount", "hide"),
        (V + "  - {name: a, pvc: a, mount: /proc/x}\n", 5, "volumes[0].mount", "hide"),
        (V + "  - {name: a, pvc: a, mount: /sys}\n", 5, "volumes[0].mount", "hide"),
        (
            V + "  - {name: a, pvc: a, mount: /data}\n  - {name: b, pvc: b, mount: /data}\n",
            6,
            "volumes[1].mount",
            "/data is also mounted by volumes[0].mount (job.yaml:5)",
        ),
        (
            V + "  - {name: a, pvc: a, mount: /data/sub}\n  - {name: b, pvc: b, mount: /data}\n",
            5,
            "volumes[0].mount",
            "/data/sub is under /data, mounted by volumes[1].mount (job.yaml:6)",
        ),
        (
            V + "  - {name: a, pvc: a, mount: /etc/x}\nsecrets: [{secret: s, mount: /etc/x/y}]\n",
            6,
            "secrets[0].mount",
            "is under /etc/x",
        ),
        (
            V + "  - {name: a, pvc: a, mount: /etc/x}\nsecrets: [{secret: s, mount: /etc/x}]\n",
            6,
            "secrets[0].mount",
            "also mounted by volumes[0].mount",
        ),
        # names and sources
        (
            V + "  - {name: a, pvc: a, mount: /a}\n  - {name: a, pvc: b, mount: /b}\n",
            6,
            "volumes[1].name",
            "also the name of volumes[0].name",
        ),
        (V + "  - {name: Data, pvc: a, mount: /a}\n", 5, "volumes[0].name", "valid name"),
        (V + "  - {name: dshm, pvc: a, mount: /a}\n", 5, "volumes[0].name", "shm:"),
        (V + "  - {pvc: a, mount: /a}\n", 5, "volumes[0]", "missing required field 'name'"),
        (V + "  - {name: a, mount: /a}\n", 5, "volumes[0]", "exactly one of"),
        (
            V + "  - {name: a, pvc: a, config_map: b, mount: /a}\n",
            5,
            "volumes[0].config_map",
            "exactly one",
        ),
        (V + "  - {name: a, pvc: a}\n", 5, "volumes[0]", "missing required field 'mount'"),
        (
            V + "  - {name: a, pvc: A_B, mount: /a}\n",
            5,
            "volumes[0].pvc",
            "PersistentVolumeClaim name",
        ),
        (V + "  - {name: a, empty_dir: lots, mount: /a}\n", 5, "volumes[0].empty_dir", "quantity"),
        (V + "  - {name: a, empty_dir: 0, mount: /a}\n", 5, "volumes[0].empty_dir", "size limit"),
        (
            V + "  - {name: a, pvc: a, memory: true, mount: /a}\n",
            5,
            "volumes[0].memory",
            "empty_dir only",
        ),
        (
            V + "  - {name: a, empty_dir: 1Gi, read_only: true, mount: /a}\n",
            5,
            "volumes[0].read_only",
            "stay empty",
        ),
        (
            V + "  - {name: a, pvc: a, mount: /a, readOnly: true}\n",
            5,
            "volumes[0].readOnly",
            "did you mean 'read_only'",
        ),
        (V + "  - x\n", 5, "volumes[0]", "mapping"),
        ("volumes: {name: a}\n", 4, "volumes", "list"),
        # a directory of the node, however it is spelled
        (
            V + "  - {name: a, hostPath: {path: /}, mount: /a}\n",
            5,
            "volumes[0].hostPath",
            "hostPath",
        ),
        (V + "  - {name: a, host_path: /etc, mount: /a}\n", 5, "volumes[0].host_path", "hostPath"),
        (V + "  - {name: a, HostPath: /etc, mount: /a}\n", 5, "volumes[0].HostPath", "hostPath"),
        ("hostPath: /etc\n", 4, "hostPath", "unknown field"),
        # secrets
        ("secrets: [{secret: s}]\n", 4, "secrets[0]", "give env"),
        ("secrets: [{secret: S_1, mount: /s}]\n", 4, "secrets[0].secret", "Secret name"),
        (
            "secrets: [{secret: s, mount: /s, read_only: false}]\n",
            4,
            "secrets[0].read_only",
            "unknown field",
        ),
        ("secrets: [{secret: s, env: {1X: k}}]\n", 4, "secrets[0].env.1X", "environment variable"),
        ("secrets: [{secret: s, env: {X: 'a/b'}}]\n", 4, "secrets[0].env.X", "key of a Secret"),
        (
            "env: {X: '1'}\nsecrets: [{secret: s, env: {X: k}}]\n",
            5,
            "secrets[0].env.X",
            "also set in env",
        ),
        (
            "secrets: [{secret: s, env: {X: k}}, {secret: t, env: {X: k}}]\n",
            4,
            "secrets[1].env.X",
            "also set by secrets[0].secret",
        ),
        (
            "secrets: [{secret: s, env: {X: k}}, {secret: s, mount: /s}]\n",
            4,
            "secrets[1].secret",
            "also used by",
        ),
        (
            "nodes: 2\nsecrets: [{secret: s, env: {NODE_RANK: k}}]\n",
            5,
            "secrets[0].env.NODE_RANK",
            "set by gpuctl",
        ),
        # working_dir, node_selector, extra_resources
        ("working_dir: workspace\n", 4, "working_dir", "absolute"),
        ("working_dir: /a/../b\n", 4, "working_dir", "plain path"),
        ("node_selector: {'bad key!': x}\n", 4, "node_selector.bad key!", "label key"),
        ("node_selector: {zone: 'a b'}\n", 4, "node_selector.zone", "label value"),
        ("node_selector: [a]\n", 4, "node_selector", "mapping"),
        ("extra_resources: {efa: 1}\n", 4, "extra_resources.efa", "extended resource name"),
        ("extra_resources: {cpu: 1}\n", 4, "extra_resources.cpu", "extended resource name"),
        (
            "extra_resources: {kubernetes.io/foo: 1}\n",
            4,
            "extra_resources.kubernetes.io/foo",
            "Kubernetes resource",
        ),
        (
            "extra_resources: {nvidia.com/gpu: 1}\n",
            4,
            "extra_resources.nvidia.com/gpu",
            "gpus, mig or shared",
        ),
        (
            "extra_resources: {nvidia.com/mig-1g.10gb: 1}\n",
            4,
            "extra_resources.nvidia.com/mig-1g.10gb",
            "gpus, mig",
        ),
        (
            "extra_resources: {vpc.amazonaws.com/efa: 1.5}\n",
            4,
            "extra_resources.vpc.amazonaws.com/efa",
            "whole number",
        ),
        (
            "extra_resources: {vpc.amazonaws.com/efa: -1}\n",
            4,
            "extra_resources.vpc.amazonaws.com/efa",
            "at least 0",
        ),
        (
            "extra_resources: {hugepages-2Mi: 1Gi}\n",
            4,
            "extra_resources.hugepages-2Mi",
            "cpu or memory",
        ),
        (
            "memory: 1Gi\nextra_resources: {hugepages-big: 1Gi}\n",
            5,
            "extra_resources.hugepages-big",
            "huge page size",
        ),
        (
            "memory: 1Gi\nextra_resources: {hugepages-2Mi: lots}\n",
            5,
            "extra_resources.hugepages-2Mi",
            "quantity",
        ),
    ],
)
def test_bad_volumes_and_secrets_name_file_line_and_field(extra, line, field, needle):
    e = error_of(BASE + extra)
    assert (e.file, e.line, e.field) == ("job.yaml", line, field), str(e)
    assert needle in str(e)
    assert "\n" not in e.message


def test_the_cluster_check_knows_where_each_reference_was_written():
    spec = parse(FULL)
    assert spec.volumes[0].where == "job.yaml:7: volumes[0].pvc"
    assert spec.secrets[1].where == "job.yaml:14: secrets[1].secret"
