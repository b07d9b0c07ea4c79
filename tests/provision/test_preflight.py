"""Preflight against moto's server through boto3 (no monkeypatching), and the judgement
of answers moto cannot give (quotas) on plain data."""

import pytest

from gpuctl.common.errors import BackendError
from gpuctl.common.specfile import load_yaml
from gpuctl.provision.aws import gather
from gpuctl.provision.preflight import (
    Answer,
    InstanceInfo,
    RawFacts,
    ami_parameter,
    evaluate,
    price_table,
)
from gpuctl.provision.spec import parse_cluster

AMI = "ami-0a1b2c3d4e5f67890"


def spec(groups: str = "", **top):
    text = (
        "apiVersion: gpuctl/v1\nkind: Cluster\nname: ml-prod\nregion: {region}\n"
        "vpc_cidr: 10.0.0.0/16\nkubernetes_cluster: ml-prod-eks\n{extra}node_groups:\n{groups}"
    )
    groups = groups or (
        "  - {name: a100, instance_type: p4d.24xlarge, min_size: 2, max_size: 10, gpu_type: a100}\n"
    )
    extra = "".join(f"{k}: {v}\n" for k, v in top.items() if k != "region")
    return parse_cluster(
        load_yaml(text.format(region=top.get("region", "us-east-1"), extra=extra, groups=groups))
    )


@pytest.fixture
def account(aws):
    aws.create_eks_cluster("ml-prod-eks", version="1.31")
    aws.seed_public_parameter(ami_parameter("1.31", "x86_64"), AMI)
    return aws


def test_everything_checkable_is_checked(account):
    report = evaluate(spec(), gather(spec()))
    assert report.ok, report.blockers
    assert report.kubernetes_version == "1.31"  # read from the EKS cluster
    g = report.groups[0]
    offered = {
        o["Location"]
        for o in account.client("ec2").describe_instance_type_offerings(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": ["p4d.24xlarge"]}],
        )["InstanceTypeOfferings"]
    }
    assert offered and set(g.zones) == offered
    assert (g.instance.gpu_model, g.instance.gpu_count, g.instance.gpu_memory_mib) == (
        "A100",
        8,
        40960,
    )
    assert g.instance.vcpus == 96
    assert g.ami_id == AMI and g.ami_parameter == ami_parameter("1.31", "x86_64")
    # moto has no EC2 quotas: said plainly, never reported as passed
    (quota,) = report.quotas
    assert quota.code == "L-417A185B" and quota.status == "unknown"
    assert quota.detail.startswith("could not check") and quota.needed_vcpus == 10 * 96
    price = price_table()["prices"]["p4d.24xlarge"]
    cost = report.cost_estimate()
    assert cost["min"]["hourly"] == round(2 * price, 2)
    assert cost["max"]["monthly"] == round(10 * price * 730, 0)
    facts = report.facts()
    assert facts.groups["a100"].zones == tuple(sorted(offered))
    assert facts.groups["a100"].gpu_count == 8 and facts.groups["a100"].ami_id == AMI


def test_spec_version_wins_and_a_missing_ami_blocks(account):
    s = spec(kubernetes_version='"1.99"')
    report = evaluate(s, gather(s))
    assert report.kubernetes_version == "1.99"
    assert any("no EKS GPU AMI is published for Kubernetes 1.99" in b for b in report.blockers)
    assert any("differs from the EKS cluster's 1.31" in n for n in report.notes)


def test_missing_eks_cluster_blocks(aws):
    report = evaluate(spec(), gather(spec()))
    assert not report.ok
    assert any(
        "EKS cluster 'ml-prod-eks' does not exist in us-east-1" in b for b in report.blockers
    )


