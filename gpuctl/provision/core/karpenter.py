"""Karpenter objects for the GPU node groups (`autoscaler: karpenter`): one NodePool
(karpenter.sh/v1) and one EC2NodeClass (karpenter.k8s.aws/v1) per group.

Shaped after aws/karpenter-provider-aws v1.14.1 (`pkg/apis/crds/`; the tests validate every
object against those CRDs). Pure: the spec and what the preflight found come in, plain dicts
go out.
"""

from __future__ import annotations

from typing import Any

from gpuctl.provision.core.facts import Facts, GroupFacts
from gpuctl.provision.core.spec import ClusterSpec, NodeGroup

CHART = "oci://public.ecr.aws/karpenter/karpenter"
VERSION = "1.14.1"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "karpenter"  # the Pod Identity association names it (terraform/ karpenter)
DISCOVERY_TAG = "karpenter.sh/discovery"  # on the new cluster's private subnets and node SG
GROUP_SG_TAG = "gpuctl/node-group"  # on each group's own security group (EFA: self-referencing)
CONSOLIDATE_AFTER = "10m"  # an empty GPU node idles this long before Karpenter removes it
DISRUPTION_BUDGET = "10%"  # of a pool's nodes that Karpenter may take down at once
ROOT_VOLUME = "200Gi"  # GPU images and container layers are large (as the ASG path)


def node_role_name(spec: ClusterSpec) -> str:
    """The IAM role of Karpenter's nodes (at most 64 characters, as IAM allows); Terraform's
    karpenter module creates it under this exact name."""
    return f"{spec.name[:40]}-karpenter-node"


def queue_name(spec: ClusterSpec) -> str:
    """The SQS queue of spot interruption and rebalance events Karpenter listens to."""
    return f"{spec.name}-karpenter"


def pool_name(spec: ClusterSpec, group: NodeGroup) -> str:
    return f"{spec.name}-{group.name}"


def placement_group_name(spec: ClusterSpec, group: NodeGroup) -> str:
    """The cluster placement group of an EFA group (terraform/ creates it by this name)."""
    return f"{spec.name}-{group.name}"


def chart_values(spec: ClusterSpec) -> dict[str, Any]:
    """Values of the Karpenter Helm chart (keys of charts/karpenter/values.yaml at v1.14.1)."""
    return {
        "settings": {
            "clusterName": spec.kubernetes_cluster,
            "interruptionQueue": queue_name(spec),
        },
        "serviceAccount": {"name": SERVICE_ACCOUNT},
        # Karpenter must not run on the nodes it manages: the system nodes (a new cluster)
        # or the existing cluster's own nodes; the GPU taints keep it off the GPU nodes.
        "dnsPolicy": "Default",
    }


def objects(spec: ClusterSpec, facts: Facts) -> list[dict[str, Any]]:
    """EC2NodeClass + NodePool per node group, in that order (a NodePool names its class).
    Empty for an existing cluster the preflight has not read: its subnets and security
    groups are not known yet."""
    if not spec.cluster.create and facts.network is None:
        return []
    out: list[dict[str, Any]] = []
    for g in spec.node_groups:
        gf = facts.groups.get(g.name, GroupFacts())
        out += [node_class(spec, g, gf, facts), node_pool(spec, g, gf)]
    return out


def node_class(spec: ClusterSpec, g: NodeGroup, gf: GroupFacts, facts: Facts) -> dict[str, Any]:
    cluster = spec.kubernetes_cluster
    if spec.cluster.create:
        subnets: list[dict[str, Any]] = [{"tags": {DISCOVERY_TAG: cluster}}]
        groups: list[dict[str, Any]] = [{"tags": {DISCOVERY_TAG: cluster}}]
    else:
        assert facts.network is not None
        subnets = [{"id": s} for s in gf.subnet_ids]
        groups = [{"id": sg} for sg in facts.network.security_group_ids]
    groups.append({"tags": {GROUP_SG_TAG: pool_name(spec, g)}})
    spec_: dict[str, Any] = {
        # The AMI the preflight resolved (EKS-optimized AL2023, its nvidia variant, or neuron
        # for Trainium and Inferentia), pinned like the Auto Scaling groups' launch
        # templates; without one, the alias tracks the latest and Karpenter takes the
        # variant an instance needs (amifamily/al2023.go: neuron where it has accelerators).
        "amiFamily": "AL2023",
        "amiSelectorTerms": [{"id": gf.ami_id}] if gf.ami_id else [{"alias": "al2023@latest"}],
        "role": node_role_name(spec),
        "subnetSelectorTerms": subnets,
        "securityGroupSelectorTerms": groups,
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/xvda",
                "rootVolume": True,
                "ebs": {
                    "volumeSize": ROOT_VOLUME,
                    "volumeType": "gp3",
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpTokens": "required",
            "httpPutResponseHopLimit": 2,
        },
        "tags": {"gpuctl/cluster": spec.name, GROUP_SG_TAG: g.name},
    }
    if g.efa:
        # Karpenter adds the EFA interfaces itself to a node launched for pods that request
        # vpc.amazonaws.com/efa; the placement group keeps those nodes close together.
        spec_["placementGroupSelector"] = {"name": placement_group_name(spec, g)}
    if g.capacity_reservation is not None:
        spec_["capacityReservationSelectorTerms"] = [{"id": g.capacity_reservation.id}]
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": pool_name(spec, g)},
        "spec": spec_,
    }


def device_resource(g: NodeGroup) -> str:
    """The extended resource a node of G advertises for its accelerators."""
    return "aws.amazon.com/neuron" if g.neuron else "nvidia.com/gpu"


def node_pool(spec: ClusterSpec, g: NodeGroup, gf: GroupFacts) -> dict[str, Any]:
    if g.capacity_reservation is not None:
        capacity = ["reserved"]  # ODCRs and Capacity Blocks
    else:
        capacity = [g.capacity_type]
    requirements: list[dict[str, Any]] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [g.instance_type]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity},
        # Trainium and Inferentia count their devices as accelerators, not GPUs
        {"key": f"karpenter.k8s.aws/instance-{'accelerator' if g.neuron else 'gpu'}-count",
         "operator": "Gt", "values": ["0"]},
    ]  # fmt: skip
    if gf.zones:
        requirements.append(
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(gf.zones)}
        )
    limits = {"nodes": str(g.max_size)}
    if gf.gpu_count:
        limits[device_resource(g)] = str(g.max_size * gf.gpu_count)
    taints = [
        {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}
        for t in g.taints
    ]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": pool_name(spec, g)},
        "spec": {
            "template": {
                "metadata": {
                    "labels": {spec.gpu_label_key: g.gpu_type, "gpuctl/node-group": g.name}
                },
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": pool_name(spec, g),
                    },
                    "requirements": requirements,
                    "taints": taints,
                    # A node that expires is drained even under a running training job;
                    # GPU nodes are replaced on drift (a new AMI) within the budget instead.
                    "expireAfter": "Never",
                },
            },
            "limits": limits,
            "disruption": {
                # Only empty nodes go: consolidating an underused GPU node would evict a job.
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": CONSOLIDATE_AFTER,
                "budgets": [{"nodes": DISRUPTION_BUDGET}],
            },
        },
    }
