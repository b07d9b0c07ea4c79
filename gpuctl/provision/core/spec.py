"""The cluster spec (`kind: Cluster`): an EKS cluster (a new one in a new VPC, or an existing
one), its GPU node groups, the GPU software stack and how the groups scale.

Parsed strictly: unknown keys, bad names and impossible sizes are rejected with the file,
the line and the field, before anything is sent anywhere.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuctl.common import k8s_names
from gpuctl.common.errors import UsageError
from gpuctl.common.k8s_names import DEFAULT_GPU_LABEL_KEY, LABEL_KEY, LABEL_VALUE
from gpuctl.common.spec_fields import (
    FLAG,
    INTEGER,
    MAPPING,
    MAPPINGS,
    NAME,
    STRINGS,
    TEXT,
    TEXT_OR_MAPPING,
    Field,
    Refusal,
    Rule,
    Table,
)
from gpuctl.common.specfile import Doc, Fields
from gpuctl.gpus import vendor_models as vm

API_VERSION = "gpuctl/v1"
KIND = "Cluster"
DEFAULT_TAINT = "nvidia.com/gpu=present:NoSchedule"
# A Trainium or Inferentia group's, which the Neuron Helm chart's device plugin tolerates
# (aws-neuron/neuron-helm-charts charts/neuron-helm-chart/values.yaml, devicePlugin.tolerations).
NEURON_TAINT = "aws.amazon.com/neuron=present:NoSchedule"
MAX_GROUP_NAME = 40  # becomes part of ASG, launch template and IAM names
MAX_GROUP_SIZE = 1000  # an Auto Scaling group's own limit is higher; a typo is likelier
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# Whole-text patterns (fullmatch); the JSON Schema states them too.
REGION = r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}"
EKS_NAME = r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}"
INSTANCE_TYPE = r"[a-z][a-z0-9-]{0,15}\.[a-z0-9]{1,16}"
# S3's general purpose bucket naming rules: 3-63 of a-z 0-9 . -, a letter or digit at each
# end, no "..", not an IP address, none of the prefixes and suffixes S3 reserves.
S3_BUCKET = (
    r"(?![0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$)(?!xn--|sthree-|amzn-s3-demo-)"
    r"(?![a-z0-9.-]*(?:-s3alias|--ol-s3|[.]mrap|--x-s3|--table-s3)$)"
    r"(?![a-z0-9.-]*[.][.])[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
)
DYNAMO_TABLE = r"[A-Za-z0-9_.-]{3,255}"
K8S_VERSION = r"1\.[0-9]{1,2}"
RESERVATION_ID = r"cr-[0-9a-f]{8,17}"
_REGION = re.compile(REGION)
TAINT = rf"{LABEL_KEY}(={LABEL_VALUE})?:({'|'.join(TAINT_EFFECTS)})"
# a label key outside the kubernetes.io / k8s.io namespaces the kubelet may not set
_SUBDOMAIN_OF = r"([-a-z0-9.]*\.)?"
GPU_LABEL_KEY = (
    rf"(?!(?!{_SUBDOMAIN_OF}(node|kubelet)\.kubernetes\.io/){_SUBDOMAIN_OF}(kubernetes|k8s)\.io/)"
    + LABEL_KEY
)
EKS_NAME_RULE = Rule(
    EKS_NAME,
    "an EKS cluster name: letters, digits, '-' and '_', starting with a letter or digit, "
    "at most 100",
)
VERSION_RULE = Rule(K8S_VERSION, 'a Kubernetes minor version (e.g. "1.31")')
RESERVATION_ID_RULE = Rule(RESERVATION_ID, "a capacity reservation id (cr-0123456789abcdef0)")


def _kubelet_refusal(key: str) -> Refusal | None:
    if not k8s_names.label_key(key) or not _kubelet_refuses(key):
        return None  # the noun says it
    return Refusal(
        f"{key!r} is in a kubernetes.io / k8s.io namespace the kubelet may not set on its "
        "node: the nodes would never join",
        hint="use a key like gpu-type, nvidia.com/gpu.product or node.kubernetes.io/gpu-type",
    )


# Principals an EKS access entry takes: IAM users and roles (not an STS assumed-role session).
_PRINCIPAL = re.compile(r"^arn:aws(-[a-z]+)*:iam::\d{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}\Z")

GPU_STACKS = ("gpu-operator", "device-plugin", "none")
MIG_STRATEGIES = ("none", "single", "mixed")
AUTOSCALERS = ("cluster-autoscaler", "karpenter")
ENDPOINT_ACCESS = ("public-and-private", "private", "public")
RESERVATION_TYPES = ("on-demand", "capacity-block")
# Where the cluster add-ons run (CoreDNS, the GPU Operator's controller, Karpenter): the GPU
# nodes are tainted, so a new cluster gets a small untainted managed node group.
DEFAULT_SYSTEM_INSTANCE_TYPE = "m6i.large"
DEFAULT_SYSTEM_NODES = 2
# Fields that describe a cluster gpuctl creates; an existing cluster keeps its own.
_CREATE_ONLY = ("endpoint_access", "public_access_cidrs", "admin_principals", "system_nodes")


SYSTEM_NODES = Table(
    Field("instance_type", TEXT, "Their EC2 instance type.",
          default=DEFAULT_SYSTEM_INSTANCE_TYPE,
          pattern=Rule(INSTANCE_TYPE, "an EC2 instance type (e.g. m6i.large)")),
    Field("count", INTEGER, "How many.", default=DEFAULT_SYSTEM_NODES, minimum=1, maximum=20),
)  # fmt: skip
KUBERNETES_CLUSTER = Table(
    Field("name", TEXT, "The EKS cluster's name (default: the spec's name); with no create: "
          "an existing cluster.", pattern=EKS_NAME_RULE),
    Field("create", FLAG, "Create it (default: true unless name is given)."),
    Field("version", TEXT, 'A new cluster\'s Kubernetes version, quoted: "1.33".',
          pattern=VERSION_RULE),
    Field("endpoint_access", TEXT, "New cluster: where its API endpoint is reachable from.",
          default="public-and-private", choices=ENDPOINT_ACCESS),
    Field("public_access_cidrs", STRINGS, "New cluster: IPv4 networks that reach the public "
          "endpoint.", non_empty=True),
    Field("admin_principals", STRINGS, "New cluster: IAM role or user ARNs made admins."),
    Field("system_nodes", MAPPING, "New cluster: the small untainted node group for add-ons.",
          fields=SYSTEM_NODES),
)  # fmt: skip
RESERVATION = Table(
    Field("id", TEXT, "The reservation's id.", required=True, pattern=RESERVATION_ID_RULE),
    Field("type", TEXT, "An On-Demand Capacity Reservation or a Capacity Block for ML.",
          default="on-demand", choices=RESERVATION_TYPES),
)  # fmt: skip
NODE_GROUP = Table(
    Field("name", NAME, "The group's name (at most 40 characters).", required=True,
          maximum=MAX_GROUP_NAME),
    Field("instance_type", TEXT, "Its EC2 instance type, e.g. p5.48xlarge.", required=True,
          pattern=Rule(INSTANCE_TYPE, "an EC2 instance type (e.g. p4d.24xlarge)")),
    Field("min_size", INTEGER, "Fewest nodes.", required=True, minimum=0, maximum=MAX_GROUP_SIZE),
    Field("max_size", INTEGER, "Most nodes.", required=True, minimum=1, maximum=MAX_GROUP_SIZE),
    Field("desired_size", INTEGER, "Nodes to start with (default: min_size).",
          minimum=0, maximum=MAX_GROUP_SIZE),
    Field("gpu_type", TEXT, "The nodes' GPU-type label value, e.g. h100.", required=True,
          pattern=Rule(LABEL_VALUE, "a valid label value: letters, digits, '-', '_' and '.', "
                       "at most 63")),
    Field("capacity_type", TEXT, "How the nodes are bought.", default="on-demand",
          choices=("on-demand", "spot")),
    Field("taints", STRINGS, "KEY[=VALUE]:EFFECT taints on the nodes (default: "
          f"{DEFAULT_TAINT}; Trainium and Inferentia: {NEURON_TAINT}).", default=(DEFAULT_TAINT,),
          pattern=Rule(TAINT, "a taint: KEY[=VALUE]:EFFECT with EFFECT one of "
                       + ", ".join(TAINT_EFFECTS)), at_entry=True),
    Field("efa", FLAG, "Elastic Fabric Adapter interfaces on every node (default: yes on "
          "Trainium instance types that have them, else no).", default=False),
    Field("capacity_reservation", TEXT_OR_MAPPING, "A capacity reservation id (cr-…), or "
          "{id, type}.", pattern=RESERVATION_ID_RULE, fields=RESERVATION),
)  # fmt: skip
STATE = Table(
    Field("s3_bucket", TEXT, "The S3 bucket of the Terraform state.", required=True,
          pattern=Rule(S3_BUCKET, "an S3 bucket name")),
    Field("dynamodb_table", TEXT, "The DynamoDB table of its lock.", required=True,
          pattern=Rule(DYNAMO_TABLE, "a DynamoDB table name")),
    Field("key", TEXT, "The state's object key (default: gpuctl/NAME/terraform.tfstate)."),
    Field("region", TEXT, "The bucket's region (default: the cluster's).",
          pattern=Rule(REGION, "an AWS region name")),
)  # fmt: skip
CLUSTER = Table(
    Field("apiVersion", TEXT, "The cluster spec's version.", required=True,
          choices=(API_VERSION,)),
    Field("kind", TEXT, "Always Cluster.", required=True, choices=(KIND,)),
    Field("name", NAME, "The cluster spec's name.", required=True),
    Field("region", TEXT, "The AWS region (default: --region, AWS_REGION or the AWS profile's).",
          pattern=Rule(REGION, "an AWS region name (e.g. us-east-1)")),
    Field("vpc_cidr", TEXT, "A new cluster's new VPC, /16 to /20, e.g. 10.0.0.0/16."),
    Field("kubernetes_cluster", TEXT_OR_MAPPING, "A new cluster ({version: \"1.33\"}) or an "
          "existing one (its name).", required=True, pattern=EKS_NAME_RULE,
          fields=KUBERNETES_CLUSTER),
    Field("gpu_stack", TEXT, "The NVIDIA GPU software gpuctl installs (default: gpu-operator; "
          "none where no group has NVIDIA GPUs).", default="gpu-operator",
          choices=GPU_STACKS),
    Field("mig_strategy", TEXT, "How MIG slices are advertised (mixed: nvidia.com/mig-PROFILE).",
          default="mixed", choices=MIG_STRATEGIES),
    Field("autoscaler", TEXT, "What scales the GPU nodes.", default="cluster-autoscaler",
          choices=AUTOSCALERS),
    Field("gpu_label_key", TEXT, "The node label that holds the GPU type.",
          default=DEFAULT_GPU_LABEL_KEY,
          pattern=Rule(GPU_LABEL_KEY, "a Kubernetes label key", why=_kubelet_refusal)),
    Field("node_groups", MAPPINGS, "The GPU node groups.", required=True, minimum=1,
          fields=NODE_GROUP),
    Field("state", MAPPING, "Terraform state in S3 (default: local, per cluster).",
          fields=STATE),
)  # fmt: skip


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(frozen=True)
class CapacityReservation:
    id: str
    type: str  # "on-demand" (an On-Demand Capacity Reservation) or "capacity-block"


@dataclass(frozen=True)
class NodeGroup:
    name: str
    instance_type: str
    min_size: int
    max_size: int
    desired_size: int
    gpu_type: str
    capacity_type: str  # "on-demand" or "spot"
    taints: tuple[Taint, ...]
    efa: bool = False
    capacity_reservation: CapacityReservation | None = None

    @property
    def neuron(self) -> str | None:
        """The group's Neuron device (Trainium2, Inferentia2, …); None for GPU instances."""
        return neuron_device(self.instance_type)


