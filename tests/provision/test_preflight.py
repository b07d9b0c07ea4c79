"""Preflight against moto's server through boto3 (no monkeypatching), and the judgement
of answers moto cannot give (quotas, capacity reservations) on plain data."""

import pytest

from gpuctl.adapters.aws import Aws
from gpuctl.common.errors import BackendError, UsageError
from gpuctl.common.specfile import load_yaml
from gpuctl.provision.aws import gather
from gpuctl.provision.core.cost import price_table
from gpuctl.provision.core.preflight import (
    Answer,
    ClusterInfo,
    InstanceInfo,
    RawFacts,
    ReservationInfo,
    SubnetInfo,
    ami_parameter,
    evaluate,
    vpc_zones,
)
from gpuctl.provision.core.spec import parse_cluster

AMI = "ami-0a1b2c3d4e5f67890"
A100 = "  - {name: a100, instance_type: p4d.24xlarge, min_size: 2, max_size: 10, gpu_type: a100}\n"
EXISTING = "kubernetes_cluster: {name: ml-prod-eks}\n"
NEW = 'vpc_cidr: 10.0.0.0/16\nkubernetes_cluster: {version: "1.31"}\n'


def spec(groups: str = A100, cluster: str = EXISTING, region: str = "us-east-1", extra: str = ""):
    text = (
        f"apiVersion: gpuctl/v1\nkind: Cluster\nname: ml-prod\nregion: {region}\n"
        f"{cluster}{extra}node_groups:\n{groups}"
    )
    return parse_cluster(load_yaml(text))


def ask(spec):
    """The preflight's answers through a session of the environment's AWS account."""
    return gather(spec, Aws().session(spec.region))


@pytest.fixture
def network(aws):
    """The existing cluster's VPC: private subnets in us-east-1a and 1b, a public one in 1e
    (p4d.24xlarge is offered in 1a-1d here, p5.48xlarge in 1a-1f)."""
    return aws.create_network({"us-east-1a": False, "us-east-1b": False, "us-east-1e": True})


@pytest.fixture
def account(aws, network):
    vpc, subnets, sg = network
    aws.create_eks_cluster(
        "ml-prod-eks", "1.31", subnet_ids=list(subnets.values()), security_group_ids=[sg]
    )
    aws.seed_public_parameter(ami_parameter("1.31", "x86_64"), AMI)
    return aws


def test_everything_checkable_is_checked(account, network):
    vpc, subnets, sg = network
    report = evaluate(spec(), ask(spec()))
    assert report.ok, report.blockers
    assert report.kubernetes_version == "1.31"  # read from the EKS cluster
    # the existing cluster's network: its VPC, its security group, no VPC of gpuctl's own
    assert report.cluster.vpc_id == vpc and report.cluster.security_group_ids == [sg]
    assert not report.cluster.vpc_zones
    g = report.groups[0]
    # the cluster's private subnets in zones offering p4d (1e is public and does not)
    assert g.subnet_ids == sorted([subnets["us-east-1a"], subnets["us-east-1b"]])
    assert g.zones == ["us-east-1a", "us-east-1b"]
    assert (g.instance.gpu_model, g.instance.gpu_count, g.instance.gpu_memory_mib) == (
        "A100",
        8,
        40960,
    )
    assert g.instance.vcpus == 96 and g.instance.max_efa_interfaces == 4
    assert g.ami_id == AMI and g.ami_parameter == ami_parameter("1.31", "x86_64")
    # moto has no EC2 quotas: said plainly, never reported as passed
    (quota,) = report.quotas
    assert quota.code == "L-417A185B" and quota.status == "unknown"
    assert quota.detail.startswith("could not check") and quota.needed_vcpus == 10 * 96
    price = price_table()["prices"]["p4d.24xlarge"]
    cost = report.cost_estimate()
    # an existing cluster: nothing but the GPU nodes costs gpuctl's money
    assert cost["min"]["hourly"] == round(2 * price, 2)
    assert cost["max"]["monthly"] == round(10 * price * 730, 0)
    facts = report.facts()
    assert facts.groups["a100"].subnet_ids == tuple(g.subnet_ids)
    assert facts.groups["a100"].gpu_count == 8 and facts.groups["a100"].ami_id == AMI
    assert facts.network.vpc_id == vpc and facts.network.security_group_ids == (sg,)
    # moto's describe_cluster has no authenticationMode: not checked, and said so
    assert any("authentication mode" in n for n in report.notes)


