"""Karpenter objects (autoscaler: karpenter) validated against the upstream CRDs of
aws/karpenter-provider-aws v1.14.1 (schema with unknown fields as errors, and CEL rules),
and what they promise: instance type, capacity type, GPU taint and label, GPU limit,
consolidation and disruption budget, EFA placement, reservations."""

from pathlib import Path

import pytest

from gpuctl.common.specfile import load_yaml
from gpuctl.provision.core import karpenter
from gpuctl.provision.core.facts import ExistingNetwork, Facts, GroupFacts
from gpuctl.provision.core.spec import parse_cluster
from tests.crd_schema import errors, read_crd

UPSTREAM = Path(__file__).parent / "upstream"
NODE_POOL = read_crd(UPSTREAM / "karpenter.sh_nodepools.yaml")
NODE_CLASS = read_crd(UPSTREAM / "karpenter.k8s.aws_ec2nodeclasses.yaml")
CRDS = {"NodePool": NODE_POOL, "EC2NodeClass": NODE_CLASS}

SPEC = """\
apiVersion: gpuctl/v1
kind: Cluster
name: ml-train
region: us-east-1
{cluster}
autoscaler: karpenter
gpu_label_key: nvidia.com/gpu.family
node_groups:
  - name: h100-efa
    instance_type: p5.48xlarge
    min_size: 0
    max_size: 8
    gpu_type: h100
    efa: true
    capacity_reservation: {{id: cr-0a1b2c3d4e5f67890, type: capacity-block}}
    taints: [nvidia.com/gpu=present:NoSchedule, dedicated:NoExecute]
  - name: a100-spot
    instance_type: p4d.24xlarge
    min_size: 0
    max_size: 4
    gpu_type: a100
    capacity_type: spot
"""
NEW = 'vpc_cidr: 10.20.0.0/16\nkubernetes_cluster: {version: "1.33"}'
EXISTING = "kubernetes_cluster: {name: ml-prod-eks}"
FACTS = Facts(
    "1.33",
    {
        "h100-efa": GroupFacts(("us-east-1a",), 8, "ami-0123456789abcdef0", 32, ("subnet-a",)),
        "a100-spot": GroupFacts(
            ("us-east-1a", "us-east-1b"), 8, None, None, ("subnet-a", "subnet-b")
        ),
    },
    network=ExistingNetwork("vpc-1", ("sg-cluster",)),
)


def spec(cluster=NEW):
    return parse_cluster(load_yaml(SPEC.format(cluster=cluster)))


def rendered(cluster=NEW, facts=FACTS):
    objs = karpenter.objects(spec(cluster), facts)
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


@pytest.mark.parametrize("cluster", [NEW, EXISTING], ids=["new-cluster", "existing-cluster"])
@pytest.mark.parametrize("facts", [FACTS, Facts()], ids=["after-preflight", "dry-run"])
def test_every_object_is_valid_under_the_upstream_crds(cluster, facts):
    objs = karpenter.objects(spec(cluster), facts)
    if cluster == EXISTING and facts.network is None:
        # an existing cluster's subnets and security group come from the preflight
        assert objs == []
        return
    assert [o["kind"] for o in objs] == ["EC2NodeClass", "NodePool"] * 2
    for o in objs:
        assert errors(o, CRDS[o["kind"]]) == [], o


def test_the_validator_refuses_what_the_api_server_would():
    """Control: the checks above fail where they should (unknown field, a CEL rule, a
    pattern), so their passing means something."""
    objs = rendered()
    pool = objs[("NodePool", "ml-train-h100-efa")]
    cls = objs[("EC2NodeClass", "ml-train-h100-efa")]
    bad = {**pool, "spec": {**pool["spec"], "limit": {"nodes": "1"}}}
    assert any("'limit' was unexpected" in e for e in errors(bad, NODE_POOL))
    both = {**cls, "spec": {**cls["spec"], "instanceProfile": "p"}}
    assert any("exactly one of ['role', 'instanceProfile']" in e for e in errors(both, NODE_CLASS))
    reqs = pool["spec"]["template"]["spec"]["requirements"]
    two = [dict(r, values=["0", "1"]) if r["operator"] == "Gt" else r for r in reqs]
    bad = {
        **pool,
        "spec": {
            **pool["spec"],
            "template": {"spec": {**pool["spec"]["template"]["spec"], "requirements": two}},
        },
    }
    assert any("single positive integer" in e for e in errors(bad, NODE_POOL))
    restricted = dict(pool["spec"]["template"]["metadata"]["labels"], **{"karpenter.sh/x": "y"})
    bad = {
        **pool,
        "spec": {
            **pool["spec"],
            "template": {**pool["spec"]["template"], "metadata": {"labels": restricted}},
        },
    }
    assert any('label domain "karpenter.sh" is restricted' in e for e in errors(bad, NODE_POOL))
    assert errors({**pool, "apiVersion": "karpenter.sh/v1beta1"}, NODE_POOL)


