"""What the AWS account says about a cluster spec → findings, blockers and a cost estimate.

The adapter (gpuctl.provision.aws) only gathers raw answers; every judgement lives here so it
can be tested without a cloud. A check whose API did not answer is reported as "could not
check", never as passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from gpuctl.provision.core import cost
from gpuctl.provision.core.facts import ExistingNetwork, Facts, GroupFacts
from gpuctl.provision.core.spec import ClusterSpec, NodeGroup

# EC2 vCPU quotas (Service Quotas, service code "ec2") by instance family letter(s); the
# codes and names as `aws service-quotas list-service-quotas --service-code ec2` lists them
# (the Trn and Inf codes checked against published listings of that output).
ON_DEMAND_QUOTAS = {
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "trn": ("L-2C3B7624", "Running On-Demand Trn instances"),
    "inf": ("L-1945791B", "Running On-Demand Inf instances"),
}
SPOT_QUOTAS = {
    "p": ("L-7212CCBC", "All P Spot Instance Requests"),
    "g": ("L-3819A6DF", "All G and VT Spot Instance Requests"),
    "trn": ("L-6B0D517C", "All Trn Spot Instance Requests"),
    "inf": ("L-B5D1601B", "All Inf Spot Instance Requests"),
}
EKS_MIN_ZONES = 2  # EKS wants control-plane subnets in at least two availability zones
MAX_VPC_ZONES = 6
# States in which a reservation can (or, for a Capacity Block not yet started, will) take
# instances (EC2 CapacityReservation.State).
USABLE_RESERVATION_STATES = ("active", "pending", "scheduled", "payment-pending")


def ami_parameter(kubernetes_version: str, arch: str, variant: str = "nvidia") -> str:
    """The public SSM parameter of the EKS-optimized Amazon Linux 2023 accelerated AMI:
    VARIANT nvidia, or neuron for Trainium and Inferentia (the same path
    terraform/modules/gpu-node-group reads when no AMI is passed)."""
    return (
        f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/"
        f"{arch}/{variant}/recommended/image_id"
    )


def ami_variant(info: InstanceInfo) -> str:
    """Which accelerated AMI an instance needs: neuron for AWS's own accelerators."""
    return "neuron" if info.gpu_manufacturer == NEURON_MANUFACTURER else "nvidia"


def quota_family(instance_type: str) -> str | None:
    family = instance_type.split(".", 1)[0]
    if family.startswith("vt"):
        return "g"
    if family.startswith(("trn", "inf")):
        return family[:3]
    return family[0] if family[:1] in ("p", "g") else None


NEURON_MANUFACTURER = "AWS"  # gpu_manufacturer of an instance whose devices are Neuron's


@dataclass(frozen=True)
class InstanceInfo:
    """The parts of describe_instance_types gpuctl reads; a Trainium or Inferentia
    instance's Neuron devices (NeuronInfo) are its gpu_* (manufacturer AWS)."""

    instance_type: str
    vcpus: int
    architectures: tuple[str, ...]
    gpu_model: str | None = None
    gpu_manufacturer: str | None = None
    gpu_count: int = 0
    gpu_memory_mib: int = 0  # per GPU
    efa_supported: bool = False  # NetworkInfo.EfaSupported
    max_efa_interfaces: int = 0  # NetworkInfo.EfaInfo.MaximumEfaInterfaces


@dataclass(frozen=True)
class ClusterInfo:
    """The parts of eks.describe_cluster gpuctl reads."""

    version: str
    vpc_id: str | None = None
    subnet_ids: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()  # the additional security groups
    cluster_security_group_id: str | None = None  # the one EKS created for the cluster
    authentication_mode: str | None = None


@dataclass(frozen=True)
class SubnetInfo:
    id: str
    zone: str
    vpc_id: str
    public: bool  # MapPublicIpOnLaunch: a public subnet


@dataclass(frozen=True)
class ReservationInfo:
    """The parts of describe_capacity_reservations gpuctl reads."""

    id: str
    instance_type: str
    zone: str
    state: str
    reservation_type: str  # "default" (an ODCR) or "capacity-block"
    total: int
    available: int


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
    cluster: Answer[ClusterInfo]  # the EKS cluster of that name (missing: none yet)
    offerings: dict[str, list[str]]  # instance type → zones offering it
    instances: dict[str, Answer[InstanceInfo]]  # instance type → its details
    amis: dict[str, Answer[str]]  # SSM parameter name → AMI id
    quotas: dict[str, Answer[float]]  # quota code → vCPU limit
    subnets: dict[str, SubnetInfo] = field(default_factory=dict)  # the cluster's subnets
    reservations: dict[str, Answer[ReservationInfo]] = field(default_factory=dict)
    caller: Answer[str] = field(default_factory=lambda: Answer(error="not asked"))


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
    efa_interfaces: int | None = None  # the EFA interfaces each node gets (efa: true)
    subnet_ids: list[str] = field(default_factory=list)  # existing cluster: where nodes go
    reservation: ReservationInfo | None = None

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
class ClusterReport:
    name: str
    create: bool
    vpc_id: str | None = None  # existing cluster
    security_group_ids: list[str] = field(default_factory=list)  # existing cluster
    vpc_zones: list[str] = field(default_factory=list)  # new cluster: the new VPC's zones
    admins: list[str] = field(default_factory=list)  # new cluster: who gets cluster-admin