def test_unknown_and_gpu_less_instance_types_block(account):
    s = spec(
        "  - {name: typo, instance_type: p4x.24xlarge, min_size: 0, max_size: 1, gpu_type: a}\n"
        "  - {name: cpu, instance_type: m5.large, min_size: 0, max_size: 1, gpu_type: none}\n"
    )
    report = evaluate(s, gather(s))
    text = "\n".join(report.blockers)
    assert "typo: p4x.24xlarge is not an instance type EC2 knows" in text
    assert "typo: p4x.24xlarge is not offered in any availability zone" in text
    assert "cpu: m5.large has no GPUs" in text


def test_spot_group_uses_the_spot_quota_and_notes_the_estimate(account):
    s = spec(
        "  - {name: h100, instance_type: p5.48xlarge, min_size: 0, max_size: 4, gpu_type: h100,"
        " capacity_type: spot}\n"
    )
    report = evaluate(s, gather(s))
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
        gather(spec())
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
        gather(spec())


# ---- judgements moto cannot produce (its Service Quotas has no EC2) ----


def raw(quota: Answer, vcpus: int = 96, **over) -> RawFacts:
    info = InstanceInfo("p4d.24xlarge", vcpus, ("x86_64",), "A100", "NVIDIA", 8, 40960)
    base = dict(
        region_zones=["us-east-1a"],
        eks_version=Answer("1.31"),
        offerings={"p4d.24xlarge": ["us-east-1a"]},
        instances={"p4d.24xlarge": Answer(info)},
        amis={ami_parameter("1.31", "x86_64"): Answer(AMI)},
        quotas={"L-417A185B": quota},
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


def test_quota_groups_sharing_a_family_add_up():
    s = spec(
        "  - {name: a, instance_type: p4d.24xlarge, min_size: 0, max_size: 4, gpu_type: a100}\n"
        "  - {name: b, instance_type: p4d.24xlarge, min_size: 0, max_size: 4, gpu_type: a100}\n"
    )
    report = evaluate(s, raw(Answer(700.0)))
    (q,) = report.quotas
    assert q.groups == ["a", "b"] and q.needed_vcpus == 768 and q.status == "insufficient"


def test_zone_offering_outside_the_region_list_is_ignored():
    report = evaluate(spec(), raw(Answer(2000.0), offerings={"p4d.24xlarge": ["us-west-2a"]}))
    assert any("not offered in any availability zone" in b for b in report.blockers)


def test_unknown_price_is_said_not_guessed():
    s = spec(
        "  - {name: x, instance_type: p4d.24xlarge, min_size: 1, max_size: 2, gpu_type: a}\n"
        "  - {name: y, instance_type: g6e.2xlarge, min_size: 1, max_size: 2, gpu_type: l40s}\n"
    )
    info = InstanceInfo("g6e.2xlarge", 8, ("x86_64",), "L40S", "NVIDIA", 1, 45776)
    r = raw(
        Answer(2000.0), offerings={"p4d.24xlarge": ["us-east-1a"], "g6e.2xlarge": ["us-east-1a"]}
    )
    r.instances["g6e.2xlarge"] = Answer(info)
    report = evaluate(s, r)
    assert report.cost_estimate()["max"] == {"hourly": None, "monthly": None}
    assert any("no price for g6e.2xlarge" in n for n in report.notes)


def test_price_table_states_its_date_and_source():
    table = price_table()
    assert table["as_of"] and table["source"].startswith("https://aws.amazon.com/")
    assert all(isinstance(v, float) and v > 0 for v in table["prices"].values())


def test_an_unknown_aws_profile_is_one_clear_error(aws, monkeypatch, tmp_path):
    (tmp_path / "config").write_text("[profile prod]\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "typo")
    with pytest.raises(BackendError, match="AWS profile 'typo' not found") as err:
        gather(spec())
    assert "AWS_PROFILE" in err.value.hint


def test_credentials_in_the_endpoint_url_are_masked(aws, monkeypatch):
    port = unused_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://key:s3cr3t@127.0.0.1:{port}")
    with pytest.raises(BackendError) as err:
        gather(spec())
    assert f"http://***@127.0.0.1:{port}" in err.value.message
    assert "s3cr3t" not in str(err.value)
