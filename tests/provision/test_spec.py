"""Cluster spec validation, including hostile specs: every error names file, line, field."""

from pathlib import Path

import pytest

import tests
from gpuctl.common.errors import SpecError
from gpuctl.common.specfile import load_yaml, load_yaml_file
from gpuctl.provision.core.spec import parse_cluster, parse_taint
from gpuctl.provision.core.tfvars import render_backend, render_tfvars

EXAMPLE = Path(tests.ROOT) / "examples" / "cluster.yaml"

GOOD = """\
apiVersion: gpuctl/v1
kind: Cluster
name: ml-prod
region: us-east-1
vpc_cidr: 10.0.0.0/16
kubernetes_cluster: {version: "1.31"}
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
    spec = parse_cluster(load_yaml_file(str(EXAMPLE)))
    assert spec.cluster.create and spec.cluster.name == "ml-prod"  # named like the spec
    assert spec.cluster.endpoint_access == "public-and-private"
    assert spec.cluster.system_nodes.count == 2
    assert (spec.gpu_stack, spec.mig_strategy, spec.autoscaler) == (
        "gpu-operator",
        "mixed",
        "cluster-autoscaler",
    )
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
    assert tfvars["kubernetes_cluster"] == "ml-prod" and tfvars["vpc_cidr"] == "10.0.0.0/16"
    assert tfvars["create_cluster"] is True and tfvars["kubernetes_version"] == "1.31"
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
    assert parse(GOOD.replace('"1.31"', '"1.30"')).kubernetes_version == "1.30"
    err = error(GOOD.replace('"1.31"', "1.30"))
    assert (err.line, err.field) == (6, "kubernetes_cluster.version") and "in quotes" in str(err)


def test_the_old_top_level_version_says_where_it_went():
    err = error(GOOD.replace("kind:", 'kubernetes_version: "1.30"\nkind:'))
    assert err.field == "kubernetes_version" and "kubernetes_cluster.version" in str(err)


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
            'kubernetes_cluster: {version: "1.31"}',
            "kubernetes_cluster: {name: 'a b', create: true, version: '1.31'}",
            6,
            "kubernetes_cluster.name",
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
        *[
            (f"state:\n  s3_bucket: '{b}'\n  dynamodb_table: t1\n", "state.s3_bucket", "S3 bucket")
            for b in ("192.168.1.1", "xn--state", "sthree-state", "state-s3alias", "a..b", "ab")
        ],
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


# ---- the cluster: new (default) or existing ----

EXISTING = GOOD.replace("vpc_cidr: 10.0.0.0/16\n", "").replace(
    'kubernetes_cluster: {version: "1.31"}', "kubernetes_cluster: {name: ml-prod-eks}"
)


def test_an_existing_cluster_gets_no_vpc():
    spec = parse(EXISTING)
    assert not spec.cluster.create and spec.cluster.name == "ml-prod-eks"
    assert spec.vpc_cidr is None and spec.kubernetes_version is None  # read at preflight
    tfvars = render_tfvars(spec)
    assert tfvars["create_cluster"] is False and tfvars["vpc_cidr"] is None
    # the plain name is the same as {name: …}
    assert parse(EXISTING.replace("{name: ml-prod-eks}", "ml-prod-eks")).cluster == spec.cluster


def test_an_existing_cluster_and_a_vpc_cidr_are_refused_with_the_reason():
    err = error(
        EXISTING.replace("region: us-east-1\n", "region: us-east-1\nvpc_cidr: 10.9.0.0/16\n")
    )
    assert (err.line, err.field) == (5, "vpc_cidr")
    assert "go into that cluster's own VPC" in str(err) and "create: true" in err.hint


@pytest.mark.parametrize(
    "cluster, field, message",
    [
        (
            "{name: ml-prod-eks, admin_principals: []}",
            "kubernetes_cluster.admin_principals",
            "only to a cluster gpuctl creates",
        ),
        (
            "{name: ml-prod-eks, endpoint_access: private}",
            "kubernetes_cluster.endpoint_access",
            "only to a cluster gpuctl creates",
        ),
        ("{create: false}", "kubernetes_cluster", "name the existing EKS cluster"),
        ("{create: true}", "kubernetes_cluster", "missing required field 'version'"),
        ("{}", "kubernetes_cluster", "missing required field 'version'"),
        (
            "{version: '1.31', endpoint_access: open}",
            "kubernetes_cluster.endpoint_access",
            "must be one of",
        ),
        (
            "{version: '1.31', endpoint_access: private, public_access_cidrs: [10.0.0.0/8]}",
            "kubernetes_cluster.public_access_cidrs",
            "no public access",
        ),
        (
            "{version: '1.31', public_access_cidrs: [10.0.0.1/8]}",
            "kubernetes_cluster.public_access_cidrs[0]",
            "not a CIDR",
        ),
        (
            "{version: '1.31', admin_principals: ['arn:aws:sts::123456789012:assumed-role/x/y']}",
            "kubernetes_cluster.admin_principals[0]",
            "not an IAM role or user ARN",
        ),
        (
            "{version: '1.31', admin_principals: [arn:aws:iam::123456789012:role/a, arn:aws:iam::123456789012:role/a]}",
            "kubernetes_cluster.admin_principals",
            "twice",
        ),
        (
            "{version: '1.31', system_nodes: {count: 0}}",
            "kubernetes_cluster.system_nodes.count",
            "at least 1",
        ),
        (
            "{version: '1.31', system_nodes: {instance_type: 'm6i.large; x'}}",
            "kubernetes_cluster.system_nodes.instance_type",
            "not an EC2 instance type",
        ),
        ("{version: '1.31', nmae: x}", "kubernetes_cluster.nmae", "did you mean 'name'"),
        ("[ml-prod-eks]", "kubernetes_cluster", "expected a mapping"),
    ],
)
def test_bad_cluster_is_named_with_its_field(cluster, field, message):
    err = error(GOOD.replace('{version: "1.31"}', cluster))
    assert err.field == field and message in str(err), str(err)
    assert err.line == 6


def test_a_new_cluster_needs_a_vpc_cidr():
    err = error(GOOD.replace("vpc_cidr: 10.0.0.0/16\n", ""))
    assert "the new cluster's VPC" in str(err) and err.field is None and "existing" in err.hint


def test_new_cluster_options_reach_the_variables():
    spec = parse(
        GOOD.replace(
            '{version: "1.31"}',
            "{name: ml-eks, create: true, version: '1.32', endpoint_access: private, "
            "admin_principals: [arn:aws:iam::123456789012:role/ops], "
            "system_nodes: {instance_type: m6i.xlarge, count: 3}}",
        )
    )
    cp = render_tfvars(spec)["control_plane"]
    assert spec.cluster.name == "ml-eks" and spec.kubernetes_version == "1.32"
    assert cp == {
        "endpoint_public_access": False,
        "endpoint_private_access": True,
        "public_access_cidrs": ["0.0.0.0/0"],
        "admin_principals": ["arn:aws:iam::123456789012:role/ops"],
        "system_instance_type": "m6i.xlarge",
        "system_node_count": 3,
    }


# ---- cluster-level choices and node-group options ----


@pytest.mark.parametrize(
    "extra, field, message",
    [
        ("gpu_stack: nvidia\n", "gpu_stack", "gpu-operator, device-plugin, none"),
        ("autoscaler: keda\n", "autoscaler", "cluster-autoscaler, karpenter"),
        ("mig_strategy: all\n", "mig_strategy", "none, single, mixed"),
        ("gpu_stack: none\nmig_strategy: single\n", "mig_strategy", "gpu_stack is none"),
    ],
)
def test_bad_cluster_choices_are_rejected(extra, field, message):
    err = error(GOOD.replace("node_groups:", extra + "node_groups:"))
    assert err.field == field and message in str(err)


@pytest.mark.parametrize(
    "extra, field, message",
    [
        ("    efa: yes please\n", "node_groups[0].efa", "true or false"),
        (
            "    capacity_reservation: cr-xyz\n",
            "node_groups[0].capacity_reservation",
            "not a capacity reservation id",
        ),
        (
            "    capacity_reservation: {id: cr-0123456789abcdef0, type: block}\n",
            "node_groups[0].capacity_reservation.type",
            "on-demand, capacity-block",
        ),
        (
            "    capacity_reservation: {type: capacity-block}\n",
            "node_groups[0].capacity_reservation",
            "missing required field 'id'",
        ),
        (
            "    capacity_type: spot\n    capacity_reservation: cr-0123456789abcdef0\n",
            "node_groups[0].capacity_type",
            "spot cannot use it",
        ),
    ],
)
def test_bad_group_options_are_rejected(extra, field, message):
    err = error(GOOD + extra)
    assert err.field == field and message in str(err), str(err)


def test_efa_and_reservations_reach_the_variables():
    spec = parse(
        GOOD
        + "    efa: true\n    capacity_reservation: {id: cr-0123456789abcdef0, type: capacity-block}\n"
        + "  - {name: b, instance_type: g5.48xlarge, min_size: 0, max_size: 1, gpu_type: a10g,"
        + " capacity_reservation: cr-0fedcba9876543210}\n"
    )
    groups = render_tfvars(spec)["node_groups"]
    assert groups["a100"]["efa"] is True
    assert groups["a100"]["capacity_reservation"] == {
        "id": "cr-0123456789abcdef0",
        "type": "capacity-block",
    }
    assert groups["b"]["efa"] is False
    assert groups["b"]["capacity_reservation"] == {
        "id": "cr-0fedcba9876543210",
        "type": "on-demand",
    }


def test_karpenter_keeps_no_minimum():
    err = error(GOOD.replace("node_groups:", "autoscaler: karpenter\nnode_groups:"))
    assert err.field == "node_groups[0].min_size" and "keeps no minimum" in str(err)
    spec = parse(
        GOOD.replace("node_groups:", "autoscaler: karpenter\nnode_groups:").replace(
            "min_size: 2", "min_size: 0"
        )
    )
    assert spec.autoscaler == "karpenter" and spec.node_groups[0].min_size == 0


def test_the_region_comes_from_the_spec_the_option_or_a_default():
    from gpuctl.common.errors import UsageError

    no_region = load_yaml(GOOD.replace("region: us-east-1\n", ""), "c.yaml")
    with pytest.raises(SpecError, match="no AWS region") as e:
        parse_cluster(no_region)
    assert e.value.file == "c.yaml"
    assert parse_cluster(no_region, "eu-west-1").region == "eu-west-1"
    asked = []

    def default(region: str = "ap-south-1"):
        asked.append(region)
        return region, "AWS_REGION"

    assert parse_cluster(no_region, None, default).region == "ap-south-1"
    assert parse_cluster(no_region, "eu-west-1", default).region == "eu-west-1"
    with pytest.raises(UsageError, match=r"'moon' \(from AWS_REGION\) is not an AWS region"):
        parse_cluster(no_region, None, lambda: default("moon"))
    written = load_yaml(GOOD, "c.yaml")
    assert parse_cluster(written, None, default).region == "us-east-1"
    # the AWS settings are read only when neither the spec nor --region names the region
    assert asked == ["ap-south-1", "moon"]
    # a job spec given to provision: named as one (not its first field provision lacks)
    job = load_yaml("apiVersion: gpuctl/v1\nkind: Job\nname: train-1\nimage: x\n", "job.yaml")
    with pytest.raises(SpecError, match="kind: must be one of Cluster"):
        parse_cluster(job, None, default)
    assert asked == ["ap-south-1", "moon"]
    assert parse_cluster(written, "us-east-1").region == "us-east-1"
    with pytest.raises(SpecError) as e:
        parse_cluster(written, "eu-west-1")
    assert (e.value.line, e.value.field) == (4, "region")
    # the state backend is in the cluster's region unless it names its own
    state = (
        GOOD.replace("region: us-east-1\n", "")
        + "state: {s3_bucket: ml-state, dynamodb_table: ml-locks}\n"
    )
    spec = parse_cluster(load_yaml(state, "c.yaml"), "eu-west-1")
    assert render_backend(spec)["terraform"]["backend"]["s3"]["region"] == "eu-west-1"