def neuron_device(instance_type: str) -> str | None:
    """The AWS Neuron device of an instance type (gpuctl.gpus.vendor_models' table)."""
    row = vm.instance({vm.INSTANCE_TYPE: instance_type})
    return row[0] if row and vm.models().get(row[0]) == "aws" else None


def _trainium_efa(instance_type: str) -> bool:
    """EFA by default on a Trainium instance type that has it (trn1.32xlarge, trn1n, trn2):
    their training is multi-node by design."""
    row = vm.instance({vm.INSTANCE_TYPE: instance_type})
    return bool(row and row[0].startswith("Trainium") and row[3])


def neuron_devices(instance_type: str) -> int | None:
    """Neuron devices per instance of a Trainium or Inferentia type; None for others."""
    row = vm.instance({vm.INSTANCE_TYPE: instance_type})
    return row[1] if row and neuron_device(instance_type) else None


@dataclass(frozen=True)
class SystemNodes:
    instance_type: str = DEFAULT_SYSTEM_INSTANCE_TYPE
    count: int = DEFAULT_SYSTEM_NODES


@dataclass(frozen=True)
class KubernetesCluster:
    """The EKS cluster: one gpuctl creates (`create`), or an existing one the nodes join."""

    name: str
    create: bool
    version: str | None = None  # existing cluster: None reads its version at preflight
    endpoint_access: str = "public-and-private"
    public_access_cidrs: tuple[str, ...] = ("0.0.0.0/0",)
    admin_principals: tuple[str, ...] = ()
    system_nodes: SystemNodes = SystemNodes()


