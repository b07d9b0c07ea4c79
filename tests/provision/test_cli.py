"""`gpuctl provision` / `gpuctl destroy` end to end: the real CLI, preflight against moto,
the real Terraform engine. The AWS modules cannot be initialised offline, so the modules
directory setting points at a provider-free stand-in that declares the very same variables
(terraform/variables.tf) and calls its parts by the same names as terraform/main.tf (so
plans group by component as they do for real), each part a `terraform_data` holding what
it was given."""

import json
import os
import shutil
from pathlib import Path

import pytest

import tests
from gpuctl.provision.core.preflight import ami_parameter

ROOT = Path(tests.ROOT)
NEW = ROOT / "examples" / "cluster.yaml"
EXISTING = ROOT / "examples" / "cluster-existing.yaml"
KARPENTER = ROOT / "examples" / "cluster-karpenter-efa.yaml"
AMI = "ami-0123456789abcdef0"

STAND_IN = """
locals {
  karpenter = contains(["karpenter"], var.autoscaler)
  stage     = { for name, r in var.helm_releases : name => r.stage }
}

module "vpc" {
  source = "./part"
  count  = var.create_cluster ? 1 : 0
  input  = { cidr = var.vpc_cidr, zones = var.availability_zones }
}

module "control_plane" {
  source = "./part"
  count  = var.create_cluster ? 1 : 0
  input  = { name = var.kubernetes_cluster, version = var.kubernetes_version, admins = var.control_plane.admin_principals }
}

module "gpu_nodes" {
  source   = "./part"
  for_each = local.karpenter ? {} : var.node_groups
  input = {
    name    = "${var.cluster_name}-${each.key}"
    size    = [each.value.min_size, each.value.max_size]
    zones   = each.value.availability_zones
    subnets = each.value.subnet_ids
    ami     = each.value.ami_id
    gpus    = each.value.gpu_count
    efa     = each.value.efa_interfaces
  }
}

module "karpenter" {
  source = "./part"
  count  = local.karpenter ? 1 : 0
  input  = var.karpenter
}

module "karpenter_groups" {
  source   = "./part"
  for_each = local.karpenter ? var.node_groups : {}
  input    = { efa = each.value.efa }
}

module "autoscaler_releases" {
  source   = "./part"
  for_each = { for name, r in var.helm_releases : name => r if contains(["autoscaler"], r.stage) }
  input    = each.value
}

module "node_pool_releases" {
  source   = "./part"
  for_each = { for name, r in var.helm_releases : name => r if contains(["node-pools"], r.stage) }
  input    = each.value
}

module "gpu_stack_releases" {
  source   = "./part"
  for_each = { for name, r in var.helm_releases : name => r if contains(["gpu-stack"], r.stage) }
  input    = each.value
}

output "vpc_id" {
  value = var.create_cluster ? "vpc-${var.cluster_name}" : "vpc-of-${var.kubernetes_cluster}"
}

output "asg_names" {
  value = { for k, m in module.gpu_nodes : k => m.output.name }
}

output "asg_inputs" {
  value = { for k, m in module.gpu_nodes : k => m.output }
}

output "helm_releases" {
  value = local.stage
}
"""

PART = """
variable "input" {
  type = any
}

resource "terraform_data" "this" {
  input = var.input
}

output "output" {
  value = terraform_data.this.output
}
"""


@pytest.fixture
def modules(tmp_path, monkeypatch):
    d = tmp_path / "modules"
    (d / "part").mkdir(parents=True)
    shutil.copy(ROOT / "terraform" / "variables.tf", d)
    (d / "main.tf").write_text(STAND_IN)
    (d / "part" / "main.tf").write_text(PART)
    monkeypatch.setenv("GPUCTL_TERRAFORM_DIR", str(d))
    return d


@pytest.fixture
def account(aws):
    """An account with the GPU AMIs published, and an existing EKS cluster (ml-prod-eks)
    with private subnets in us-east-1a and 1b and a public one in 1e."""
    for version in ("1.31", "1.33"):
        aws.seed_public_parameter(ami_parameter(version, "x86_64"), AMI)
    vpc, subnets, sg = aws.create_network(
        {"us-east-1a": False, "us-east-1b": False, "us-east-1e": True}
    )
    aws.create_eks_cluster(
        "ml-prod-eks", "1.31", subnet_ids=list(subnets.values()), security_group_ids=[sg]
    )
    aws.network = (vpc, subnets, sg)
    return aws


