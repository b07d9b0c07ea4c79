"""The read-only questions the provision preflight asks AWS, through the boto3 session it
is given (gpuctl.adapters.aws).

Every call is a describe/get; nothing is created. Answers come back as
gpuctl.provision.core.preflight.RawFacts for the core to judge.
"""

from __future__ import annotations

from gpuctl.adapters.aws import errors, first_line
from gpuctl.common.errors import BackendError, redact
from gpuctl.provision.core.preflight import (
    NEURON_MANUFACTURER,
    ON_DEMAND_QUOTAS,
    SPOT_QUOTAS,
    Answer,
    ClusterInfo,
    InstanceInfo,
    RawFacts,
    ReservationInfo,
    SubnetInfo,
    ami_parameter,
    ami_variant,
    quota_family,
)
from gpuctl.provision.core.spec import ClusterSpec

_NOT_FOUND = {
    "ResourceNotFoundException",
    "ParameterNotFound",
    "InvalidInstanceType",
    "NoSuchResourceException",
    "InvalidCapacityReservationId.NotFound",
}


PREFLIGHT_DEADLINE_S = 300  # all questions together; each has its own timeouts and retries


def gather(spec: ClusterSpec, aws) -> RawFacts:
    """The preflight's answers, through the boto3 session AWS (gpuctl.adapters.aws), or one
    error; never longer than PREFLIGHT_DEADLINE_S (an endpoint that trickles its answers
    does not hold gpuctl)."""
    from gpuctl.runtime import deadline

    try:
        return deadline.call(lambda: _gather(spec, aws), PREFLIGHT_DEADLINE_S)
    except deadline.DeadlineExceeded:
        raise BackendError(
            f"the AWS preflight in {spec.region} got no complete answers within "
            f"{PREFLIGHT_DEADLINE_S} s",
            hint="check the network path to AWS and AWS_ENDPOINT_URL",
        ) from None


def _gather(spec: ClusterSpec, aws) -> RawFacts:
    from botocore.config import Config

    config = Config(
        connect_timeout=10, read_timeout=30, retries={"max_attempts": 3, "mode": "standard"}
    )

    def client(name):
        with errors(spec.region):
            return aws.client(name, config=config)

    with errors(spec.region):
        ec2 = client("ec2")
        zones = [
            z["ZoneName"]
            for z in ec2.describe_availability_zones(
                Filters=[{"Name": "state", "Values": ["available"]}]
            )["AvailabilityZones"]
        ]
        offerings = {t: _offered_zones(ec2, t) for t in spec.instance_types}
    instances = {t: _ask(lambda t=t: _instance_info(ec2, t)) for t in spec.instance_types}

    cluster = _ask(lambda: _cluster_info(client("eks"), spec.kubernetes_cluster))
    subnets: dict[str, SubnetInfo] = {}
    if not spec.cluster.create and isinstance(cluster.value, ClusterInfo):
        with errors(spec.region):
            subnets = _subnets(ec2, cluster.value.subnet_ids)
    caller: Answer[str] = Answer(error="not asked")
    if spec.cluster.create:
        caller = _ask(lambda: client("sts").get_caller_identity()["Arn"])
    reservations = {
        g.capacity_reservation.id: _ask(
            lambda rid=g.capacity_reservation.id: _reservation(ec2, rid)
        )
        for g in spec.node_groups
        if g.capacity_reservation is not None
    }
    version = spec.kubernetes_version or (
        cluster.value.version if isinstance(cluster.value, ClusterInfo) else None
    )
    amis = {}
    if version:
        ssm = client("ssm")
        for ans in instances.values():
            if isinstance(ans.value, InstanceInfo):
                arch = "arm64" if "arm64" in ans.value.architectures else "x86_64"
                name = ami_parameter(version, arch, ami_variant(ans.value))
                if name not in amis:
                    amis[name] = _ask(
                        lambda name=name: ssm.get_parameter(Name=name)["Parameter"]["Value"]
                    )
    quotas = {}
    sq = client("service-quotas")
    for g in spec.node_groups:
        family = quota_family(g.instance_type)
        if family is None:
            continue
        code = (SPOT_QUOTAS if g.capacity_type == "spot" else ON_DEMAND_QUOTAS)[family][0]
        if code not in quotas:
            quotas[code] = _ask(
                lambda code=code: sq.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"][
                    "Value"
                ]
            )
    return RawFacts(
        region_zones=zones,
        cluster=cluster,
        offerings=offerings,
        instances=instances,
        amis=amis,
        quotas=quotas,
        subnets=subnets,
        reservations=reservations,
        caller=caller,
    )