def test_a_node_pool_says_what_the_group_says():
    pool = rendered()[("NodePool", "ml-train-h100-efa")]["spec"]
    template = pool["template"]
    assert template["metadata"]["labels"] == {
        "nvidia.com/gpu.family": "h100",
        "gpuctl/node-group": "h100-efa",
    }
    assert template["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "effect": "NoExecute"},
    ]
    reqs = {r["key"]: (r["operator"], r["values"]) for r in template["spec"]["requirements"]}
    assert reqs["node.kubernetes.io/instance-type"] == ("In", ["p5.48xlarge"])
    assert reqs["karpenter.sh/capacity-type"] == ("In", ["reserved"])  # the Capacity Block
    assert reqs["karpenter.k8s.aws/instance-gpu-count"] == ("Gt", ["0"])
    assert reqs["topology.kubernetes.io/zone"] == ("In", ["us-east-1a"])
    # max_size nodes, and their GPUs (8 per p5.48xlarge)
    assert pool["limits"] == {"nodes": "8", "nvidia.com/gpu": "64"}
    assert pool["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "10m",
        "budgets": [{"nodes": "10%"}],
    }
    assert template["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "ml-train-h100-efa",
    }
    spot = rendered()[("NodePool", "ml-train-a100-spot")]["spec"]
    reqs = {r["key"]: r["values"] for r in spot["template"]["spec"]["requirements"]}
    assert reqs["karpenter.sh/capacity-type"] == ["spot"]
    assert spot["limits"] == {"nodes": "4", "nvidia.com/gpu": "32"}


def test_without_a_gpu_count_the_pool_is_still_bounded_by_nodes():
    pool = rendered(facts=Facts())[("NodePool", "ml-train-a100-spot")]["spec"]
    assert pool["limits"] == {"nodes": "4"}
    assert "topology.kubernetes.io/zone" not in str(pool["template"]["spec"]["requirements"])