@dataclass
class PreflightReport:
    region: str
    kubernetes_version: str | None
    cluster: ClusterReport
    groups: list[GroupReport]
    quotas: list[QuotaReport]
    components: list[cost.ComponentCost] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    price_source: str = ""

    @property
    def ok(self) -> bool:
        return not self.blockers

    def cost_estimate(self) -> dict[str, Any]:
        """Hourly and monthly cost of everything at min and at max size (None when a price
        is not in the table)."""
        return cost.total(self.components)

    def facts(self) -> Facts:
        network = None
        if not self.cluster.create and self.cluster.vpc_id:
            network = ExistingNetwork(self.cluster.vpc_id, tuple(self.cluster.security_group_ids))
        return Facts(
            kubernetes_version=self.kubernetes_version,
            groups={
                g.name: GroupFacts(
                    zones=tuple(g.zones),
                    gpu_count=g.instance.gpu_count if g.instance else None,
                    ami_id=g.ami_id,
                    efa_interfaces=g.efa_interfaces,
                    subnet_ids=tuple(g.subnet_ids),
                )
                for g in self.groups
            },
            vpc_zones=tuple(self.cluster.vpc_zones),
            network=network,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "kubernetes_version": self.kubernetes_version,
            "ok": self.ok,
            "blockers": self.blockers,
            "notes": self.notes,
            "cluster": self.cluster.__dict__,
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
                    "efa_interfaces": g.efa_interfaces,
                    "subnet_ids": g.subnet_ids,
                    "capacity_reservation": g.reservation.__dict__ if g.reservation else None,
                    "ami_id": g.ami_id,
                    "ami_parameter": g.ami_parameter,
                    "hourly_price": g.hourly_price,
                }
                for g in self.groups
            ],
            "quotas": [q.__dict__ for q in self.quotas],
            "cost": self.cost_estimate(),
            "cost_by_component": [c.to_dict() for c in self.components],
            "price_source": self.price_source,
        }


def evaluate(spec: ClusterSpec, raw: RawFacts) -> PreflightReport:
    report = PreflightReport(
        region=spec.region,
        kubernetes_version=spec.kubernetes_version,
        cluster=ClusterReport(spec.cluster.name, spec.cluster.create),
        groups=[],
        quotas=[],
        price_source=cost.price_source(),
    )
    if spec.cluster.create:
        _new_cluster(spec, raw, report)
    else:
        _existing_cluster(spec, raw, report)

    for g in spec.node_groups:
        report.groups.append(_group(spec, g, raw, report))

    if spec.cluster.create:
        report.cluster.vpc_zones = vpc_zones(
            [z for gr in report.groups for z in gr.zones], raw.region_zones
        )
        if len(report.cluster.vpc_zones) < EKS_MIN_ZONES:
            report.blockers.append(
                f"EKS needs subnets in {EKS_MIN_ZONES} availability zones; "
                f"{spec.region} has {len(raw.region_zones)} available"
            )

    report.quotas = _quotas(spec, report, raw)
    for q in report.quotas:
        if q.status == "insufficient":
            report.blockers.append(
                f"quota {q.name!r} ({q.code}) is {q.limit_vcpus:g} vCPUs; max size of "
                f"{', '.join(q.groups)} needs {q.needed_vcpus}"
            )
    report.components = cost.by_component(spec, [(g.name, g.hourly_price) for g in report.groups])
    report.notes += cost.unpriced(report.components)
    return report


def vpc_zones(group_zones: list[str], region_zones: list[str]) -> list[str]:
    """The new VPC's zones: those offering a node group's instance type, topped up from the
    region's zones to the two EKS needs, at most six."""
    zones = sorted(set(group_zones) & set(region_zones))
    for z in sorted(region_zones):
        if len(zones) >= EKS_MIN_ZONES:
            break
        if z not in zones:
            zones.append(z)
    return sorted(zones)[:MAX_VPC_ZONES]


