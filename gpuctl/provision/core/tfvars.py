"""Cluster spec (+ what the preflight found) → the Terraform variables gpuctl writes.

The result is plain JSON-able data for `terraform.tfvars.json` and, when the spec names
an S3 state bucket, `backend.tf.json`. Values the preflight did not resolve are left out
(or null) and the modules look them up themselves at plan time.
"""

from __future__ import annotations

import json
from typing import Any

from gpuctl.provision.core import karpenter, stack
from gpuctl.provision.core.facts import Facts, GroupFacts
from gpuctl.provision.core.spec import ClusterSpec, neuron_devices

TFVARS_FILE = "terraform.tfvars.json"
BACKEND_FILE = "backend.tf.json"


def render_tfvars(spec: ClusterSpec, facts: Facts | None = None) -> dict[str, Any]:
    facts = facts or Facts()
    groups = {}
    for g in spec.node_groups:
        gf = facts.groups.get(g.name, GroupFacts())
        cr = g.capacity_reservation
        groups[g.name] = {
            "instance_type": g.instance_type,
            "min_size": g.min_size,
            "max_size": g.max_size,
            "desired_size": g.desired_size,
            "gpu_type": g.gpu_type,
            "capacity_type": g.capacity_type,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in g.taints],
            # Neuron devices without a preflight: gpuctl's instance table (Terraform's
            # instance type data source counts GPUs only)
            "gpu_count": gf.gpu_count or neuron_devices(g.instance_type),
            "ami_id": gf.ami_id,
            "ami_variant": "neuron" if g.neuron else "nvidia",
            "device_resource": karpenter.device_resource(g),
            "availability_zones": sorted(gf.zones),
            "subnet_ids": sorted(gf.subnet_ids),
            "efa": g.efa,
            "efa_interfaces": gf.efa_interfaces,
            "capacity_reservation": None if cr is None else {"id": cr.id, "type": cr.type},
        }
    kc = spec.cluster
    releases = stack.releases(spec, facts)
    return {
        "cluster_name": spec.name,
        "region": spec.region,
        "create_cluster": kc.create,
        "kubernetes_cluster": kc.name,
        "kubernetes_version": kc.version or facts.kubernetes_version,
        "vpc_cidr": spec.vpc_cidr,
        "availability_zones": list(facts.vpc_zones),
        "control_plane": {
            "endpoint_public_access": kc.endpoint_access != "private",
            "endpoint_private_access": kc.endpoint_access != "public",
            "public_access_cidrs": list(kc.public_access_cidrs),
            "admin_principals": list(kc.admin_principals),
            "system_instance_type": kc.system_nodes.instance_type,
            "system_node_count": kc.system_nodes.count,
        },
        "autoscaler": spec.autoscaler,
        "karpenter": {
            "node_role_name": karpenter.node_role_name(spec),
            "queue_name": karpenter.queue_name(spec),
            "namespace": karpenter.NAMESPACE,
            "service_account": karpenter.SERVICE_ACCOUNT,
        },
        "gpu_label_key": spec.gpu_label_key,
        "node_groups": groups,
        # Helm takes YAML; JSON is YAML, and one string per release keeps the variable's
        # type the same for every release whatever its values hold.
        "helm_releases": {
            name: {**r, "values": json.dumps(r["values"], sort_keys=True)}
            for name, r in releases.items()
        },
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