@dataclass(frozen=True)
class StateBackend:
    s3_bucket: str
    dynamodb_table: str
    key: str
    region: str


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    region: str
    vpc_cidr: str | None  # None for an existing cluster: its nodes go into its own VPC
    cluster: KubernetesCluster
    node_groups: tuple[NodeGroup, ...]
    gpu_stack: str = "gpu-operator"
    mig_strategy: str = "mixed"  # what `gpuctl submit` asks for: nvidia.com/mig-<profile>
    autoscaler: str = "cluster-autoscaler"
    gpu_label_key: str = DEFAULT_GPU_LABEL_KEY
    state: StateBackend | None = None
    file: str = field(default="<input>", compare=False)

    @property
    def kubernetes_cluster(self) -> str:
        return self.cluster.name

    @property
    def kubernetes_version(self) -> str | None:
        return self.cluster.version

    @property
    def instance_types(self) -> list[str]:
        return sorted({g.instance_type for g in self.node_groups})


def parse_cluster(
    doc: Doc,
    region: str | None = None,
    default_region: Callable[[], tuple[str, str] | None] | None = None,
) -> ClusterSpec:
    """REGION (--region) must agree with the spec's `region:` where it writes one, and is the
    region where it does not; else what DEFAULT_REGION() gives: (region, where it came from:
    AWS_REGION, an AWS profile, …), asked only then, after the spec's kind and fields were
    checked (reading AWS settings needs the `aws` extra)."""
    root = doc.root()
    if root.has("kubernetes_version"):
        raise root.error(
            "kubernetes_version",
            "moved: write it as kubernetes_cluster.version",
            hint='e.g. kubernetes_cluster: {name: my-eks, version: "1.31"}',
        )
    root.read(CLUSTER["apiVersion"])
    root.read(CLUSTER["kind"])  # a job spec is named as one, before its fields
    root.reject_unknown(CLUSTER)
    name = root.read(CLUSTER["name"])
    region = _region(root, region, default_region)
    cluster = _kubernetes_cluster(root, name)
    vpc_cidr = _vpc_cidr(root, cluster)
    gpu_stack = root.read(CLUSTER["gpu_stack"])
    if gpu_stack == "none" and root.has("mig_strategy"):
        raise root.error(
            "mig_strategy",
            "the MIG strategy is a setting of the GPU stack gpuctl installs, and gpu_stack is none",
        )
    mig_strategy = root.read(CLUSTER["mig_strategy"])
    autoscaler = root.read(CLUSTER["autoscaler"])
    label_key = root.read(CLUSTER["gpu_label_key"])
    if not isinstance(root.raw("node_groups"), list) or not root.raw("node_groups"):
        if root.has("node_groups") and not isinstance(root.raw("node_groups"), list):
            raise root.error("node_groups", "expected a list of node groups")
        raise root.error(
            "node_groups" if root.has("node_groups") else None,
            "at least one node group is required",
        )
    groups = []
    seen: dict[str, int | None] = {}  # node group name -> its line
    for g in root.list_of_maps("node_groups"):
        group = _node_group(g, autoscaler)
        if group.name in seen:
            raise g.error(
                "name",
                f"duplicate node group name {group.name!r} (first at line {seen[group.name]})",
            )
        seen[group.name] = g.doc.line(g.path + ("name",))
        groups.append(group)
    gpu_stack = _stack_for(root, gpu_stack, groups)
    return ClusterSpec(
        name=name,
        region=region,
        vpc_cidr=vpc_cidr,
        cluster=cluster,
        node_groups=tuple(groups),
        gpu_stack=gpu_stack,
        mig_strategy=mig_strategy,
        autoscaler=autoscaler,
        gpu_label_key=label_key,
        state=_state(root, name, region),
        file=doc.file,
    )


