"""What the preflight learnt about the account, as the renderers (Terraform variables,
Karpenter objects) take it. A spec rendered without a preflight (`--dry-run`) has none of
it: the values are left out and Terraform looks them up itself at plan time."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GroupFacts:
    """What the preflight learnt about one node group."""

    zones: tuple[str, ...] = ()  # where its nodes go
    gpu_count: int | None = None
    ami_id: str | None = None
    efa_interfaces: int | None = None  # EFA interfaces per node (efa: true)
    subnet_ids: tuple[str, ...] = ()  # an existing cluster's subnets in `zones`


@dataclass(frozen=True)
class ExistingNetwork:
    """An existing cluster's VPC and the security groups its nodes need."""

    vpc_id: str
    security_group_ids: tuple[str, ...]


@dataclass(frozen=True)
class Facts:
    kubernetes_version: str | None = None
    groups: dict[str, GroupFacts] = field(default_factory=dict)
    vpc_zones: tuple[str, ...] = ()  # a new cluster's VPC
    network: ExistingNetwork | None = None  # an existing cluster's
