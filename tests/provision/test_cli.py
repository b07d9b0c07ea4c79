"""`gpuctl provision` / `gpuctl destroy` end to end: the real CLI, preflight against moto,
the real Terraform engine. The AWS modules cannot be initialised offline, so the modules
directory setting points at a provider-free stand-in that declares the very same variables
(terraform/variables.tf) and outputs."""

import json
import os
import shutil
from pathlib import Path

import pytest

import tests
from gpuctl.provision.preflight import ami_parameter

ROOT = Path(tests.ROOT)
EXAMPLE = ROOT / "examples" / "cluster.yaml"

STAND_IN = """
resource "terraform_data" "asg" {
  for_each = var.node_groups
  input = {
    name    = "${var.cluster_name}-${each.key}"
    size    = [each.value.min_size, each.value.max_size]
    zones   = each.value.availability_zones
    ami     = each.value.ami_id
    gpus    = each.value.gpu_count
  }
}

output "vpc_id" {
  value = "vpc-${var.cluster_name}"
}

output "private_subnet_ids" {
  value = [for z in flatten([for g in var.node_groups : g.availability_zones]) : "subnet-${z}"]
}

output "asg_names" {
  value = { for k, r in terraform_data.asg : k => r.output.name }
}

output "asg_inputs" {
  value = { for k, r in terraform_data.asg : k => r.output }
}
"""


@pytest.fixture
def modules(tmp_path, monkeypatch):
    d = tmp_path / "modules"
    d.mkdir()
    shutil.copy(ROOT / "terraform" / "variables.tf", d)
    (d / "main.tf").write_text(STAND_IN)
    monkeypatch.setenv("GPUCTL_TERRAFORM_DIR", str(d))
    return d


@pytest.fixture
def account(aws):
    aws.create_eks_cluster("ml-prod-eks", version="1.31")
    aws.seed_public_parameter(ami_parameter("1.31", "x86_64"), "ami-0123456789abcdef0")
    return aws


@pytest.fixture
def gpuctl(cli):
    def run(*args):
        r = cli(*args)
        return r.code, r.out, r.err

    return run


def test_provision_then_rerun_then_destroy(tmp_path, modules, account, gpuctl):
    work = tmp_path / "wd"
    base = ("provision", "-f", str(EXAMPLE), "--workdir", str(work))

    code, out, err = gpuctl(*base)  # stdin is not a terminal: no --yes, no apply
    assert code == 3 and "pass --yes" in err
    assert "Plan: 2 to add, 0 to change, 0 to destroy" in out
    assert 'terraform_data.asg["a100"]' in out and "8× A100 40 GiB" in out
    assert "could not check" in out and "Estimated cost:" in out and "as of 2024-12" in out

    code, out, err = gpuctl(*base, "--plan-only")
    assert code == 0 and "Plan: 2 to add" in out and "Outputs" not in out

    code, out, err = gpuctl(*base, "--yes", "-o", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["plan"]["add"] == 2 and result["applied"] == {"add": 2, "change": 0, "destroy": 0}
    assert result["outputs"]["asg_names"] == {
        "a100": "ml-prod-a100",
        "h100-spot": "ml-prod-h100-spot",
    }
    # what the preflight found reached Terraform through the variables file
    a100 = result["outputs"]["asg_inputs"]["a100"]
    assert a100["ami"] == "ami-0123456789abcdef0" and a100["gpus"] == 8 and a100["zones"]
    assert "✓" in err  # the progress display printed each completed resource

    code, out, err = gpuctl(*base, "--yes")
    assert code == 0 and "Nothing to change." in out and "asg_names" in out

    code, out, err = gpuctl("destroy", "-f", str(EXAMPLE), "--workdir", str(work))
    assert code == 3 and "Destroy: 0 to add, 0 to change, 2 to destroy" in out
    code, out, err = gpuctl("destroy", "-f", str(EXAMPLE), "--workdir", str(work), "--yes")
    assert code == 0 and "Destroyed 2 resources." in out
    code, out, err = gpuctl("destroy", "-f", str(EXAMPLE), "--workdir", str(work), "--yes")
    assert code == 0 and "Nothing to destroy." in out


def test_preflight_problem_stops_before_terraform(tmp_path, modules, aws, gpuctl):
    work = tmp_path / "wd"
    code, out, err = gpuctl("provision", "-f", str(EXAMPLE), "--workdir", str(work), "--yes")
    assert code == 1
    assert "gpuctl: error: preflight found" in err and "ml-prod-eks' does not exist" in err
    assert "Traceback" not in err
    assert not work.exists()


def test_dry_run_writes_variables_without_network(tmp_path, modules, monkeypatch, gpuctl):
    # no credentials and an endpoint nobody listens on: any AWS call would fail
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    work = tmp_path / "wd"
    code, out, err = gpuctl(
        "provision", "-f", str(EXAMPLE), "--workdir", str(work), "--dry-run", "-o", "json"
    )
    assert code == 0, err
    printed = json.loads(out)["variables"]
    written = json.loads((work / "terraform.tfvars.json").read_text())
    assert printed == written and written["node_groups"]["a100"]["max_size"] == 10
    assert (work / "main.tf").read_text() == (modules / "main.tf").read_text()
    assert not (work / "terraform.tfstate").exists() and not (work / ".terraform").exists()


def test_bad_spec_exits_2_and_touches_nothing(tmp_path, modules, gpuctl):
    bad = tmp_path / "cluster.yaml"
    bad.write_text(EXAMPLE.read_text().replace("max_size: 10", "max_size: 1"))
    work = tmp_path / "wd"
    code, out, err = gpuctl("provision", "-f", str(bad), "--workdir", str(work), "--dry-run")
    assert code == 2
    assert f"{bad}:11: node_groups[0].min_size: min_size (2) is larger than max_size (1)" in err
    assert not work.exists()


def test_destroy_without_a_workdir_says_where_it_looked(tmp_path, gpuctl):
    code, out, err = gpuctl("destroy", "-f", str(EXAMPLE), "--workdir", str(tmp_path / "x"))
    assert code == 1 and "nothing was provisioned from here" in err


@pytest.mark.parametrize("where", ["a-file", "a-file/below"])
def test_unusable_workdir_is_one_error_line(tmp_path, modules, gpuctl, where):
    (tmp_path / "a-file").write_text("not a directory\n")
    code, out, err = gpuctl(
        "provision", "-f", str(EXAMPLE), "--workdir", str(tmp_path / where), "--dry-run"
    )
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"gpuctl: error: cannot write the working directory {tmp_path / where}: ")
    assert "--workdir" in err