def _stack_for(root: Fields, gpu_stack: str, groups: list[NodeGroup]) -> str:
    """The NVIDIA stack to install: none where every group is Trainium or Inferentia (their
    Neuron device plugin is installed for them whatever the stack); asked for there, refused."""
    if gpu_stack == "none" or any(g.neuron is None for g in groups):
        return gpu_stack
    if root.has("gpu_stack"):
        which = ", ".join(f"{g.name} ({g.instance_type}: {g.neuron})" for g in groups)
        raise root.error(
            "gpu_stack",
            f"{gpu_stack} is NVIDIA's GPU software, and no node group has NVIDIA GPUs: "
            f"{which} have AWS Neuron devices",
            hint="remove gpu_stack (or set none): gpuctl installs the Neuron device plugin's "
            "Helm chart for Trainium and Inferentia groups",
        )
    return "none"


def _kubernetes_cluster(root: Fields, spec_name: str) -> KubernetesCluster:
    """`kubernetes_cluster`: an existing cluster's name, or a mapping. By default gpuctl
    creates a new cluster (named like the spec); `name` without `create` is an existing one."""
    value = root.raw("kubernetes_cluster")
    if value is None:
        raise root.error(
            None,
            "missing required field 'kubernetes_cluster'",
            hint='a new cluster: kubernetes_cluster: {version: "1.33"}; '
            "an existing one: kubernetes_cluster: {name: my-eks}",
        )
    if isinstance(value, str):
        return KubernetesCluster(name=root.read(CLUSTER["kubernetes_cluster"]), create=False)
    kc = root.child("kubernetes_cluster")
    assert kc is not None  # a mapping, or child() raised
    kc.reject_unknown(KUBERNETES_CLUSTER)
    create = kc.read(KUBERNETES_CLUSTER["create"], not kc.has("name"))
    if not create:
        if not kc.has("name"):
            raise kc.error(None, "name the existing EKS cluster (name: …), or drop create: false")
        for key in _CREATE_ONLY:
            if kc.has(key):
                raise kc.error(
                    key,
                    "applies only to a cluster gpuctl creates (create: true); "
                    "an existing cluster keeps its own",
                )
    name = kc.read(KUBERNETES_CLUSTER["name"], spec_name)
    version = _plain_version(kc, required=create)
    if not create:
        return KubernetesCluster(name=name, create=False, version=version)
    access = kc.read(KUBERNETES_CLUSTER["endpoint_access"])
    cidrs = tuple(_public_cidrs(kc)) if kc.has("public_access_cidrs") else ("0.0.0.0/0",)
    if access == "private" and kc.has("public_access_cidrs"):
        raise kc.error("public_access_cidrs", "the endpoint is private: there is no public access")
    principals = kc.read(KUBERNETES_CLUSTER["admin_principals"], [])
    for i, arn in enumerate(principals):
        if not _PRINCIPAL.fullmatch(arn):
            raise kc.doc.error(
                kc.path + ("admin_principals", i),
                f"{arn!r} is not an IAM role or user ARN (arn:aws:iam::ACCOUNT:role/NAME)",
                hint="EKS access entries take IAM roles and users, not STS session ARNs",
            )
    if len(set(principals)) != len(principals):
        raise kc.error("admin_principals", "the same principal appears twice")
    return KubernetesCluster(
        name=name,
        create=True,
        version=version,
        endpoint_access=access,
        public_access_cidrs=cidrs,
        admin_principals=tuple(principals),
        system_nodes=_system_nodes(kc),
    )