def _new_cluster(spec: ClusterSpec, raw: RawFacts, report: PreflightReport) -> None:
    name = spec.cluster.name
    if raw.cluster.value is not None:
        report.blockers.append(
            f"an EKS cluster named {name!r} already exists in {spec.region}; to add GPU "
            f"node groups to it, write kubernetes_cluster: {{name: {name}}} without vpc_cidr"
        )
    elif raw.cluster.error and not raw.cluster.missing:
        report.notes.append(
            f"could not check whether EKS cluster {name!r} exists: {raw.cluster.error}"
        )
    if raw.caller.value:
        report.cluster.admins.append(str(raw.caller.value))
    else:
        report.notes.append(
            f"could not read the caller's identity ({raw.caller.error}); it becomes the "
            "cluster's admin all the same"
        )
    report.cluster.admins += list(spec.cluster.admin_principals)
    if spec.cluster.endpoint_access == "private":
        report.notes.append(
            "endpoint_access is private: Terraform installs the GPU stack through the API "
            "endpoint, so run gpuctl from inside the VPC (or a network routed to it)"
        )


def _existing_cluster(spec: ClusterSpec, raw: RawFacts, report: PreflightReport) -> None:
    name = spec.cluster.name
    ans = raw.cluster
    if ans.missing:
        report.blockers.append(
            f"EKS cluster {name!r} does not exist in {spec.region}; the GPU nodes have "
            "nothing to join"
        )
        return
    if ans.error or ans.value is None:
        report.blockers.append(
            f"could not read EKS cluster {name!r}: {ans.error or 'no answer'}; its VPC, "
            "subnets and security group decide where the GPU nodes go"
        )
        return
    info = ans.value
    if report.kubernetes_version is None:
        report.kubernetes_version = info.version
    elif info.version != report.kubernetes_version:
        report.notes.append(
            f"kubernetes_cluster.version {report.kubernetes_version} differs from the EKS "
            f"cluster's {info.version}; the AMI follows the spec"
        )
    vpcs = sorted({s.vpc_id for s in raw.subnets.values()})
    report.cluster.vpc_id = info.vpc_id or (vpcs[0] if len(vpcs) == 1 else None)
    if report.cluster.vpc_id is None:
        report.blockers.append(f"could not tell the VPC of EKS cluster {name!r}")
    if info.cluster_security_group_id:
        report.cluster.security_group_ids = [info.cluster_security_group_id]
    else:
        report.cluster.security_group_ids = list(info.security_group_ids)
        report.notes.append(
            f"EKS cluster {name!r} reported no cluster security group; the nodes get its "
            f"additional security groups ({', '.join(info.security_group_ids) or 'none'})"
        )
    if spec.autoscaler == "karpenter":
        report.notes.append(
            f"Karpenter's controller authenticates through EKS Pod Identity: EKS cluster "
            f"{name!r} needs the eks-pod-identity-agent add-on (not checked), and must not "
            "run a Karpenter of its own"
        )
    if info.authentication_mode == "CONFIG_MAP":
        report.blockers.append(
            f"EKS cluster {name!r} authenticates through the aws-auth ConfigMap only; the "
            "GPU nodes join through access entries, which need authentication mode API or "
            "API_AND_CONFIG_MAP (aws eks update-cluster-config --access-config "
            "authenticationMode=API_AND_CONFIG_MAP)"
        )
    elif info.authentication_mode is None:
        report.notes.append(
            f"could not read EKS cluster {name!r}'s authentication mode; the nodes' access "
            "entries need API or API_AND_CONFIG_MAP"
        )


def _group(spec: ClusterSpec, g: NodeGroup, raw: RawFacts, report: PreflightReport) -> GroupReport:
    gr = GroupReport(g.name, g.instance_type, g.capacity_type, g.min_size, g.max_size)
    offered = sorted(z for z in raw.offerings.get(g.instance_type, []) if z in raw.region_zones)
    gr.zones = offered
    if not offered:
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
            report.blockers.append(
                f"node group {g.name}: {g.instance_type} has no GPUs or Neuron devices"
            )
        _efa(g, gr, report)
    if not spec.cluster.create and report.cluster.vpc_id:
        _existing_subnets(g, gr, raw, report)
    if g.capacity_reservation is not None:
        _reservation(g, gr, raw, report)
    if g.efa and len(gr.zones) > 1:
        gr.zones = gr.zones[:1]
        gr.subnet_ids = [
            s for s in gr.subnet_ids if s in raw.subnets and raw.subnets[s].zone == gr.zones[0]
        ]
        report.notes.append(
            f"node group {g.name}: EFA nodes share a cluster placement group, which lives in "
            f"one zone: {gr.zones[0]}"
        )
    _ami(g, gr, raw, report)
    gr.hourly_price = cost.instance_price(g.instance_type)
    if gr.hourly_price is not None and g.capacity_type == "spot":
        report.notes.append(
            f"node group {g.name}: spot; the estimate uses the On-Demand price (an upper bound)"
        )
    if gr.reservation is not None and gr.reservation.reservation_type == "capacity-block":
        report.notes.append(
            f"node group {g.name}: a Capacity Block is paid for when it is reserved, not per "
            "instance-hour; the estimate uses the On-Demand price"
        )
    return gr