@pytest.fixture
def gpuctl(cli):
    def run(*args):
        r = cli(*args)
        return r.code, r.out, r.err

    return run


def rows(out: str, component: str) -> bool:
    return any(line.startswith(f"{component} ") for line in out.splitlines())


def test_new_cluster_provision_then_rerun_then_destroy(tmp_path, modules, account, gpuctl):
    work = tmp_path / "wd"
    base = ("provision", "-f", str(NEW), "--workdir", str(work))

    code, out, err = gpuctl(*base)  # stdin is not a terminal: no --yes, no apply
    assert code == 3 and "pass --yes" in err
    # network, control plane, two GPU groups, the GPU Operator
    assert "Plan: 5 to add, 0 to change, 0 to destroy" in out
    for component in ("network", "control plane", "node groups", "GPU stack"):
        assert rows(out, component), component
    assert 'module.gpu_nodes["a100"].terraform_data.this' in out and "8× A100 40 GiB" in out
    assert 'module.gpu_stack_releases["gpu-operator"]' in out
    assert "New EKS cluster ml-prod (Kubernetes 1.33) in a new VPC across a b c d" in out
    assert "arn:aws:iam::123456789012:role/platform-admins" in out
    assert "could not check" in out and "Estimated cost:" in out and "as of 2024-12" in out

    code, out, err = gpuctl(*base, "--plan-only")
    assert code == 0, err
    assert "Plan: 5 to add" in out and "Outputs" not in out
    assert "Monthly cost estimate by component" in out
    cost_rows = out.split("Monthly cost estimate by component", 1)[1]
    for component in ("network", "control plane", "node groups", "GPU stack"):
        assert rows(cost_rows, component), component
    assert "NAT gateway" in cost_rows and "EKS control plane" in cost_rows

    code, out, err = gpuctl(*base, "--yes", "-o", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["plan"]["add"] == 5 and result["applied"] == {"add": 5, "change": 0, "destroy": 0}
    components = {c["address"]: c["component"] for c in result["plan"]["changes"]}
    assert components["module.vpc[0].terraform_data.this"] == "network"
    assert components["module.control_plane[0].terraform_data.this"] == "control plane"
    assert result["outputs"]["asg_names"] == {
        "a100": "ml-prod-a100",
        "h100-spot": "ml-prod-h100-spot",
    }
    # what the preflight found reached Terraform through the variables file
    a100 = result["outputs"]["asg_inputs"]["a100"]
    assert a100["ami"] == AMI and a100["gpus"] == 8 and a100["zones"]
    by_component = {c["component"]: c for c in result["preflight"]["cost_by_component"]}
    assert by_component["control plane"]["monthly"]["min"] > 0
    assert "✓" in err  # the progress display printed each completed resource

    code, out, err = gpuctl(*base, "--yes")
    assert code == 0 and "Nothing to change." in out and "asg_names" in out

    code, out, err = gpuctl("destroy", "-f", str(NEW), "--workdir", str(work))
    assert code == 3 and "Destroy: 0 to add, 0 to change, 5 to destroy" in out
    code, out, err = gpuctl("destroy", "-f", str(NEW), "--workdir", str(work), "--yes")
    assert code == 0 and "Destroyed 5 resources." in out
    code, out, err = gpuctl("destroy", "-f", str(NEW), "--workdir", str(work), "--yes")
    assert code == 0 and "Nothing to destroy." in out


def test_existing_cluster_plans_only_node_groups_in_its_network(tmp_path, modules, account, gpuctl):
    vpc, subnets, sg = account.network
    work = tmp_path / "wd"
    code, out, err = gpuctl(
        "provision", "-f", str(EXISTING), "--workdir", str(work), "--plan-only", "-o", "json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert {c["component"] for c in result["plan"]["changes"]} == {"node groups", "GPU stack"}
    preflight = result["preflight"]
    assert preflight["cluster"]["vpc_id"] == vpc and preflight["cluster"]["security_group_ids"] == [
        sg
    ]
    (group,) = preflight["node_groups"]
    # g6e.12xlarge is offered in 1a-1d here: the cluster's private subnets there, not 1e's
    assert group["subnet_ids"] == sorted([subnets["us-east-1a"], subnets["us-east-1b"]])
    tfvars = json.loads((work / "terraform.tfvars.json").read_text())
    assert tfvars["create_cluster"] is False and tfvars["vpc_cidr"] is None
    assert tfvars["node_groups"]["l40s"]["subnet_ids"] == group["subnet_ids"]
    assert "Existing EKS cluster ml-prod-eks (Kubernetes 1.31)" in err
    costs = {c["component"]: c for c in preflight["cost_by_component"]}
    assert costs["network"]["items"] == [] and costs["control plane"]["items"] == []
    # the numbers the label says are fields of their own: "l40s: 0–4 × g6e.12xlarge"
    (item,) = costs["node groups"]["items"]
    assert (item["nodes_min"], item["nodes_max"], item["priced"]) == (0, 4, "g6e.12xlarge")
    assert item["spot"] is False and item["label"] == "l40s: 0–4 × g6e.12xlarge"


def test_existing_cluster_and_vpc_cidr_is_refused_before_anything(tmp_path, modules, gpuctl):
    bad = tmp_path / "cluster.yaml"
    bad.write_text(
        EXISTING.read_text().replace(
            "region: us-east-1\n", "region: us-east-1\nvpc_cidr: 10.0.0.0/16\n"
        )
    )
    work = tmp_path / "wd"
    code, out, err = gpuctl("provision", "-f", str(bad), "--workdir", str(work))
    assert code == 2 and "Traceback" not in err
    assert f"{bad}:8: vpc_cidr: the GPU nodes of the existing cluster 'ml-prod-eks'" in err
    assert not work.exists()


def test_karpenter_and_efa_render_what_they_promise(tmp_path, modules, account, gpuctl):
    work = tmp_path / "wd"
    code, out, err = gpuctl(
        "provision", "-f", str(KARPENTER), "--workdir", str(work), "--plan-only"
    )
    assert code == 0, err
    # Karpenter instead of Auto Scaling groups; the EFA device plugin with the GPU stack
    assert "module.gpu_nodes" not in out
    for address in (
        "module.karpenter[0]",
        'module.karpenter_groups["h100-efa"]',
        'module.autoscaler_releases["karpenter"]',
        'module.node_pool_releases["gpuctl-node-pools"]',
        'module.gpu_stack_releases["aws-efa-k8s-device-plugin"]',
    ):
        assert address in out, address
    tfvars = json.loads((work / "terraform.tfvars.json").read_text())
    pools = json.loads(tfvars["helm_releases"]["gpuctl-node-pools"]["values"])["objects"]
    by = {(o["kind"], o["metadata"]["name"]): o["spec"] for o in pools}
    efa_class = by[("EC2NodeClass", "ml-train-h100-efa")]
    assert efa_class["placementGroupSelector"] == {"name": "ml-train-h100-efa"}
    assert efa_class["amiSelectorTerms"] == [{"id": AMI}]
    efa_pool = by[("NodePool", "ml-train-h100-efa")]
    assert efa_pool["limits"] == {"nodes": "8", "nvidia.com/gpu": "64"}
    assert tfvars["node_groups"]["h100-efa"]["efa_interfaces"] == 32
    assert len(tfvars["node_groups"]["h100-efa"]["availability_zones"]) == 1
    efa = json.loads(tfvars["helm_releases"]["aws-efa-k8s-device-plugin"]["values"])
    assert efa["supportedInstanceLabels"]["values"] == ["p5.48xlarge"]


def test_preflight_problem_stops_before_terraform(tmp_path, modules, aws, gpuctl):
    work = tmp_path / "wd"  # no AMI is published in this account
    code, out, err = gpuctl("provision", "-f", str(NEW), "--workdir", str(work), "--yes")
    assert code == 1
    assert "gpuctl: error: preflight found" in err and "no EKS GPU AMI is published" in err
    assert "Traceback" not in err
    assert not work.exists()


def test_dry_run_writes_variables_without_network(tmp_path, modules, monkeypatch, gpuctl):
    # no credentials and an endpoint nobody listens on: any AWS call would fail
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    work = tmp_path / "wd"
    code, out, err = gpuctl(
        "provision", "-f", str(NEW), "--workdir", str(work), "--dry-run", "-o", "json"
    )
    assert code == 0, err
    printed = json.loads(out)["variables"]
    written = json.loads((work / "terraform.tfvars.json").read_text())
    assert printed == written and written["node_groups"]["a100"]["max_size"] == 10
    assert (work / "main.tf").read_text() == (modules / "main.tf").read_text()
    assert (work / "part" / "main.tf").is_file()
    assert not (work / "terraform.tfstate").exists() and not (work / ".terraform").exists()


def test_bad_spec_exits_2_and_touches_nothing(tmp_path, modules, gpuctl):
    bad = tmp_path / "cluster.yaml"
    bad.write_text(NEW.read_text().replace("max_size: 10", "max_size: 1"))
    work = tmp_path / "wd"
    code, out, err = gpuctl("provision", "-f", str(bad), "--workdir", str(work), "--dry-run")
    assert code == 2
    assert f"{bad}:18: node_groups[0].min_size: min_size (2) is larger than max_size (1)" in err
    assert not work.exists()


def test_destroy_without_a_workdir_says_where_it_looked(tmp_path, gpuctl):
    code, out, err = gpuctl("destroy", "-f", str(NEW), "--workdir", str(tmp_path / "x"))
    assert code == 1 and "nothing was provisioned from here" in err


@pytest.mark.parametrize("where", ["a-file", "a-file/below"])
def test_unusable_workdir_is_one_error_line(tmp_path, modules, gpuctl, where):
    (tmp_path / "a-file").write_text("not a directory\n")
    code, out, err = gpuctl(
        "provision", "-f", str(NEW), "--workdir", str(tmp_path / where), "--dry-run"
    )
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"gpuctl: error: cannot write the working directory {tmp_path / where}: ")
    assert "--workdir" in err


@pytest.fixture
def profiles(tmp_path, monkeypatch):
    """AWS config files with a profile 'team' (moto takes any key) in us-east-1."""
    (tmp_path / "aws").mkdir()
    config = tmp_path / "aws" / "config"
    config.write_text("[profile team]\nregion = us-east-1\n\n[profile west]\nregion = us-west-2\n")
    creds = tmp_path / "aws" / "credentials"
    creds.write_text(
        "[team]\naws_access_key_id = team-key\naws_secret_access_key = team-secret\n\n"
        "[west]\naws_access_key_id = west-key\naws_secret_access_key = west-secret\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    return config


def test_a_profile_that_does_not_exist_is_one_line(tmp_path, modules, account, profiles, gpuctl):
    work = tmp_path / "wd"
    code, out, err = gpuctl(
        "provision", "-f", str(EXISTING), "--workdir", str(work), "--profile", "tema"
    )
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.splitlines()[0] == (
        f"gpuctl: error: AWS profile 'tema' not found in {profiles} or "
        f"{profiles.parent / 'credentials'} (from --profile)"
    )
    assert not work.exists()


def test_the_profile_reaches_the_preflight_and_terraforms_state_backend(
    tmp_path, modules, account, profiles, gpuctl, monkeypatch
):
    s3 = account.client("s3")
    s3.create_bucket(Bucket="ml-state")
    account.client("dynamodb").create_table(
        TableName="ml-locks",
        KeySchema=[{"AttributeName": "LockID", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "LockID", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    spec = tmp_path / "cluster.yaml"
    spec.write_text(
        EXISTING.read_text() + "state: {s3_bucket: ml-state, dynamodb_table: ml-locks}\n"
    )
    # credentials only in the profile: boto3, the AWS provider and the S3 backend need it
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    work = tmp_path / "wd"
    base = ("-f", str(spec), "--workdir", str(work), "--yes")
    code, out, err = gpuctl("provision", *base)
    assert code == 1 and "no AWS credentials found" in err
    code, out, err = gpuctl("provision", *base, "--profile", "team", "-o", "json")
    assert code == 0, err
    added = json.loads(out)["applied"]["add"]
    assert added > 0
    assert "AWS_PROFILE" not in os.environ  # set for Terraform only, while it ran
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # the environment's keys are not the
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")  # profile's: s3 reads the state
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="ml-state")["Contents"]]
    assert keys == ["gpuctl/ml-prod-gpus/terraform.tfstate"]
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    code, out, err = gpuctl("destroy", *base)  # Terraform finds no credentials
    assert code == 1 and "terraform init failed" in err
    code, out, err = gpuctl("destroy", *base, "--profile", "team")
    assert code == 0 and f"Destroyed {added} resources." in out


def region_of(work):
    return json.loads((work / "terraform.tfvars.json").read_text())["region"]


def test_region_from_the_spec_the_option_the_environment_or_the_profile(
    tmp_path, modules, profiles, gpuctl, monkeypatch
):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(NEW.read_text().replace("region: us-east-1\n", ""))

    def dry_run(*args):
        work = tmp_path / f"wd{len(list(tmp_path.iterdir()))}"
        code, out, err = gpuctl(
            "provision", "-f", str(spec), "--workdir", str(work), "--dry-run", *args
        )
        return (code, err) if code else (code, region_of(work))

    code, err = dry_run()
    assert code == 2 and "no AWS region: write region: in the spec, or give --region" in err
    assert dry_run("--region", "eu-west-1") == (0, "eu-west-1")
    assert dry_run("--profile", "west") == (0, "us-west-2")  # the profile's region
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert dry_run("--profile", "west") == (0, "ap-south-1")  # the environment's over it
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    assert dry_run() == (0, "eu-central-1")  # AWS_REGION first, as the AWS SDKs read it
    assert dry_run("--region", "eu-west-1") == (0, "eu-west-1")  # the option over both
    code, err = dry_run("--region", "mars-1")
    assert code == 2 and "--region 'mars-1' is not an AWS region name" in err

    spec.write_text(NEW.read_text())  # region: us-east-1
    assert dry_run() == (0, "us-east-1")  # the spec's region over the environment's
    code, err = dry_run("--region", "eu-west-1")
    assert code == 2
    assert f"{spec}:6: region: the spec's region is us-east-1, --region says eu-west-1" in err


def test_a_working_directory_stays_in_its_region(tmp_path, modules, gpuctl):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(NEW.read_text().replace("region: us-east-1\n", ""))
    work = tmp_path / "wd"
    base = ("-f", str(spec), "--workdir", str(work))
    assert gpuctl("provision", *base, "--dry-run", "--region", "us-west-2")[0] == 0
    # a dry run ties nothing: Terraform never ran there
    assert gpuctl("provision", *base, "--dry-run", "--region", "us-east-1")[0] == 0
    (work / "terraform.tfstate").write_text("{}")  # as Terraform leaves it
    held = f"{work} holds cluster 'ml-prod' in us-east-1, not 'ml-prod' in us-west-2"
    code, out, err = gpuctl("provision", *base, "--dry-run", "--region", "us-west-2")
    assert code == 1 and held in err
    assert region_of(work) == "us-east-1"  # not overwritten
    code, out, err = gpuctl("destroy", *base, "--region", "us-west-2", "--yes")
    assert code == 1 and held in err


# ---- the state belongs to the cluster, found the same from any directory ----


def test_provision_from_another_directory_plans_no_second_cluster(
    tmp_path, modules, account, gpuctl, monkeypatch
):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    state = tmp_path / "state" / "gpuctl" / "ml-prod"
    for d in ("a", "b", "c", "d"):
        (tmp_path / d).mkdir()

    monkeypatch.chdir(tmp_path / "a")
    code, out, err = gpuctl("provision", "-f", str(NEW), "--yes")
    assert code == 0, err
    assert f"Terraform state: {state / 'terraform.tfstate'}" in out
    assert (state / "terraform.tfstate").is_file() and os.listdir(tmp_path / "a") == []
    assert oct(os.stat(tmp_path / "state" / "gpuctl").st_mode & 0o777) == "0o700"

    monkeypatch.chdir(tmp_path / "b")  # the same cluster from elsewhere: nothing to add
    code, out, err = gpuctl("provision", "-f", str(NEW), "--plan-only")
    assert code == 0 and "Plan: 0 to add" in out and "Nothing to change." in out, out

    monkeypatch.chdir(tmp_path / "c")
    code, out, err = gpuctl("destroy", "-f", str(NEW), "--dry-run", "-o", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["plan"]["destroy"] == 5 and "applied" not in result
    assert result["state"] == str(state / "terraform.tfstate")
    assert err.endswith("dry run: nothing was changed\n"), err

    monkeypatch.chdir(tmp_path / "d")
    code, out, err = gpuctl("destroy", "-f", str(NEW), "--yes")
    assert code == 0 and "Destroyed 5 resources." in out, err


def test_without_xdg_state_home_the_state_is_under_the_home(tmp_path, modules, gpuctl):
    code, out, err = gpuctl("provision", "-f", str(NEW), "--dry-run", "-o", "json")
    assert code == 0, err
    home = os.environ["HOME"]
    assert json.loads(out)["workdir"] == f"{home}/.local/state/gpuctl/ml-prod"
    assert os.path.isfile(f"{home}/.local/state/gpuctl/ml-prod/terraform.tfvars.json")


def test_state_left_where_an_older_gpuctl_kept_it_is_not_silently_ignored(
    tmp_path, modules, gpuctl, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    old = tmp_path / ".gpuctl" / "clusters" / "ml-prod"
    old.mkdir(parents=True)
    (old / "terraform.tfstate").write_text("{}")
    for command in (("provision", "--dry-run"), ("destroy",)):
        code, out, err = gpuctl(command[0], "-f", str(NEW), *command[1:])
        assert code == 1, err
        assert f"has Terraform state in {old}, where earlier gpuctl versions kept it" in err
        assert "--workdir .gpuctl/clusters/ml-prod" in err


def test_a_cluster_of_the_same_name_in_another_region_is_refused(tmp_path, modules, gpuctl):
    assert gpuctl("provision", "-f", str(NEW), "--dry-run")[0] == 0
    [tfvars] = tmp_path.glob("home/**/ml-prod/terraform.tfvars.json")
    (tfvars.parent / ".terraform").mkdir()  # `terraform init` ran there
    other = tmp_path / "other.yaml"
    other.write_text(NEW.read_text().replace("us-east-1", "us-west-2"))
    code, out, err = gpuctl("provision", "-f", str(other), "--dry-run")
    assert code == 1 and "holds cluster 'ml-prod' in us-east-1, not 'ml-prod' in us-west-2" in err


def test_terraform_variables_are_not_written_through_a_planted_symlink(tmp_path, modules, gpuctl):
    work = tmp_path / "wd"
    assert gpuctl("provision", "-f", str(NEW), "--workdir", str(work), "--dry-run")[0] == 0
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (work / "terraform.tfvars.json").unlink()
    (work / "terraform.tfvars.json").symlink_to(victim)
    code, out, err = gpuctl("provision", "-f", str(NEW), "--workdir", str(work), "--dry-run")
    assert code == 0, err
    assert victim.read_text() == "precious"
    assert json.loads((work / "terraform.tfvars.json").read_text())["cluster_name"] == "ml-prod"


def test_dry_run_prints_a_summary_and_warns_of_an_open_endpoint(tmp_path, gpuctl):
    """A summary (what, where, how many, cost), not the ~100 lines of Terraform variables
    (those with --show-vars), and a warning: examples/cluster.yaml leaves public_access_cidrs
    at its default, 0.0.0.0/0."""
    base = ("provision", "-f", str(NEW), "--workdir", str(tmp_path / "wd"), "--dry-run")
    code, out, err = gpuctl(*base)
    assert code == 0, err
    assert "a new EKS cluster" in out and "p5.48xlarge" in out and '"node_groups"' not in out
    assert "open to the whole internet (0.0.0.0/0)" in err
    code, out, _ = gpuctl(*base, "--show-vars")
    assert code == 0 and '"node_groups"' in out


def test_dry_run_of_a_trainium2_spec_shows_the_group_its_devices_the_plugin_and_cost(
    tmp_path, gpuctl
):
    spec = tmp_path / "trn2.yaml"
    spec.write_text(
        "apiVersion: gpuctl/v1\nkind: Cluster\nname: trn\nregion: us-east-2\n"
        'vpc_cidr: 10.0.0.0/16\nkubernetes_cluster: {version: "1.33", public_access_cidrs: '
        "[10.1.0.0/16]}\nnode_groups:\n"
        "  - {name: trn2, instance_type: trn2.48xlarge, min_size: 0, max_size: 4, "
        "gpu_type: trainium2}\n"
        "  - {name: trn1, instance_type: trn1.32xlarge, min_size: 1, max_size: 2, "
        "gpu_type: trainium}\n"
    )
    code, out, err = gpuctl(
        "provision", "-f", str(spec), "--workdir", str(tmp_path / "wd"), "--dry-run"
    )
    assert code == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("trn")}
    assert rows["trn2"][1:5] == ["trn2.48xlarge", "on-demand", "0-4", "(now"]
    assert "16 aws.amazon.com/neuron" in " ".join(rows["trn2"]) and rows["trn2"][-2:] == [
        "yes",
        "unknown",
    ]
    # trn1.32xlarge is priced: $21.50/h × 730 h × 1–2 nodes
    assert rows["trn1"][-1] == f"{21.5 * 730:,.0f}-{2 * 21.5 * 730:,.0f}"
    assert (
        "Helm releases: neuron-helm-chart (oci://public.ecr.aws/neuron neuron-helm-chart 1.1.1"
        in out
    )
    assert "aws-efa-k8s-device-plugin" in out and "gpu-operator" not in out
