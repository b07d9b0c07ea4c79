"""AWS through boto3: the read-only questions the provision preflight asks, and the AWS
settings (profile, region) gpuctl and Terraform share.

Every call is a describe/get; nothing is created. Answers come back as
gpuctl.provision.core.preflight.RawFacts for the core to judge. `AWS_ENDPOINT_URL` (read by botocore
itself) points everything at another endpoint, e.g. a moto server.
"""

from __future__ import annotations

import os

from gpuctl.common.errors import BackendError, UsageError, redact
from gpuctl.provision.core.preflight import (
    ON_DEMAND_QUOTAS,
    SPOT_QUOTAS,
    Answer,
    ClusterInfo,
    InstanceInfo,
    RawFacts,
    ReservationInfo,
    SubnetInfo,
    ami_parameter,
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
# Static keys the AWS SDKs prefer to a profile named in AWS_PROFILE; boto3 ignores them for
# a profile it is given, as AWS's own CLI does for --profile.
_KEY_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def session(profile: str | None, region: str | None):
    """A boto3 session with this profile (None: AWS_PROFILE, else the default chain)."""
    import boto3
    from botocore.exceptions import ProfileNotFound

    if profile == "":
        raise UsageError("--profile needs the name of a profile in the AWS config files")
    with _errors(region or "the default region"):  # a bad AWS config file fails here
        try:
            return boto3.session.Session(profile_name=profile, region_name=region)
        except ProfileNotFound:
            where = "--profile" if profile else _profile_env()
            name = profile or os.environ.get(where, "")
            files = " or ".join(
                os.environ.get(var) or os.path.expanduser(f"~/.aws/{default}")
                for var, default in (
                    ("AWS_CONFIG_FILE", "config"),
                    ("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
                )
            )
            raise UsageError(
                f"AWS profile {name!r} not found in {files} (from {where})",
                hint=f"check {where} against `aws configure list-profiles`",
            ) from None


def _profile_env() -> str:
    return next((v for v in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE") if os.environ.get(v)), "")


def default_region(profile: str | None) -> tuple[str, str] | None:
    """(region, where it came from) for a cluster spec that names no region: AWS_REGION,
    AWS_DEFAULT_REGION, else the profile's `region` in the AWS config file; None if none."""
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(var):
            return os.environ[var], var
    found = session(profile, None)
    if not found.region_name:
        return None
    return found.region_name, f"the AWS profile {found.profile_name!r}"


def terraform_env(profile: str | None) -> dict[str, str | None]:
    """Terraform's environment for --profile (None: unset): the AWS provider and the S3 state
    backend both read AWS_PROFILE, and the backend takes no variables (a -backend-config
    profile would make Terraform see a changed backend whenever the profile changes)."""
    if profile is None:
        return {}
    return {"AWS_PROFILE": profile, **dict.fromkeys(_KEY_ENV)}


def gather(spec: ClusterSpec, aws=None) -> RawFacts:
    """The preflight's answers, through the boto3 session AWS (`session`; default: the
    environment's credentials), or one error; never longer than PREFLIGHT_DEADLINE_S (an
    endpoint that trickles its answers does not hold gpuctl)."""
    from gpuctl.runtime import deadline

    aws = aws or session(None, spec.region)
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
        with _errors(spec.region):
            return aws.client(name, config=config)

    with _errors(spec.region):
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
        with _errors(spec.region):
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
                name = ami_parameter(version, arch)
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
            error=redact(f"{code or 'HTTP ' + str(status)}: {_first_line(message)}"),
            missing=code in _NOT_FOUND,
        )
    except BotoCoreError as e:  # its text can quote the endpoint URL
        return Answer(error=redact(_first_line(str(e))))


class _errors:
    """The questions everything else depends on: failures there stop the preflight."""

    def __init__(self, region: str):
        self.region = region

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):  # noqa: V107 (the protocol's parameters)
        if exc is None:
            return False
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            EndpointConnectionError,
            NoCredentialsError,
            NoRegionError,
        )

        if isinstance(exc, NoCredentialsError):
            raise BackendError(
                "no AWS credentials found",
                hint="run `aws configure`, set AWS_PROFILE, or export "
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
            ) from None
        if isinstance(exc, EndpointConnectionError):
            raise BackendError(
                f"cannot reach AWS in {self.region}: {_first_line(str(exc))}",
                hint="check the network, the region name and AWS_ENDPOINT_URL",
            ) from None
        if isinstance(exc, ClientError):
            err = exc.response.get("Error", {})
            raise BackendError(
                f"AWS refused the preflight in {self.region}: "
                f"{err.get('Code', '')}: {_first_line(err.get('Message', ''))}",
                hint="the credentials need ec2:Describe* permissions",
            ) from None
        from botocore.parsers import ResponseParserError

        if isinstance(exc, (BotoCoreError, NoRegionError, ResponseParserError)):
            raise BackendError(f"AWS preflight failed: {_first_line(str(exc))}") from None
        if isinstance(exc, ValueError):  # botocore: e.g. an AWS_ENDPOINT_URL that is no URL
            raise BackendError(
                f"AWS preflight failed: {_first_line(str(exc))}",
                hint="check AWS_ENDPOINT_URL and the region",
            ) from None
        return False


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0] if text else ""
