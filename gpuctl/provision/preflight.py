"""What the AWS account says about a cluster spec → findings, blockers and a cost estimate.

The adapter (gpuctl.provision.aws) only gathers raw answers; every judgement lives here so it
can be tested without a cloud. A check whose API did not answer is reported as "could not
check", never as passed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Generic, TypeVar

from gpuctl.provision.spec import ClusterSpec
from gpuctl.provision.tfvars import Facts, GroupFacts

PRICE_TABLE = "ec2_gpu_prices.json"

# EC2 vCPU quotas (Service Quotas, service code "ec2") by instance family letter(s).
ON_DEMAND_QUOTAS = {
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
}
SPOT_QUOTAS = {
    "p": ("L-7212CCBC", "All P Spot Instance Requests"),
    "g": ("L-3819A6DF", "All G and VT Spot Instance Requests"),
}


def ami_parameter(kubernetes_version: str, arch: str) -> str:
    """The public SSM parameter of the EKS-optimized Amazon Linux 2023 NVIDIA AMI
    (the same path terraform/modules/gpu-node-group reads when no AMI is passed)."""
    return (
        f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/"
        f"{arch}/nvidia/recommended/image_id"
    )


def quota_family(instance_type: str) -> str | None:
    family = instance_type.split(".", 1)[0]
    if family.startswith("vt"):
        return "g"
    return family[0] if family[:1] in ("p", "g") else None


@dataclass(frozen=True)
class InstanceInfo:
    """The parts of describe_instance_types gpuctl reads."""

    instance_type: str
    vcpus: int
    architectures: tuple[str, ...]
    gpu_model: str | None = None
    gpu_manufacturer: str | None = None
    gpu_count: int = 0
    gpu_memory_mib: int = 0  # per GPU


V = TypeVar("V")


@dataclass(frozen=True)
class Answer(Generic[V]):
    """One API answer: a value, or why there is none (`missing`: the thing does not exist;
    otherwise the API could not be asked)."""

    value: V | None = None
    error: str | None = None
    missing: bool = False


@dataclass
class RawFacts:
    region_zones: list[str]
    eks_version: Answer[str]
    offerings: dict[str, list[str]]  # instance type → zones offering it
    instances: dict[str, Answer[InstanceInfo]]  # instance type → its details
    amis: dict[str, Answer[str]]  # SSM parameter name → AMI id
    quotas: dict[str, Answer[float]]  # quota code → vCPU limit


@dataclass
class GroupReport:
    name: str
    instance_type: str
    capacity_type: str
    min_size: int
    max_size: int
    zones: list[str] = field(default_factory=list)
    instance: InstanceInfo | None = None
    ami_parameter: str | None = None
    ami_id: str | None = None
    hourly_price: float | None = None

    def cost(self, size: int) -> float | None:
        return None if self.hourly_price is None else round(self.hourly_price * size, 4)


@dataclass
class QuotaReport:
    code: str
    name: str
    groups: list[str]
    needed_vcpus: int
    limit_vcpus: float | None
    status: str  # "ok", "insufficient" or "unknown"
    detail: str = ""


@dataclass
class PreflightReport:
    region: str
    kubernetes_version: str | None
    groups: list[GroupReport]
    quotas: list[QuotaReport]
    blockers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    price_source: str = ""

    @property
    def ok(self) -> bool:
        return not self.blockers

    def cost_estimate(self) -> dict[str, Any]:
        """Hourly and monthly cost at every group's min and max size (None when a
        price is not in the table)."""
        table = price_table()
        known = all(g.hourly_price is not None for g in self.groups)
        out = {}
        for label in ("min", "max"):
            hourly = sum(
                g.cost(g.min_size if label == "min" else g.max_size) or 0.0 for g in self.groups
            )
            out[label] = {
                "hourly": round(hourly, 2) if known else None,
                "monthly": round(hourly * table["hours_per_month"], 0) if known else None,
            }
        return out

    def facts(self) -> Facts:
        return Facts(
            kubernetes_version=self.kubernetes_version,
            groups={
                g.name: GroupFacts(
                    zones=tuple(g.zones),
                    gpu_count=g.instance.gpu_count if g.instance else None,
                    ami_id=g.ami_id,
                )
                for g in self.groups
            },
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "kubernetes_version": self.kubernetes_version,
            "ok": self.ok,
            "blockers": self.blockers,
            "notes": self.notes,
            "node_groups": [
                {
                    "name": g.name,
                    "instance_type": g.instance_type,
                    "zones": g.zones,
                    "gpu": None
                    if not g.instance or not g.instance.gpu_count
                    else {
                        "model": g.instance.gpu_model,
                        "count": g.instance.gpu_count,
                        "memory_mib": g.instance.gpu_memory_mib,
                    },
                    "ami_id": g.ami_id,
                    "ami_parameter": g.ami_parameter,
                    "hourly_price": g.hourly_price,
                }
                for g in self.groups
            ],
            "quotas": [q.__dict__ for q in self.quotas],
            "cost": self.cost_estimate(),
            "price_source": self.price_source,
        }


@lru_cache(maxsize=1)
def price_table() -> dict[str, Any]:
    text = resources.files("gpuctl.data").joinpath(PRICE_TABLE).read_text("utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def price_source() -> str:
    t = price_table()
    return (
        f"{t['region']} On-Demand list prices as of {t['as_of']} ({t['source']}), from "
        f"gpuctl's table, not live. {t['note']}"
    )


def evaluate(spec: ClusterSpec, raw: RawFacts) -> PreflightReport:
    table = price_table()
    report = PreflightReport(
        region=spec.region,
        kubernetes_version=spec.kubernetes_version,
        groups=[],
        quotas=[],
        price_source=price_source(),
    )
    eks = raw.eks_version
    if eks.missing:
        report.blockers.append(
            f"EKS cluster {spec.kubernetes_cluster!r} does not exist in "
            f"{spec.region}; the GPU nodes have nothing to join"
        )
    elif eks.error:
        report.notes.append(f"could not check EKS cluster {spec.kubernetes_cluster!r}: {eks.error}")
    elif report.kubernetes_version is None:
        report.kubernetes_version = str(eks.value)
    elif eks.value and str(eks.value) != report.kubernetes_version:
        report.notes.append(
            f"kubernetes_version {report.kubernetes_version} differs from the EKS "
            f"cluster's {eks.value}; the AMI follows the spec"
        )

    for g in spec.node_groups:
        gr = GroupReport(g.name, g.instance_type, g.capacity_type, g.min_size, g.max_size)
        report.groups.append(gr)
        gr.zones = sorted(
            z for z in raw.offerings.get(g.instance_type, []) if z in raw.region_zones
        )
        if not gr.zones:
            report.blockers.append(
                f"node group {g.name}: {g.instance_type} is not offered in any "
                f"availability zone of {spec.region}"
            )
        info = raw.instances.get(g.instance_type, Answer(error="not asked"))
        if info.missing:
            report.blockers.append(
                f"node group {g.name}: {g.instance_type} is not an instance type "
                f"EC2 knows in {spec.region}"
            )
        elif info.error or info.value is None:
            report.notes.append(
                f"node group {g.name}: could not read {g.instance_type}'s details: "
                f"{info.error or 'no value'}"
            )
        else:
            gr.instance = info.value
            if not gr.instance.gpu_count:
                report.blockers.append(f"node group {g.name}: {g.instance_type} has no GPUs")
        if report.kubernetes_version and gr.instance:
            arch = "arm64" if "arm64" in gr.instance.architectures else "x86_64"
            gr.ami_parameter = ami_parameter(report.kubernetes_version, arch)
            ami = raw.amis.get(gr.ami_parameter, Answer(error="not asked"))
            if ami.missing:
                report.blockers.append(
                    f"node group {g.name}: no EKS GPU AMI is published for Kubernetes "
                    f"{report.kubernetes_version} ({arch}); SSM parameter {gr.ami_parameter} "
                    "does not exist"
                )
            elif ami.error:
                report.notes.append(
                    f"node group {g.name}: could not read the GPU AMI "
                    f"({gr.ami_parameter}): {ami.error}"
                )
            else:
                gr.ami_id = str(ami.value)
        gr.hourly_price = table["prices"].get(g.instance_type)
        if gr.hourly_price is None:
            report.notes.append(
                f"node group {g.name}: no price for {g.instance_type} in gpuctl's "
                "price table; cost not estimated"
            )
        elif g.capacity_type == "spot":
            report.notes.append(
                f"node group {g.name}: spot; the estimate uses the On-Demand price (an upper bound)"
            )

    report.quotas = _quotas(spec, report, raw)
    for q in report.quotas:
        if q.status == "insufficient":
            report.blockers.append(
                f"quota {q.name!r} ({q.code}) is {q.limit_vcpus:g} vCPUs; max size of "
                f"{', '.join(q.groups)} needs {q.needed_vcpus}"
            )
    return report


def _quotas(spec: ClusterSpec, report: PreflightReport, raw: RawFacts) -> list[QuotaReport]:
    needs: dict[str, QuotaReport] = {}
    for g, gr in zip(spec.node_groups, report.groups):
        family = quota_family(g.instance_type)
        codes = SPOT_QUOTAS if g.capacity_type == "spot" else ON_DEMAND_QUOTAS
        if family is None:
            report.notes.append(
                f"node group {g.name}: could not check the vCPU quota: gpuctl "
                f"knows no EC2 quota for the {g.instance_type.split('.')[0]} family"
            )
            continue
        code, name = codes[family]
        q = needs.setdefault(code, QuotaReport(code, name, [], 0, None, "unknown"))
        q.groups.append(g.name)
        if gr.instance is None:
            q.detail = "instance details unknown"
            q.needed_vcpus = -1
        elif q.needed_vcpus >= 0:
            q.needed_vcpus += g.max_size * gr.instance.vcpus
    for q in needs.values():
        ans = raw.quotas.get(q.code, Answer(error="not asked"))
        if ans.error or ans.value is None:
            q.detail = f"could not check: {ans.error or 'no value'}"
        elif q.needed_vcpus < 0:
            q.limit_vcpus = float(ans.value)
            q.detail = "could not check: vCPUs per instance unknown"
        else:
            q.limit_vcpus = float(ans.value)
            q.status = "ok" if q.needed_vcpus <= q.limit_vcpus else "insufficient"
    return list(needs.values())
