"""Plan summaries grouped by component: the root module call a resource sits in
(terraform/main.tf) says whether it is network, control plane, node groups or GPU stack."""

from gpuctl.provision.core.plan_summary import Change, PlanSummary, component_of


def test_every_root_call_has_its_component():
    assert component_of("module.vpc[0].module.this.aws_vpc.this[0]") == "network"
    assert (
        component_of("module.control_plane[0].module.eks.aws_eks_cluster.this[0]")
        == "control plane"
    )
    assert component_of('module.gpu_nodes["a100"].aws_autoscaling_group.this') == "node groups"
    assert component_of("module.karpenter[0].module.this.aws_sqs_queue.this[0]") == "node groups"
    assert component_of('module.karpenter_groups["a"].aws_placement_group.this[0]') == "node groups"
    assert component_of('module.node_pool_releases.helm_release.this["p"]') == "node groups"
    assert (
        component_of('module.gpu_stack_releases.helm_release.this["gpu-operator"]') == "GPU stack"
    )
    assert component_of("terraform_data.x") == "other"
    assert component_of("module.unknown.x") == "other"


def test_changes_come_in_component_order_then_by_action_and_address():
    summary = PlanSummary(
        changes=[
            Change(
                'module.gpu_stack_releases.helm_release.this["x"]', "create", "helm_release", ""
            ),
            Change('module.gpu_nodes["b"].aws_launch_template.this', "update", "", ""),
            Change('module.gpu_nodes["c"].aws_autoscaling_group.this', "create", "", ""),
            Change("module.vpc[0].aws_vpc.this", "delete", "", ""),
        ]
    )
    assert [(k, [c.address for c in cs]) for k, cs in summary.by_component()] == [
        ("network", ["module.vpc[0].aws_vpc.this"]),
        (
            "node groups",
            [
                'module.gpu_nodes["c"].aws_autoscaling_group.this',
                'module.gpu_nodes["b"].aws_launch_template.this',
            ],
        ),
        ("GPU stack", ['module.gpu_stack_releases.helm_release.this["x"]']),
    ]
    assert summary.to_dict()["changes"][0]["component"] == "GPU stack"