def _public_cidrs(kc: Fields) -> list[str]:
    out = []
    for i, text in enumerate(kc.read(KUBERNETES_CLUSTER["public_access_cidrs"])):
        try:
            net = ipaddress.ip_network(text, strict=True)
        except ValueError as e:
            raise kc.doc.error(
                kc.path + ("public_access_cidrs", i), f"{text!r} is not a CIDR ({e})"
            ) from None
        if net.version != 4:
            raise kc.doc.error(kc.path + ("public_access_cidrs", i), "must be an IPv4 CIDR")
        out.append(str(net))
    return out


def _system_nodes(kc: Fields) -> SystemNodes:
    sn = kc.child("system_nodes")
    if sn is None:
        return SystemNodes()
    sn.reject_unknown(SYSTEM_NODES)
    return SystemNodes(sn.read(SYSTEM_NODES["instance_type"]), sn.read(SYSTEM_NODES["count"]))


def _vpc_cidr(root: Fields, cluster: KubernetesCluster) -> str | None:
    if not cluster.create:
        if root.has("vpc_cidr"):
            raise root.error(
                "vpc_cidr",
                f"the GPU nodes of the existing cluster {cluster.name!r} go into that "
                "cluster's own VPC and subnets; gpuctl creates no VPC for it",
                hint="remove vpc_cidr, or set kubernetes_cluster.create: true for a new "
                "cluster in a new VPC",
            )
        return None
    if not root.has("vpc_cidr"):
        raise root.error(
            None,
            "missing required field 'vpc_cidr' (the new cluster's VPC)",
            hint="e.g. vpc_cidr: 10.0.0.0/16; for GPU nodes in an existing cluster's "
            "network: kubernetes_cluster: {name: EXISTING}",
        )
    text = root.read(CLUSTER["vpc_cidr"])
    try:
        net = ipaddress.ip_network(text, strict=True)
    except ValueError as e:
        raise root.error("vpc_cidr", f"{text!r} is not a network in CIDR form ({e})") from None
    if net.version != 4:
        raise root.error("vpc_cidr", "must be an IPv4 network (AWS VPCs take an IPv4 primary CIDR)")
    # One /N+4 private subnet per zone and a /N+8 public one for the NAT gateway: the
    # public ones must stay at /28 or larger, the smallest subnet AWS allows.
    if not 16 <= net.prefixlen <= 20:
        raise root.error(
            "vpc_cidr",
            f"prefix length must be between /16 and /20 (got /{net.prefixlen})",
            hint="gpuctl cuts one private subnet per zone (/prefix+4) and a small "
            "public one (/prefix+8) for NAT",
        )
    return str(net)