def _offered_zones(ec2, instance_type: str) -> list[str]:
    zones = []
    for page in ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": [instance_type]}],
    ):
        zones += [o["Location"] for o in page["InstanceTypeOfferings"]]
    return zones


def _instance_info(ec2, instance_type: str) -> InstanceInfo:
    it = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
    network = it.get("NetworkInfo") or {}
    gpus = (it.get("GpuInfo") or {}).get("Gpus") or []
    if not gpus:  # Trainium, Inferentia: their Neuron devices
        gpus = [
            {**d, "Manufacturer": NEURON_MANUFACTURER}
            for d in (it.get("NeuronInfo") or {}).get("NeuronDevices") or []
        ]
    first = gpus[0] if gpus else {}
    return InstanceInfo(
        instance_type=instance_type,
        vcpus=int(it["VCpuInfo"]["DefaultVCpus"]),
        architectures=tuple(it.get("ProcessorInfo", {}).get("SupportedArchitectures", [])),
        gpu_model=first.get("Name"),
        gpu_manufacturer=first.get("Manufacturer"),
        gpu_count=sum(int(g.get("Count", 0)) for g in gpus),
        gpu_memory_mib=int((first.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
        efa_supported=bool(network.get("EfaSupported")),
        max_efa_interfaces=int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)),
    )


def _cluster_info(eks, name: str) -> ClusterInfo:
    c = eks.describe_cluster(name=name)["cluster"]
    vpc = c.get("resourcesVpcConfig") or {}
    return ClusterInfo(
        version=c["version"],
        vpc_id=vpc.get("vpcId"),
        subnet_ids=tuple(vpc.get("subnetIds") or ()),
        security_group_ids=tuple(vpc.get("securityGroupIds") or ()),
        cluster_security_group_id=vpc.get("clusterSecurityGroupId"),
        authentication_mode=(c.get("accessConfig") or {}).get("authenticationMode"),
    )


def _subnets(ec2, ids: tuple[str, ...]) -> dict[str, SubnetInfo]:
    if not ids:
        return {}
    return {
        s["SubnetId"]: SubnetInfo(
            id=s["SubnetId"],
            zone=s["AvailabilityZone"],
            vpc_id=s["VpcId"],
            public=bool(s.get("MapPublicIpOnLaunch")),
        )
        for s in ec2.describe_subnets(SubnetIds=list(ids))["Subnets"]
    }


def _reservation(ec2, rid: str) -> ReservationInfo:
    r = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]
    return ReservationInfo(
        id=r["CapacityReservationId"],
        instance_type=r["InstanceType"],
        zone=r["AvailabilityZone"],
        state=r["State"],
        reservation_type=r.get("ReservationType", "default"),
        total=int(r.get("TotalInstanceCount", 0)),
        available=int(r.get("AvailableInstanceCount", 0)),
    )


def _ask(call) -> Answer:
    """Run one optional question; turn 'does not exist' and 'could not ask' into answers."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    try:
        return Answer(value=call())
    except ResponseParserError:  # e.g. an HTML error page from a proxy or a stand-in
        return Answer(error="the answer was not an AWS response")
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        message = e.response.get("Error", {}).get("Message", "") or str(e)
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return Answer(
            error=redact(f"{code or 'HTTP ' + str(status)}: {first_line(message)}"),
            missing=code in _NOT_FOUND,
        )
    except BotoCoreError as e:  # its text can quote the endpoint URL
        return Answer(error=redact(first_line(str(e))))
