"""Cluster spec validation, including hostile specs: every error names file, line, field."""

from pathlib import Path

import pytest

import tests
from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml
from gpuctl.provision.spec import load_cluster_file, parse_cluster, parse_taint
from gpuctl.provision.tfvars import render_backend, render_tfvars

EXAMPLE = Path(tests.ROOT) / "examples" / "cluster.yaml"

GOOD = """\
apiVersion: gpuctl/v1
kind: Cluster
name: ml-prod
region: us-east-1
vpc_cidr: 10.0.0.0/16
kubernetes_cluster: ml-prod-eks
node_groups:
  - name: a100
    instance_type: p4d.24xlarge
    min_size: 2
    max_size: 10
    gpu_type: a100
"""


def parse(text: str):
    return parse_cluster(load_yaml(text, "c.yaml"))


def error(text: str) -> SpecError:
    with pytest.raises(SpecError) as exc:
        parse(text)
    return exc.value


def test_example_parses_with_defaults():
    spec = load_cluster_file(str(EXAMPLE))
    a100, h100 = spec.node_groups
    assert (a100.min_size, a100.max_size, a100.desired_size) == (2, 10, 2)
    assert [str(t) for t in a100.taints] == ["nvidia.com/gpu=present:NoSchedule"]
    assert h100.capacity_type == "spot" and h100.desired_size == 0  # desired defaults to min
    assert [str(t) for t in h100.taints] == ["nvidia.com/gpu=present:NoSchedule"]
    assert spec.state is None and spec.gpu_label_key == "gpu-type"


def test_tfvars_carry_the_spec():
    spec = parse(GOOD + "    capacity_type: spot\n    taints: [dedicated:NoExecute]\n")
    tfvars = render_tfvars(spec)
    group = tfvars["node_groups"]["a100"]
    assert group["capacity_type"] == "spot"
    assert group["taints"] == [{"key": "dedicated", "value": "", "effect": "NoExecute"}]
    assert tfvars["kubernetes_cluster"] == "ml-prod-eks" and tfvars["vpc_cidr"] == "10.0.0.0/16"
    assert render_backend(spec) is None


def test_s3_state_becomes_a_backend():
    spec = parse(GOOD + "state:\n  s3_bucket: tf-state.example\n  dynamodb_table: tf-locks\n")
    s3 = render_backend(spec)["terraform"]["backend"]["s3"]
    assert s3 == {
        "bucket": "tf-state.example",
        "key": "gpuctl/ml-prod/terraform.tfstate",
        "region": "us-east-1",
        "dynamodb_table": "tf-locks",
        "encrypt": True,
    }


def test_kubernetes_version_must_be_quoted_text():
    assert (
        parse(GOOD.replace("kind:", 'kubernetes_version: "1.30"\nkind:')).kubernetes_version
        == "1.30"
    )
    err = error(GOOD.replace("kind:", "kubernetes_version: 1.30\nkind:"))
    assert err.line == 2 and err.field == "kubernetes_version" and "in quotes" in str(err)


@pytest.mark.parametrize(
    "old, new, line, field, message",
    [
        (
            "apiVersion: gpuctl/v1",
            "apiVersion: gpuctl/v2",
            1,
            "apiVersion",
            "must be one of gpuctl/v1",
        ),
        ("kind: Cluster", "kind: Job", 2, "kind", "must be one of Cluster"),
        ("name: ml-prod", "name: ML_Prod", 3, "name", "not a valid name"),
        ("region: us-east-1", "region: us-east", 4, "region", "not an AWS region name"),
        ("vpc_cidr: 10.0.0.0/16", "vpc_cidr: 10.0.0.1/16", 5, "vpc_cidr", "has host bits set"),
        ("vpc_cidr: 10.0.0.0/16", "vpc_cidr: 10.0.0.0/24", 5, "vpc_cidr", "between /16 and /20"),
        ("vpc_cidr: 10.0.0.0/16", "vpc_cidr: fd00::/56", 5, "vpc_cidr", "IPv4"),
        ("vpc_cidr: 10.0.0.0/16", "vpc_cidr: 300.0.0.0/16", 5, "vpc_cidr", "not a network"),
        (
            "kubernetes_cluster: ml-prod-eks",
            "kubernetes_cluster: 'a b'",
            6,
            "kubernetes_cluster",
            "not an EKS cluster name",
        ),
        (
            "instance_type: p4d.24xlarge",
            'instance_type: "p4d.24xlarge\\"; rm -rf /"',
            9,
            "node_groups[0].instance_type",
            "not an EC2 instance type",
        ),
        (
            "instance_type: p4d.24xlarge",
            "instance_type: ${var.x}",
            9,
            "node_groups[0].instance_type",
            "not an EC2 instance type",
        ),
        ("min_size: 2", "min_size: -1", 10, "node_groups[0].min_size", "at least 0"),
        ("min_size: 2", "min_size: 11", 10, "node_groups[0].min_size", "larger than max_size"),
        ("min_size: 2", "min_size: 2.5", 10, "node_groups[0].min_size", "whole number"),
        ("min_size: 2", "min_size: true", 10, "node_groups[0].min_size", "whole number"),
        (
            "max_size: 10",
            "max_size: 100000000000000000000",
            11,
            "node_groups[0].max_size",
            "at most 1000",
        ),
        ("max_size: 10", "max_size: 0", 11, "node_groups[0].max_size", "at least 1"),
        (
            "gpu_type: a100",
            "gpu_type: 'a100,evil=1'",
            12,
            "node_groups[0].gpu_type",
            "not a valid label value",
        ),
        (
            "gpu_type: a100",
            'gpu_type: "a100\\n- --anonymous-auth=true"',
            12,
            "node_groups[0].gpu_type",
            "not a valid label value",
        ),
        (
            "gpu_type: a100",
            "gpu_typ: a100",
            12,
            "node_groups[0].gpu_typ",
            "did you mean 'gpu_type'",
        ),
    ],
)
def test_bad_field_is_named_with_its_line(old, new, line, field, message):
    err = error(GOOD.replace(old, new))
    assert (err.file, err.line, err.field) == ("c.yaml", line, field)
    assert message in str(err)
    assert str(err).startswith(f"c.yaml:{line}: {field}: ")