def _plain_version(fields: Fields, required: bool) -> str | None:
    value = fields.raw("version")
    if value is None:
        if required:
            raise fields.error(
                None,
                "missing required field 'version' (the Kubernetes version of the new cluster, "
                'e.g. "1.33"; it also picks the GPU AMI)',
            )
        return None
    if isinstance(value, float):  # unquoted, YAML reads 1.30 as the number 1.3
        raise fields.error(
            "version",
            f'write the version in quotes, e.g. "{value}" (unquoted, 1.30 reads as the number 1.3)',
        )
    # not text: a number (or a list) is no version either, said in the rule's words
    if not isinstance(value, str) or VERSION_RULE.refusal(value):
        raise fields.error("version", f"{value!r} is not {VERSION_RULE.noun}")
    return value


def _node_group(g: Fields, autoscaler: str) -> NodeGroup:
    g.reject_unknown(NODE_GROUP)
    name = g.read(NODE_GROUP["name"])
    if len(name) > MAX_GROUP_NAME:
        raise g.error("name", f"must be at most {MAX_GROUP_NAME} characters (got {len(name)})")
    itype = g.read(NODE_GROUP["instance_type"])
    min_size = g.read(NODE_GROUP["min_size"])
    max_size = g.read(NODE_GROUP["max_size"])
    if min_size > max_size:
        raise g.error("min_size", f"min_size ({min_size}) is larger than max_size ({max_size})")
    desired = g.read(NODE_GROUP["desired_size"], min_size)
    if not min_size <= desired <= max_size:
        raise g.error(
            "desired_size",
            f"must be between min_size ({min_size}) and max_size ({max_size}) (got {desired})",
        )
    gpu_type = g.read(NODE_GROUP["gpu_type"])
    capacity = g.read(NODE_GROUP["capacity_type"])
    default = (NEURON_TAINT,) if neuron_device(itype) else (DEFAULT_TAINT,)
    taints = [_taint(text) for text in g.read(NODE_GROUP["taints"], default)]
    keys = [(t.key, t.effect) for t in taints]
    if len(set(keys)) != len(keys):
        raise g.error("taints", "the same key and effect appear twice")
    reservation = _reservation(g)
    if reservation is not None and capacity == "spot":
        raise g.error(
            "capacity_type",
            "a capacity reservation holds On-Demand capacity; spot cannot use it",
        )
    if autoscaler == "karpenter":
        for key in ("min_size", "desired_size"):
            if g.raw(key, 0) != 0:
                raise g.error(
                    key,
                    "Karpenter launches nodes for pending pods and keeps no minimum; set 0",
                    hint="or use autoscaler: cluster-autoscaler for Auto Scaling groups "
                    "with a minimum size",
                )
    return NodeGroup(
        name=name,
        instance_type=itype,
        min_size=min_size,
        max_size=max_size,
        desired_size=desired,
        gpu_type=gpu_type,
        capacity_type=capacity,
        taints=tuple(taints),
        efa=g.read(NODE_GROUP["efa"], _trainium_efa(itype)),
        capacity_reservation=reservation,
    )


