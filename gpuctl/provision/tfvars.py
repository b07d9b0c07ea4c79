"""Cluster spec (+ what the preflight found) → the Terraform variables gpuctl writes.

The result is plain JSON-able data for `terraform.tfvars.json` and, when the spec names
an S3 state bucket, `backend.tf.json`. Values the preflight did not resolve are left out
(or null) and the modules look them up themselves at plan time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuctl.provision.spec import ClusterSpec

TFVARS_FILE = "terraform.tfvars.json"
BACKEND_FILE = "backend.tf.json"


@dataclass(frozen=True)
class GroupFacts:
    """What the preflight learnt about one node group's instance type."""

    zones: tuple[str, ...] = ()
    gpu_count: int | None = None
    ami_id: str | None = None


@dataclass(frozen=True)
class Facts:
    kubernetes_version: str | None = None
    groups: dict[str, GroupFacts] = field(default_factory=dict)


def render_tfvars(spec: ClusterSpec, facts: Facts | None = None) -> dict[str, Any]:
    facts = facts or Facts()
    groups = {}
    for g in spec.node_groups:
        gf = facts.groups.get(g.name, GroupFacts())
        groups[g.name] = {
            "instance_type": g.instance_type,
            "min_size": g.min_size,
            "max_size": g.max_size,
            "desired_size": g.desired_size,
            "gpu_type": g.gpu_type,
            "capacity_type": g.capacity_type,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in g.taints],
            "gpu_count": gf.gpu_count,
            "ami_id": gf.ami_id,
            "availability_zones": sorted(gf.zones),
        }
    return {
        "cluster_name": spec.name,
        "region": spec.region,
        "vpc_cidr": spec.vpc_cidr,
        "kubernetes_cluster": spec.kubernetes_cluster,
        "kubernetes_version": spec.kubernetes_version or facts.kubernetes_version,
        "gpu_label_key": spec.gpu_label_key,
        "node_groups": groups,
    }


def render_backend(spec: ClusterSpec) -> dict[str, Any] | None:
    """`backend.tf.json` for remote state, or None to keep Terraform's local state file."""
    if spec.state is None:
        return None
    st = spec.state
    return {
        "terraform": {
            "backend": {
                "s3": {
                    "bucket": st.s3_bucket,
                    "key": st.key,
                    "region": st.region,
                    "dynamodb_table": st.dynamodb_table,
                    "encrypt": True,
                }
            }
        }
    }