def test_a_node_class_for_a_new_cluster_selects_by_discovery_tags():
    cls = rendered()[("EC2NodeClass", "ml-train-h100-efa")]["spec"]
    assert cls["role"] == karpenter.node_role_name(spec()) == "ml-train-karpenter-node"
    assert cls["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "ml-train"}}]
    assert cls["securityGroupSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "ml-train"}},
        {"tags": {"gpuctl/node-group": "ml-train-h100-efa"}},
    ]
    # the AMI the preflight resolved, pinned; EFA's placement group; the reservation
    assert cls["amiSelectorTerms"] == [{"id": "ami-0123456789abcdef0"}]
    assert cls["placementGroupSelector"] == {"name": "ml-train-h100-efa"}
    assert cls["capacityReservationSelectorTerms"] == [{"id": "cr-0a1b2c3d4e5f67890"}]
    other = rendered()[("EC2NodeClass", "ml-train-a100-spot")]["spec"]
    assert other["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert "placementGroupSelector" not in other and "capacityReservationSelectorTerms" not in other


def test_a_node_class_for_an_existing_cluster_names_its_subnets_and_security_group():
    cls = rendered(EXISTING)[("EC2NodeClass", "ml-train-a100-spot")]["spec"]
    assert cls["subnetSelectorTerms"] == [{"id": "subnet-a"}, {"id": "subnet-b"}]
    assert cls["securityGroupSelectorTerms"][0] == {"id": "sg-cluster"}


def test_chart_values_name_the_cluster_and_the_queue_terraform_creates():
    values = karpenter.chart_values(spec())
    assert values["settings"] == {
        "clusterName": "ml-train",
        "interruptionQueue": "ml-train-karpenter",
    }
    assert karpenter.queue_name(spec()) == "ml-train-karpenter"
    assert (
        len(
            karpenter.node_role_name(
                parse_cluster(
                    load_yaml(
                        SPEC.format(cluster=NEW).replace("name: ml-train", "name: " + "x" * 63)
                    )
                )
            )
        )
        <= 64
    )


def test_a_trainium_node_pool_selects_accelerators_and_limits_neuron_devices():
    text = SPEC.format(cluster=NEW).split("node_groups:")[0] + (
        "node_groups:\n"
        "  - {name: trn2, instance_type: trn2.48xlarge, min_size: 0, max_size: 4,"
        " gpu_type: trainium2}\n"
    )
    s = parse_cluster(load_yaml(text))
    facts = Facts("1.33", {"trn2": GroupFacts(("us-east-2a",), 16, None, 16)})
    objs = {o["kind"]: o for o in karpenter.objects(s, facts)}
    for o in objs.values():
        assert errors(o, CRDS[o["kind"]]) == [], o
    pool = objs["NodePool"]["spec"]
    reqs = {r["key"]: r for r in pool["template"]["spec"]["requirements"]}
    # Karpenter labels Neuron instances instance-accelerator-*, not instance-gpu-*
    assert reqs["karpenter.k8s.aws/instance-accelerator-count"]["values"] == ["0"]
    assert "karpenter.k8s.aws/instance-gpu-count" not in reqs
    assert pool["limits"] == {"nodes": "4", "aws.amazon.com/neuron": "64"}
    assert pool["template"]["spec"]["taints"] == [
        {"key": "aws.amazon.com/neuron", "effect": "NoSchedule", "value": "present"}
    ]


@pytest.mark.parametrize(
    ("itype", "devices"), [("trn1.32xlarge", 16), ("trn2.48xlarge", 16), ("inf2.48xlarge", 12)]
)
def test_a_neuron_group_gets_a_node_pool_and_a_node_class_of_the_neuron_ami(itype, devices):
    """Trainium and Inferentia groups get their own NodePool (the Neuron taint, Karpenter's
    accelerator-count label, a limit in aws.amazon.com/neuron) and an AL2023 EC2NodeClass:
    the Neuron AMI the preflight pinned, else the alias al2023@latest, from which Karpenter
    takes the neuron variant for an instance with accelerators (aws/karpenter-provider-aws
    pkg/providers/amifamily/al2023.go: x86_64 variants standard, nvidia, neuron; types.go:
    the neuron variant requires instance-accelerator-count to exist)."""
    text = SPEC.format(cluster=NEW).split("node_groups:")[0] + (
        f"node_groups:\n  - {{name: neuron, instance_type: {itype}, min_size: 0, max_size: 2,"
        " gpu_type: neuron}\n"
    )
    s = parse_cluster(load_yaml(text))
    for ami in (None, "ami-0fedcba9876543210"):
        facts = Facts("1.33", {"neuron": GroupFacts(("us-east-1a",), devices, ami, None)})
        objs = {o["kind"]: o for o in karpenter.objects(s, facts)}
        for o in objs.values():
            assert errors(o, CRDS[o["kind"]]) == [], o
        node_class = objs["EC2NodeClass"]["spec"]
        assert node_class["amiFamily"] == "AL2023"
        assert node_class["amiSelectorTerms"] == ([{"id": ami}] if ami else [{"alias": "al2023@latest"}])  # fmt: skip
        pool = objs["NodePool"]["spec"]
        assert pool["template"]["spec"]["nodeClassRef"]["name"] == objs["EC2NodeClass"]["metadata"]["name"]  # fmt: skip
        reqs = {r["key"]: r["values"] for r in pool["template"]["spec"]["requirements"]}
        assert reqs["node.kubernetes.io/instance-type"] == [itype]
        assert reqs["karpenter.k8s.aws/instance-accelerator-count"] == ["0"]  # Gt 0
        assert pool["template"]["spec"]["taints"] == [
            {"key": "aws.amazon.com/neuron", "effect": "NoSchedule", "value": "present"}
        ]
        assert pool["limits"] == {"nodes": "2", "aws.amazon.com/neuron": str(2 * devices)}