def _reservation(g: Fields) -> CapacityReservation | None:
    """`capacity_reservation: cr-…` (an On-Demand Capacity Reservation) or
    `{id: cr-…, type: on-demand|capacity-block}`."""
    value = g.raw("capacity_reservation")
    if value is None:
        return None
    if isinstance(value, str):
        return CapacityReservation(g.read(NODE_GROUP["capacity_reservation"]), "on-demand")
    cr = g.child("capacity_reservation")
    assert cr is not None  # a mapping, or child() raised
    cr.reject_unknown(RESERVATION)
    rtype = cr.read(RESERVATION["type"])
    return CapacityReservation(cr.read(RESERVATION["id"]), rtype)


def parse_taint(text: str) -> Taint | None:
    head, sep, effect = text.rpartition(":")
    if not sep or effect not in TAINT_EFFECTS:
        return None
    key, _, value = head.partition("=")
    if not k8s_names.label_key(key) or not k8s_names.label_value(value):
        return None
    return Taint(key, value, effect)


def _taint(text: str) -> Taint:
    """A taint the row's pattern (TAINT) took."""
    taint = parse_taint(text)
    if taint is None:
        raise ValueError(f"{text!r}: TAINT and parse_taint disagree")
    return taint


def _kubelet_refuses(key: str) -> bool:
    # kubelet --node-labels: kubernetes.io / k8s.io namespaces are reserved except these
    prefix = key.rpartition("/")[0]
    reserved = any(prefix == d or prefix.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
    allowed = any(
        prefix == d or prefix.endswith("." + d)
        for d in ("node.kubernetes.io", "kubelet.kubernetes.io")
    )
    return reserved and not allowed


def _region(
    root: Fields, option: str | None, default: Callable[[], tuple[str, str] | None] | None
) -> str:
    written = root.read(CLUSTER["region"])
    if option is not None and not _REGION.fullmatch(option):
        raise UsageError(f"--region {option!r} is not an AWS region name (e.g. us-east-1)")
    if written is not None and option is not None and option != written:
        raise root.error(
            "region",
            f"the spec's region is {written}, --region says {option}",
            hint="a cluster lives in one region: drop --region, or the spec's region:",
        )
    chosen = written or option
    if chosen is not None:
        return chosen
    found = default() if default else None
    if found is None:
        raise root.error(
            None,
            "no AWS region: write region: in the spec, or give --region, AWS_REGION or an "
            "AWS profile with a region",
        )
    value, where = found
    if not _REGION.fullmatch(value):
        raise UsageError(f"{value!r} (from {where}) is not an AWS region name (e.g. us-east-1)")
    return value


def _state(root: Fields, name: str, region: str) -> StateBackend | None:
    st = root.child("state")
    if st is None:
        return None
    st.reject_unknown(STATE)
    bucket = st.read(STATE["s3_bucket"])
    table = st.read(STATE["dynamodb_table"])
    key = st.read(STATE["key"], f"gpuctl/{name}/terraform.tfstate")
    if key.startswith("/") or any(ord(c) < 32 for c in key) or len(key) > 1024:
        raise st.error("key", f"{key!r} is not a usable S3 object key")
    state_region = st.read(STATE["region"], region)  # the cluster's region is checked
    return StateBackend(bucket, table, key, state_region)
