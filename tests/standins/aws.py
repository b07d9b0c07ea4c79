"""AWS stand-in: moto in server mode on 127.0.0.1, reached by boto3 over real HTTP.

One server per test session (its first EC2 call costs ~2 s); its state is reset after each
test. Tests point boto3 at it with AWS_ENDPOINT_URL, which botocore reads itself, so the
code under test runs unchanged.
"""

from __future__ import annotations

import datetime
import logging
import urllib.request

import pytest

ACCOUNT = "123456789012"  # moto's default account


class MotoAWS:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint

    def client(self, service: str, region: str = "us-east-1"):
        import boto3

        return boto3.client(service, region_name=region, endpoint_url=self.endpoint)

    def create_eks_cluster(
        self,
        name: str,
        version: str = "1.31",
        region: str = "us-east-1",
        subnet_ids: list[str] | None = None,
        security_group_ids: list[str] | None = None,
    ):
        self.client("eks", region).create_cluster(
            name=name,
            version=version,
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks",
            resourcesVpcConfig={
                "subnetIds": subnet_ids or [],
                "securityGroupIds": security_group_ids or [],
            },
        )

    def create_network(
        self, zones: dict[str, bool], cidr: str = "10.1.0.0/16", region: str = "us-east-1"
    ) -> tuple[str, dict[str, str], str]:
        """A VPC with one subnet per zone (zone → public?) and a security group:
        (vpc id, zone → subnet id, security group id)."""
        ec2 = self.client("ec2", region)
        vpc = ec2.create_vpc(CidrBlock=cidr)["Vpc"]["VpcId"]
        subnets = {}
        base = cidr.split(".")
        for i, (zone, public) in enumerate(zones.items()):
            block = f"{base[0]}.{base[1]}.{i}.0/24"
            sid = ec2.create_subnet(VpcId=vpc, CidrBlock=block, AvailabilityZone=zone)["Subnet"][
                "SubnetId"
            ]
            if public:
                ec2.modify_subnet_attribute(SubnetId=sid, MapPublicIpOnLaunch={"Value": True})
            subnets[zone] = sid
        sg = ec2.create_security_group(GroupName="eks-cluster", Description="eks", VpcId=vpc)
        return vpc, subnets, sg["GroupId"]

    def seed_public_parameter(self, name: str, value: str, region: str = "us-east-1") -> None:
        """Put an AWS-owned public parameter (e.g. the EKS GPU AMI id) into moto's SSM.

        PutParameter rightly refuses names under /aws/, as AWS does, so this writes to the
        server's in-process store the way AWS itself publishes the parameter."""
        from moto.ssm.models import Parameter, ssm_backends

        store = ssm_backends[ACCOUNT][region]._parameters
        store[name].append(
            Parameter(
                account_id=ACCOUNT,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=datetime.datetime.now(datetime.timezone.utc),
                version=1,
                data_type="aws:ec2:image",
            )
        )

    def reset(self) -> None:
        urllib.request.urlopen(
            urllib.request.Request(self.endpoint + "/moto-api/reset", method="POST"), timeout=30
        ).close()


@pytest.fixture(scope="session")
def moto_server():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log per request
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws(moto_server, monkeypatch):
    """boto3 → moto for this test: fake credentials, endpoint set, state reset afterwards."""
    for var in (
        "AWS_PROFILE",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_SESSION_TOKEN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    stand_in = MotoAWS(moto_server)
    yield stand_in
    stand_in.reset()