def test_spec_version_wins_and_a_missing_ami_blocks(account):
    s = spec(cluster='kubernetes_cluster: {name: ml-prod-eks, version: "1.99"}\n')
    report = evaluate(s, ask(s))
    assert report.kubernetes_version == "1.99"
    assert any("no EKS GPU AMI is published for Kubernetes 1.99" in b for b in report.blockers)
    assert any("differs from the EKS cluster's 1.31" in n for n in report.notes)


def test_missing_eks_cluster_blocks(aws):
    report = evaluate(spec(), ask(spec()))
    assert not report.ok
    assert any(
        "EKS cluster 'ml-prod-eks' does not exist in us-east-1" in b for b in report.blockers
    )


def test_no_cluster_subnet_in_an_offering_zone_blocks(aws):
    _, subnets, _ = aws.create_network({"us-east-1e": False, "us-east-1f": False})
    aws.create_eks_cluster("ml-prod-eks", subnet_ids=list(subnets.values()))
    report = evaluate(spec(), ask(spec()))
    (blocker,) = [b for b in report.blockers if "no subnet" in b]
    assert "zone offering p4d.24xlarge" in blocker and "us-east-1e, us-east-1f" in blocker


def test_only_public_subnets_are_used_with_a_note(aws):
    _, subnets, _ = aws.create_network({"us-east-1e": True})
    aws.create_eks_cluster("ml-prod-eks", subnet_ids=list(subnets.values()))
    s = spec(
        "  - {name: h100, instance_type: p5.48xlarge, min_size: 0, max_size: 2, gpu_type: h100}\n"
    )
    report = evaluate(s, ask(s))
    assert report.groups[0].subnet_ids == [subnets["us-east-1e"]]
    assert any("only public subnets" in n for n in report.notes)


def test_new_cluster_plans_its_own_network_and_admins(aws):
    aws.seed_public_parameter(ami_parameter("1.31", "x86_64"), AMI)
    s = spec(cluster=NEW.replace("}", ", admin_principals: [arn:aws:iam::123456789012:role/ops]}"))
    report = evaluate(s, ask(s))
    assert report.ok, report.blockers
    c = report.cluster
    assert c.create and c.name == "ml-prod" and c.vpc_id is None
    assert c.vpc_zones == ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]
    # the caller (moto's identity) and the spec's admins
    assert c.admins == ["arn:aws:sts::123456789012:user/moto", "arn:aws:iam::123456789012:role/ops"]
    assert report.groups[0].ami_id == AMI and report.groups[0].subnet_ids == []
    by = {comp.component: comp for comp in report.components}
    services = price_table()["services"]
    assert by["network"].hourly("max") == services["nat_gateway"]["hourly"]
    assert by["control plane"].hourly("min") == round(
        services["eks_cluster"]["hourly"] + 2 * price_table()["prices"]["m6i.large"], 4
    )
    assert by["GPU stack"].hourly("max") == 0 and "no instances" in by["GPU stack"].note
    assert report.facts().vpc_zones == tuple(c.vpc_zones)


def test_a_new_cluster_whose_name_is_taken_blocks(account):
    s = spec(cluster=NEW.replace("{", "{create: true, name: ml-prod-eks, "))
    report = evaluate(s, ask(s))
    assert any(
        "an EKS cluster named 'ml-prod-eks' already exists" in b and "{name: ml-prod-eks}" in b
        for b in report.blockers
    )


