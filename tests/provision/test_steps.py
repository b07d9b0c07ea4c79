"""`provision` and `destroy` as data: the plan a confirmed run carries out (one Terraform
apply, none when Terraform plans nothing), what a destroy may leave in the state, the
notes of a dry run, and the result of -o json|yaml."""

from pathlib import Path

import tests
from gpuctl.common.specfile import load_yaml
from gpuctl.provision.core.plan_summary import Change, PlanSummary
from gpuctl.provision.core.spec import parse_cluster
from gpuctl.provision.core.steps import (
    Outcome,
    apply_plan,
    destroy_plan,
    dry_run_notes,
    left_managed,
)

EXAMPLES = Path(tests.ROOT) / "examples"


def spec(name: str, extra: str = ""):
    path = EXAMPLES / name
    return parse_cluster(load_yaml(path.read_text() + extra, str(path)))


def summary(add=0, change=0, destroy=0, operation="plan", warnings=()):
    changes = [Change(f"module.vpc[0].terraform_data.n{i}", "create", "", "") for i in range(add)]
    return PlanSummary(changes, add, change, destroy, operation, warnings=list(warnings))


def test_a_confirmed_provision_is_one_apply_of_terraforms_plan():
    plan = apply_plan(spec("cluster.yaml"), summary(add=5, change=1, warnings=["deprecated x"]))
    assert plan.lines() == [
        "provision ml-prod in us-east-1:",
        "  1. apply Terraform's plan for ml-prod: Plan: 5 to add, 1 to change, 0 to destroy",
    ]
    (step,) = plan.steps
    assert step.detail == {"add": 5, "change": 1, "destroy": 0}
    assert plan.notes == ("deprecated x",)


def test_nothing_planned_by_terraform_is_an_empty_plan():
    plan = apply_plan(spec("cluster.yaml"), summary(warnings=["w"]))
    assert plan.empty and plan.notes == ("w",)
    assert destroy_plan(spec("cluster.yaml"), summary(operation="destroy")).empty


def test_a_destroy_plan_counts_what_it_removes():
    plan = destroy_plan(spec("cluster-existing.yaml"), summary(destroy=3, operation="destroy"))
    assert [s.text() for s in plan.steps] == [
        "destroy 3 resources of ml-prod-gpus: Destroy: 0 to add, 0 to change, 3 to destroy"
    ]
    assert plan.what == "destroy ml-prod-gpus in us-east-1"


def test_data_sources_left_in_the_state_are_not_resources_left_behind():
    state = [
        "data.aws_caller_identity.current",
        'module.gpu_nodes["a.b"].data.aws_ami.gpu',
        "module.control_plane[0].module.eks.data.aws_partition.current",
        "module.data.aws_s3_bucket.logs",  # a module named data makes resources
        "aws_s3_bucket.data",
        'module.gpu_nodes["data"].aws_autoscaling_group.this',
    ]
    assert left_managed(state) == state[3:]
    assert left_managed([]) == []


def test_a_dry_run_says_what_the_preflight_would_fill_in():
    notes = dry_run_notes(spec("cluster.yaml"))
    assert len(notes) == 1 and notes[0].startswith("Zones, GPU count and AMI")
    karpenter = dry_run_notes(spec("cluster-existing.yaml", "autoscaler: karpenter\n"))
    assert len(karpenter) == 2 and "existing cluster's subnets" in karpenter[1]


def test_the_result_names_only_what_the_run_got_to():
    outcome = Outcome("ml-prod", "/w", "/w/terraform.tfstate", notes=["printed only"])
    assert outcome.to_dict() == {
        "cluster": "ml-prod",
        "workdir": "/w",
        "state": "/w/terraform.tfstate",
    }
    outcome.summary = summary(add=1)
    outcome.applied = {"add": 1, "change": 0, "destroy": 0}
    outcome.outputs = {"vpc_id": "vpc-1"}
    data = outcome.to_dict()
    assert list(data) == ["cluster", "workdir", "state", "plan", "applied", "outputs"]
    assert data["plan"]["add"] == 1 and data["plan"]["changes"][0]["component"] == "network"