# ---- the state belongs to the cluster, found the same from any directory ----


def test_provision_from_another_directory_plans_no_second_cluster(
    tmp_path, modules, account, gpuctl, monkeypatch
):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    state = tmp_path / "state" / "gpuctl" / "ml-prod"
    for d in ("a", "b", "c", "d"):
        (tmp_path / d).mkdir()

    monkeypatch.chdir(tmp_path / "a")
    code, out, err = gpuctl("provision", "-f", str(EXAMPLE), "--yes")
    assert code == 0, err
    assert f"Terraform state: {state / 'terraform.tfstate'}" in out
    assert (state / "terraform.tfstate").is_file() and os.listdir(tmp_path / "a") == []
    assert oct(os.stat(tmp_path / "state" / "gpuctl").st_mode & 0o777) == "0o700"

    monkeypatch.chdir(tmp_path / "b")  # the same cluster from elsewhere: nothing to add
    code, out, err = gpuctl("provision", "-f", str(EXAMPLE), "--plan-only")
    assert code == 0 and "Plan: 0 to add" in out and "Nothing to change." in out, out

    monkeypatch.chdir(tmp_path / "c")
    code, out, err = gpuctl("destroy", "-f", str(EXAMPLE), "--dry-run", "-o", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["plan"]["destroy"] == 2 and "applied" not in result
    assert result["state"] == str(state / "terraform.tfstate")
    assert "Dry run: nothing was destroyed." in err

    monkeypatch.chdir(tmp_path / "d")
    code, out, err = gpuctl("destroy", "-f", str(EXAMPLE), "--yes")
    assert code == 0 and "Destroyed 2 resources." in out, err


def test_without_xdg_state_home_the_state_is_under_the_home(tmp_path, modules, gpuctl):
    code, out, err = gpuctl("provision", "-f", str(EXAMPLE), "--dry-run", "-o", "json")
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
        code, out, err = gpuctl(command[0], "-f", str(EXAMPLE), *command[1:])
        assert code == 1, err
        assert f"has Terraform state in {old}, where earlier gpuctl versions kept it" in err
        assert "--workdir .gpuctl/clusters/ml-prod" in err


def test_a_cluster_of_the_same_name_in_another_region_is_refused(tmp_path, modules, gpuctl):
    assert gpuctl("provision", "-f", str(EXAMPLE), "--dry-run")[0] == 0
    other = tmp_path / "other.yaml"
    other.write_text(EXAMPLE.read_text().replace("us-east-1", "us-west-2"))
    code, out, err = gpuctl("provision", "-f", str(other), "--dry-run")
    assert code == 1 and "holds cluster 'ml-prod' in us-east-1, not 'ml-prod' in us-west-2" in err


def test_terraform_variables_are_not_written_through_a_planted_symlink(tmp_path, modules, gpuctl):
    work = tmp_path / "wd"
    assert gpuctl("provision", "-f", str(EXAMPLE), "--workdir", str(work), "--dry-run")[0] == 0
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (work / "terraform.tfvars.json").unlink()
    (work / "terraform.tfvars.json").symlink_to(victim)
    code, out, err = gpuctl("provision", "-f", str(EXAMPLE), "--workdir", str(work), "--dry-run")
    assert code == 0, err
    assert victim.read_text() == "precious"
    assert json.loads((work / "terraform.tfvars.json").read_text())["cluster_name"] == "ml-prod"