def test_efa_interfaces_come_from_ec2_and_pin_one_zone(account):
    s = spec(
        "  - {name: h100, instance_type: p5.48xlarge, min_size: 0, max_size: 2, gpu_type: h100,"
        " efa: true}\n"
    )
    report = evaluate(s, ask(s))
    assert report.ok, report.blockers
    g = report.groups[0]
    assert g.efa_interfaces == 32  # p5.48xlarge: MaximumEfaInterfaces
    assert len(g.zones) == 1 and len(g.subnet_ids) == 1  # a cluster placement group's zone
    assert any("placement group" in n for n in report.notes)
    assert report.facts().groups["h100"].efa_interfaces == 32


def test_efa_on_a_type_without_it_blocks(account):
    s = spec(
        "  - {name: l40s, instance_type: g6e.2xlarge, min_size: 0, max_size: 2, gpu_type: l40s,"
        " efa: true}\n"
    )
    report = evaluate(s, ask(s))
    assert any("g6e.2xlarge does not support EFA" in b for b in report.blockers)


def test_a_reservation_moto_cannot_describe_is_a_note_not_a_pass(account):
    s = spec(A100.replace("}", ", capacity_reservation: cr-0123456789abcdef0}"))
    report = evaluate(s, ask(s))
    assert any(
        "could not check capacity reservation cr-0123456789abcdef0" in n for n in report.notes
    )
    assert report.groups[0].reservation is None


def test_unknown_and_gpu_less_instance_types_block(account):
    s = spec(
        "  - {name: typo, instance_type: p4x.24xlarge, min_size: 0, max_size: 1, gpu_type: a}\n"
        "  - {name: cpu, instance_type: m5.large, min_size: 0, max_size: 1, gpu_type: none}\n"
    )
    report = evaluate(s, ask(s))
    text = "\n".join(report.blockers)
    assert "typo: p4x.24xlarge is not an instance type EC2 knows" in text
    assert "typo: p4x.24xlarge is not offered in any availability zone" in text
    assert "cpu: m5.large has no GPUs or Neuron devices" in text


def test_spot_group_uses_the_spot_quota_and_notes_the_estimate(account):
    s = spec(
        "  - {name: h100, instance_type: p5.48xlarge, min_size: 0, max_size: 4, gpu_type: h100,"
        " capacity_type: spot}\n"
    )
    report = evaluate(s, ask(s))
    assert report.ok, report.blockers
    assert [q.code for q in report.quotas] == ["L-7212CCBC"]
    assert report.groups[0].instance.gpu_model == "H100"
    assert report.cost_estimate()["min"]["hourly"] == 0
    assert any("spot" in n and "upper bound" in n for n in report.notes)