def _efa(g: NodeGroup, gr: GroupReport, report: PreflightReport) -> None:
    info = gr.instance
    assert info is not None
    if g.efa and not (info.efa_supported and info.max_efa_interfaces):
        report.blockers.append(
            f"node group {g.name}: {g.instance_type} does not support EFA "
            "(EC2 reports no EFA interfaces for it); remove efa: true"
        )
    elif g.efa:
        gr.efa_interfaces = info.max_efa_interfaces
    elif info.efa_supported and info.max_efa_interfaces:
        report.notes.append(
            f"node group {g.name}: {g.instance_type} supports {info.max_efa_interfaces} EFA "
            "interface(s); efa: true gives multi-node jobs their bandwidth"
        )


def _existing_subnets(
    g: NodeGroup, gr: GroupReport, raw: RawFacts, report: PreflightReport
) -> None:
    """The existing cluster's subnets in zones offering the instance type; private ones
    when there are any (nodes with no public address need them)."""
    candidates = [s for s in raw.subnets.values() if s.zone in gr.zones]
    private = [s for s in candidates if not s.public]
    chosen = private or candidates
    if not chosen:
        cluster_zones = sorted({s.zone for s in raw.subnets.values()})
        report.blockers.append(
            f"node group {g.name}: no subnet of EKS cluster {report.cluster.name!r} is in a "
            f"zone offering {g.instance_type} (cluster subnets: "
            f"{', '.join(cluster_zones) or 'none'}; offered: {', '.join(gr.zones) or 'none'})"
        )
    elif not private:
        report.notes.append(
            f"node group {g.name}: the cluster has only public subnets in "
            f"{', '.join(sorted({s.zone for s in chosen}))}; the nodes go there"
        )
    gr.subnet_ids = sorted(s.id for s in chosen)
    gr.zones = sorted({s.zone for s in chosen})


def _reservation(g: NodeGroup, gr: GroupReport, raw: RawFacts, report: PreflightReport) -> None:
    want = g.capacity_reservation
    assert want is not None
    ans = raw.reservations.get(want.id, Answer(error="not asked"))
    if ans.missing:
        report.blockers.append(
            f"node group {g.name}: capacity reservation {want.id} does not exist in {report.region}"
        )
        return
    if ans.error or ans.value is None:
        report.notes.append(
            f"node group {g.name}: could not check capacity reservation {want.id}: "
            f"{ans.error or 'no answer'}; its zone is not known, so the nodes may be "
            "launched in a zone the reservation does not cover"
        )
        return
    r = gr.reservation = ans.value
    problems = []
    is_block = r.reservation_type == "capacity-block"
    if is_block != (want.type == "capacity-block"):
        problems.append(
            f"is {'a Capacity Block' if is_block else 'an On-Demand Capacity Reservation'}, "
            f"the spec says type {want.type}"
        )
    if r.instance_type != g.instance_type:
        problems.append(f"holds {r.instance_type}, not {g.instance_type}")
    if r.state not in USABLE_RESERVATION_STATES:
        problems.append(f"is {r.state}")
    if r.zone not in gr.zones:
        problems.append(
            f"is in {r.zone}, where the group cannot go (zones: {', '.join(gr.zones) or 'none'})"
        )
    if problems:
        report.blockers.append(
            f"node group {g.name}: capacity reservation {r.id} " + "; ".join(problems)
        )
        return
    gr.zones = [r.zone]
    gr.subnet_ids = [s for s in gr.subnet_ids if raw.subnets[s].zone == r.zone]
    if r.total < g.max_size:
        report.notes.append(
            f"node group {g.name}: reservation {r.id} holds {r.total} instance(s), "
            f"max_size is {g.max_size}; launches beyond it fail"
        )


def _ami(g: NodeGroup, gr: GroupReport, raw: RawFacts, report: PreflightReport) -> None:
    if not (report.kubernetes_version and gr.instance):
        return
    arch = "arm64" if "arm64" in gr.instance.architectures else "x86_64"
    gr.ami_parameter = ami_parameter(report.kubernetes_version, arch, ami_variant(gr.instance))
    ami = raw.amis.get(gr.ami_parameter, Answer(error="not asked"))
    if ami.missing:
        report.blockers.append(
            f"node group {g.name}: no EKS GPU AMI is published for Kubernetes "
            f"{report.kubernetes_version} ({arch}); SSM parameter {gr.ami_parameter} "
            "does not exist"
        )
    elif ami.error:
        report.notes.append(
            f"node group {g.name}: could not read the GPU AMI ({gr.ami_parameter}): {ami.error}"
        )
    else:
        gr.ami_id = str(ami.value)


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
