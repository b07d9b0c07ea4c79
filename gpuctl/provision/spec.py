"""The cluster spec (`kind: Cluster`): a VPC and GPU node groups that join an EKS cluster.

Parsed strictly: unknown keys, bad names and impossible sizes are rejected with the file,
the line and the field, before anything is sent anywhere.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from gpuctl.common import k8s_names
from gpuctl.common.k8s_names import DEFAULT_GPU_LABEL_KEY
from gpuctl.common.specfile import Doc, Fields, load_yaml_file

API_VERSION = "gpuctl/v1"
KIND = "Cluster"
DEFAULT_TAINT = "nvidia.com/gpu=present:NoSchedule"
MAX_GROUP_SIZE = 1000  # an Auto Scaling group's own limit is higher; a typo is likelier
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}\Z")
_EKS_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}\Z")
_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]{0,15}\.[a-z0-9]{1,16}\Z")
_S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
_DYNAMO_TABLE = re.compile(r"^[A-Za-z0-9_.-]{3,255}\Z")
_K8S_VERSION = re.compile(r"^1\.\d{1,2}\Z")


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
class NodeGroup:
    name: str
    instance_type: str
    min_size: int
    max_size: int
    desired_size: int
    gpu_type: str
    capacity_type: str  # "on-demand" or "spot"
    taints: tuple[Taint, ...]


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
    vpc_cidr: str
    kubernetes_cluster: str
    node_groups: tuple[NodeGroup, ...]
    kubernetes_version: str | None = None  # None: read from the EKS cluster at preflight
    gpu_label_key: str = DEFAULT_GPU_LABEL_KEY
    state: StateBackend | None = None
    file: str = field(default="<input>", compare=False)

    @property
    def instance_types(self) -> list[str]:
        return sorted({g.instance_type for g in self.node_groups})


def load_cluster_file(path: str) -> ClusterSpec:
    return parse_cluster(load_yaml_file(path))


def parse_cluster(doc: Doc) -> ClusterSpec:
    root = doc.root()
    root.reject_unknown(
        (
            "apiVersion",
            "kind",
            "name",
            "region",
            "vpc_cidr",
            "kubernetes_cluster",
            "kubernetes_version",
            "gpu_label_key",
            "node_groups",
            "state",
        )
    )
    root.text("apiVersion", required=True, choices=(API_VERSION,))
    root.text("kind", required=True, choices=(KIND,))
    name = root.name("name", required=True)
    region = root.text("region", required=True)
    if not _REGION.match(region):
        raise root.error("region", f"{region!r} is not an AWS region name (e.g. us-east-1)")
    vpc_cidr = _vpc_cidr(root)
    eks = root.text("kubernetes_cluster", required=True)
    if not _EKS_NAME.match(eks):
        raise root.error(
            "kubernetes_cluster",
            f"{eks!r} is not an EKS cluster name: letters, "
            "digits, '-' and '_', starting with a letter or digit, "
            "at most 100",
        )
    version = _plain_version(root)
    label_key = root.text("gpu_label_key", DEFAULT_GPU_LABEL_KEY)
    if not k8s_names.label_key(label_key):
        raise root.error("gpu_label_key", f"{label_key!r} is not a Kubernetes label key")
    if _kubelet_refuses(label_key):
        raise root.error(
            "gpu_label_key",
            f"{label_key!r} is in a kubernetes.io / k8s.io "
            "namespace the kubelet may not set on its node: the "
            "nodes would never join",
            hint="use a key like gpu-type, nvidia.com/gpu.product or node.kubernetes.io/gpu-type",
        )
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
        group = _node_group(g)
        if group.name in seen:
            raise g.error(
                "name",
                f"duplicate node group name {group.name!r} (first at line {seen[group.name]})",
            )
        seen[group.name] = g.doc.line(g.path + ("name",))
        groups.append(group)
    return ClusterSpec(
        name=name,
        region=region,
        vpc_cidr=vpc_cidr,
        kubernetes_cluster=eks,
        node_groups=tuple(groups),
        kubernetes_version=version,
        gpu_label_key=label_key,
        state=_state(root, name, region),
        file=doc.file,
    )


def _vpc_cidr(root: Fields) -> str:
    text = root.text("vpc_cidr", required=True)
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


def _plain_version(root: Fields) -> str | None:
    value = root.raw("kubernetes_version")
    if value is None:
        return None
    if isinstance(value, float):  # unquoted, YAML reads 1.30 as the number 1.3
        raise root.error(
            "kubernetes_version",
            f'write the version in quotes, e.g. "{value}" (unquoted, 1.30 reads as the number 1.3)',
        )
    if not isinstance(value, str) or not _K8S_VERSION.match(value):
        raise root.error(
            "kubernetes_version", f'{value!r} is not a Kubernetes minor version (e.g. "1.31")'
        )
    return value


def _node_group(g: Fields) -> NodeGroup:
    g.reject_unknown(
        (
            "name",
            "instance_type",
            "min_size",
            "max_size",
            "desired_size",
            "gpu_type",
            "capacity_type",
            "taints",
        )
    )
    name = g.name("name", required=True)
    if len(name) > 40:  # becomes part of ASG, launch template and IAM names
        raise g.error("name", f"must be at most 40 characters (got {len(name)})")
    itype = g.text("instance_type", required=True)
    if not _INSTANCE_TYPE.match(itype):
        raise g.error("instance_type", f"{itype!r} is not an EC2 instance type (e.g. p4d.24xlarge)")
    min_size = g.integer("min_size", required=True, minimum=0, maximum=MAX_GROUP_SIZE)
    max_size = g.integer("max_size", required=True, minimum=1, maximum=MAX_GROUP_SIZE)
    if min_size > max_size:
        raise g.error("min_size", f"min_size ({min_size}) is larger than max_size ({max_size})")
    desired = g.integer("desired_size", min_size, minimum=0, maximum=MAX_GROUP_SIZE)
    if not min_size <= desired <= max_size:
        raise g.error(
            "desired_size",
            f"must be between min_size ({min_size}) and max_size ({max_size}) (got {desired})",
        )
    gpu_type = g.text("gpu_type", required=True)
    if not k8s_names.label_value(gpu_type):
        raise g.error(
            "gpu_type",
            f"{gpu_type!r} is not a valid label value: letters, digits, "
            "'-', '_' and '.', at most 63",
        )
    capacity = g.text("capacity_type", "on-demand", choices=("on-demand", "spot"))
    taint_texts = g.str_list("taints", [DEFAULT_TAINT])
    taints = []
    for i, text in enumerate(taint_texts):
        taint = parse_taint(text)
        if taint is None:
            raise g.doc.error(
                g.path + ("taints", i),
                f"{text!r} is not a taint: KEY[=VALUE]:EFFECT with EFFECT one of "
                + ", ".join(TAINT_EFFECTS),
            )
        taints.append(taint)
    keys = [(t.key, t.effect) for t in taints]
    if len(set(keys)) != len(keys):
        raise g.error("taints", "the same key and effect appear twice")
    return NodeGroup(
        name=name,
        instance_type=itype,
        min_size=min_size,
        max_size=max_size,
        desired_size=desired,
        gpu_type=gpu_type,
        capacity_type=capacity,
        taints=tuple(taints),
    )


def parse_taint(text: str) -> Taint | None:
    head, sep, effect = text.rpartition(":")
    if not sep or effect not in TAINT_EFFECTS:
        return None
    key, _, value = head.partition("=")
    if not k8s_names.label_key(key) or not k8s_names.label_value(value):
        return None
    return Taint(key, value, effect)


def _kubelet_refuses(key: str) -> bool:
    # kubelet --node-labels: kubernetes.io / k8s.io namespaces are reserved except these
    prefix = key.rpartition("/")[0]
    reserved = any(prefix == d or prefix.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
    allowed = any(
        prefix == d or prefix.endswith("." + d)
        for d in ("node.kubernetes.io", "kubelet.kubernetes.io")
    )
    return reserved and not allowed


def _state(root: Fields, name: str, region: str) -> StateBackend | None:
    st = root.child("state")
    if st is None:
        return None
    st.reject_unknown(("s3_bucket", "dynamodb_table", "key", "region"))
    bucket = st.text("s3_bucket", required=True)
    if not _S3_BUCKET.match(bucket) or ".." in bucket:
        raise st.error("s3_bucket", f"{bucket!r} is not an S3 bucket name")
    table = st.text("dynamodb_table", required=True)
    if not _DYNAMO_TABLE.match(table):
        raise st.error("dynamodb_table", f"{table!r} is not a DynamoDB table name")
    key = st.text("key", f"gpuctl/{name}/terraform.tfstate")
    if key.startswith("/") or any(ord(c) < 32 for c in key) or len(key) > 1024:
        raise st.error("key", f"{key!r} is not a usable S3 object key")
    state_region = st.text("region", region)
    if not _REGION.match(state_region):
        raise st.error("region", f"{state_region!r} is not an AWS region name")
    return StateBackend(bucket, table, key, state_region)