@pytest.mark.parametrize(
    "extra, field, message",
    [
        (
            "    desired_size: 11\n",
            "node_groups[0].desired_size",
            "between min_size (2) and max_size (10)",
        ),
        ("    desired_size: 1\n", "node_groups[0].desired_size", "between min_size"),
        ("    capacity_type: reserved\n", "node_groups[0].capacity_type", "on-demand, spot"),
        (
            "    taints: [nvidia.com/gpu=present:Sometimes]\n",
            "node_groups[0].taints[0]",
            "not a taint",
        ),
        (
            "    taints: ['nvidia.com/gpu=pre sent:NoSchedule']\n",
            "node_groups[0].taints[0]",
            "not a taint",
        ),
        ("    taints: [a:NoSchedule, a=b:NoSchedule]\n", "node_groups[0].taints", "twice"),
        ("    taints: nvidia.com/gpu\n", "node_groups[0].taints", "list of strings"),
        (
            "  - name: a100\n    instance_type: g5.xlarge\n    min_size: 0\n    max_size: 1\n"
            "    gpu_type: a10g\n",
            "node_groups[1].name",
            "duplicate node group name 'a100' (first at line 8)",
        ),
        (
            "state:\n  s3_bucket: Bad_Bucket\n  dynamodb_table: t1\n",
            "state.s3_bucket",
            "not an S3 bucket",
        ),
        ("state:\n  s3_bucket: my-bucket\n", "state", "missing required field 'dynamodb_table'"),
    ],
)
def test_bad_group_or_state_is_rejected(extra, field, message):
    err = error(GOOD + extra)
    assert err.field == field and message in str(err) and err.line


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "expected a mapping of fields, got empty"),
        ("- 1\n", "expected a mapping"),
        (GOOD.split("node_groups:")[0], "at least one node group is required"),
        (
            GOOD.split("node_groups:")[0] + "node_groups: []\n",
            "at least one node group is required",
        ),
        (GOOD.split("node_groups:")[0] + "node_groups: {a: 1}\n", "expected a list of node groups"),
        (GOOD + "node_groups: []\n", "duplicate key 'node_groups'"),
        ("a: &x [1]\nb: *x\n", "aliases"),
        ("!!python/object/apply:os.system ['true']\n", "not allowed"),
        (GOOD + "extra: !!binary aGVsbG8=\n", "unknown field"),
    ],
)
def test_hostile_documents_are_rejected_cleanly(text, message):
    assert message in str(error(text))


def test_long_group_name_is_rejected_before_aws_names_overflow():
    err = error(GOOD.replace("- name: a100", "- name: " + "a" * 41))
    assert err.field == "node_groups[0].name" and "at most 40" in str(err)


@pytest.mark.parametrize(
    "text, ok",
    [
        ("nvidia.com/gpu=present:NoSchedule", True),
        ("dedicated:NoExecute", True),
        ("example.com/team=ml:PreferNoSchedule", True),
        ("=x:NoSchedule", False),
        ("a/b/c=x:NoSchedule", False),
        ("Bad_Prefix.com/x=y:NoSchedule", False),
        ("k=v", False),
        ("k=" + "v" * 64 + ":NoSchedule", False),
    ],
)
def test_taint_syntax(text, ok):
    assert (parse_taint(text) is not None) is ok


@pytest.mark.parametrize(
    "key, ok",
    [
        ("gpu-type", True),
        ("nvidia.com/gpu.product", True),
        ("node.kubernetes.io/gpu-type", True),
        ("kubernetes.io/gpu-type", False),
        ("k8s.io/gpu", False),
        ("topology.kubernetes.io/gpu", False),
        ("x.k8s.io/gpu", False),
    ],
)
def test_a_label_key_the_kubelet_refuses_is_rejected(key, ok):
    """The kubelet refuses to start with a self-assigned kubernetes.io / k8s.io label
    (outside node.kubernetes.io and kubelet.kubernetes.io): the GPU nodes would be paid
    for and never join. Caught before anything is created."""
    text = GOOD.replace("node_groups:", f"gpu_label_key: {key}\nnode_groups:")
    if ok:
        assert parse(text).gpu_label_key == key
    else:
        err = error(text)
        assert (err.line, err.field) == (7, "gpu_label_key") and "kubelet" in str(err)