def test_no_credentials_is_one_clear_error(aws, monkeypatch, tmp_path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(BackendError, match="no AWS credentials") as err:
        ask(spec())
    assert "aws configure" in err.value.hint


def unused_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


def test_unreachable_endpoint_is_one_clear_error(aws, monkeypatch):
    port = unused_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(BackendError, match="cannot reach AWS in us-east-1"):
        ask(spec())


# ---- judgements moto cannot produce (no EC2 quotas, no capacity reservations) ----

P4D = InstanceInfo("p4d.24xlarge", 96, ("x86_64",), "A100", "NVIDIA", 8, 40960, True, 4)
SUBNETS = {
    "subnet-a": SubnetInfo("subnet-a", "us-east-1a", "vpc-1", False),
    "subnet-b": SubnetInfo("subnet-b", "us-east-1b", "vpc-1", False),
}


def raw(quota: Answer = Answer(2000.0), vcpus: int = 96, **over) -> RawFacts:
    info = InstanceInfo("p4d.24xlarge", vcpus, ("x86_64",), "A100", "NVIDIA", 8, 40960)
    base = dict(
        region_zones=["us-east-1a", "us-east-1b"],
        cluster=Answer(ClusterInfo("1.31", "vpc-1", tuple(SUBNETS), (), "sg-cluster", "API")),
        offerings={"p4d.24xlarge": ["us-east-1a", "us-east-1b"]},
        instances={"p4d.24xlarge": Answer(info)},
        amis={ami_parameter("1.31", "x86_64"): Answer(AMI)},
        quotas={"L-417A185B": quota},
        subnets=SUBNETS,
    )
    return RawFacts(**{**base, **over})


def test_quota_too_small_blocks():
    report = evaluate(spec(), raw(Answer(384.0)))
    (q,) = report.quotas
    assert q.status == "insufficient" and q.needed_vcpus == 960
    assert any("384 vCPUs; max size of a100 needs 960" in b for b in report.blockers)


def test_quota_large_enough_passes():
    report = evaluate(spec(), raw(Answer(1152.0)))
    assert report.ok and report.quotas[0].status == "ok"
    # the security group EKS made for the cluster, not its additional ones
    assert report.cluster.security_group_ids == ["sg-cluster"]


def test_quota_groups_sharing_a_family_add_up():
    s = spec(
        "  - {name: a, instance_type: p4d.24xlarge, min_size: 0, max_size: 4, gpu_type: a100}\n"
        "  - {name: b, instance_type: p4d.24xlarge, min_size: 0, max_size: 4, gpu_type: a100}\n"
    )
    report = evaluate(s, raw(Answer(700.0)))
    (q,) = report.quotas
    assert q.groups == ["a", "b"] and q.needed_vcpus == 768 and q.status == "insufficient"


def test_zone_offering_outside_the_region_list_is_ignored():
    report = evaluate(spec(), raw(offerings={"p4d.24xlarge": ["us-west-2a"]}))
    assert any("not offered in any availability zone" in b for b in report.blockers)


def test_a_config_map_only_cluster_blocks():
    info = ClusterInfo("1.31", "vpc-1", tuple(SUBNETS), (), "sg-1", "CONFIG_MAP")
    report = evaluate(spec(), raw(cluster=Answer(info)))
    assert any("access entries" in b and "API_AND_CONFIG_MAP" in b for b in report.blockers)


def test_unknown_price_is_said_not_guessed():
    s = spec(
        "  - {name: x, instance_type: p4d.24xlarge, min_size: 1, max_size: 2, gpu_type: a}\n"
        "  - {name: y, instance_type: g6e.2xlarge, min_size: 1, max_size: 2, gpu_type: l40s}\n"
    )
    info = InstanceInfo("g6e.2xlarge", 8, ("x86_64",), "L40S", "NVIDIA", 1, 45776)
    r = raw(offerings={"p4d.24xlarge": ["us-east-1a"], "g6e.2xlarge": ["us-east-1a"]})
    r.instances["g6e.2xlarge"] = Answer(info)
    report = evaluate(s, r)
    assert report.cost_estimate()["max"] == {"hourly": None, "monthly": None}
    assert any("no price for g6e.2xlarge" in n for n in report.notes)


def reservation(**over) -> ReservationInfo:
    base = dict(
        id="cr-0123456789abcdef0",
        instance_type="p4d.24xlarge",
        zone="us-east-1b",
        state="active",
        reservation_type="default",
        total=10,
        available=10,
    )
    return ReservationInfo(**{**base, **over})


def reserved(rtype: str = "on-demand"):
    return spec(
        A100.replace("}", f", capacity_reservation: {{id: cr-0123456789abcdef0, type: {rtype}}}}}")
    )


def test_a_reservation_pins_the_group_to_its_zone():
    r = raw(reservations={"cr-0123456789abcdef0": Answer(reservation())})
    report = evaluate(reserved(), r)
    assert report.ok, report.blockers
    g = report.groups[0]
    assert g.zones == ["us-east-1b"] and g.subnet_ids == ["subnet-b"]
    assert g.reservation.id == "cr-0123456789abcdef0"


@pytest.mark.parametrize(
    "over, rtype, message",
    [
        ({"instance_type": "p5.48xlarge"}, "on-demand", "holds p5.48xlarge, not p4d.24xlarge"),
        ({"state": "expired"}, "on-demand", "is expired"),
        ({"zone": "us-east-1c"}, "on-demand", "is in us-east-1c, where the group cannot go"),
        ({"reservation_type": "capacity-block"}, "on-demand", "is a Capacity Block"),
        ({}, "capacity-block", "is an On-Demand Capacity Reservation"),
    ],
)
def test_a_reservation_that_cannot_serve_the_group_blocks(over, rtype, message):
    r = raw(reservations={"cr-0123456789abcdef0": Answer(reservation(**over))})
    report = evaluate(reserved(rtype), r)
    assert any(message in b for b in report.blockers), report.blockers


def test_a_missing_reservation_blocks_and_a_small_one_is_noted():
    r = raw(reservations={"cr-0123456789abcdef0": Answer(missing=True, error="NotFound")})
    assert any("does not exist" in b for b in evaluate(reserved(), r).blockers)
    r = raw(reservations={"cr-0123456789abcdef0": Answer(reservation(total=4))})
    report = evaluate(reserved(), r)
    assert report.ok and any("holds 4 instance(s), max_size is 10" in n for n in report.notes)


def test_capacity_block_cost_is_noted():
    r = raw(
        reservations={
            "cr-0123456789abcdef0": Answer(reservation(reservation_type="capacity-block"))
        }
    )
    report = evaluate(reserved("capacity-block"), r)
    assert report.ok, report.blockers
    assert any("paid for when it is reserved" in n for n in report.notes)


@pytest.mark.parametrize(
    "groups, region, want",
    [
        (["us-east-1b"], ["us-east-1a", "us-east-1b", "us-east-1c"], ["us-east-1a", "us-east-1b"]),
        ([], ["us-east-1c", "us-east-1a"], ["us-east-1a", "us-east-1c"]),
        ([f"z{i}" for i in range(9)], [f"z{i}" for i in range(9)], [f"z{i}" for i in range(6)]),
        (["other-1a"], ["us-east-1a", "us-east-1b"], ["us-east-1a", "us-east-1b"]),
    ],
)
def test_a_new_vpc_spans_two_to_six_zones(groups, region, want):
    assert vpc_zones(groups, region) == want


def test_price_table_states_its_date_and_source():
    table = price_table()
    assert table["as_of"] and table["source"].startswith("https://aws.amazon.com/")
    assert all(isinstance(v, float) and v > 0 for v in table["prices"].values())
    assert all(
        s["source"].startswith("https://aws.amazon.com/") for s in table["services"].values()
    )


def test_an_unknown_aws_profile_is_one_clear_error(aws, monkeypatch, tmp_path):
    (tmp_path / "config").write_text("[profile prod]\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "typo")
    with pytest.raises(UsageError, match="AWS profile 'typo' not found") as err:
        ask(spec())  # bad input: exit 2
    assert "AWS_PROFILE" in err.value.hint


def test_credentials_in_the_endpoint_url_are_masked(aws, monkeypatch):
    port = unused_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://key:s3cr3t@127.0.0.1:{port}")
    with pytest.raises(BackendError) as err:
        ask(spec())
    assert f"http://***@127.0.0.1:{port}" in err.value.message
    assert "s3cr3t" not in str(err.value)


def test_a_trainium_group_reads_its_neuron_devices_the_neuron_ami_and_the_trn_quota(account):
    # moto's instance table carries EC2's NeuronInfo for trn2.48xlarge (16 Trainium2)
    account.seed_public_parameter(ami_parameter("1.31", "x86_64", "neuron"), "ami-0feedface0000001")
    s = spec(
        "  - {name: trn2, instance_type: trn2.48xlarge, min_size: 0, max_size: 2,"
        " gpu_type: trainium2}\n"
    )
    report = evaluate(s, ask(s))
    assert not [b for b in report.blockers if "no GPUs" in b], report.blockers
    g = report.groups[0]
    assert (g.instance.gpu_model, g.instance.gpu_count, g.instance.gpu_manufacturer) == (
        "Trainium2",
        16,
        "AWS",
    )
    assert g.ami_parameter == ami_parameter("1.31", "x86_64", "neuron")
    assert g.ami_parameter.endswith("/x86_64/neuron/recommended/image_id")
    assert g.ami_id == "ami-0feedface0000001"
    (quota,) = report.quotas
    assert (quota.code, quota.name) == ("L-2C3B7624", "Running On-Demand Trn instances")
    assert report.facts().groups["trn2"].gpu_count == 16
