"""What `share timeslice` and `share off` plan from where the device plugin reads its configs
and the nodes read (pure): the steps in order (the ConfigMap's keys before any label), what
each changes, and when there is nothing to do."""

import pytest

from gpuctl.common.errors import GpuctlError
from gpuctl.k8s import device_plugin
from gpuctl.sharing.core import config as sharing
from gpuctl.sharing.core import plans
from tests.gpu_cluster import node

NS, CM = "gpu-operator", "dp-config"
TS4 = sharing.make_sharing(device_plugin.TIME_SLICING, 4)
LABEL = device_plugin.CONFIG_LABEL


def target(data=None, selection=sharing.ADVISED):
    return plans.Target(NS, CM, True, data, selection)


def steps(p):
    return [(s.action, s.target) for s in p.plan.steps]


def test_a_new_config_map_is_created_before_the_nodes_are_labelled():
    nodes = [node("gpu-1"), node("gpu-2"), node("cpu-1", 0, gfd=False)]
    p = plans.plan_share(target(), nodes, TS4, None, (), None, False)
    assert steps(p) == [
        ("create", f"ConfigMap {NS}/{CM}"),
        ("label", "node gpu-1"),
        ("label", "node gpu-2"),
    ]
    cm = p.plan.steps[0].detail["object"]
    assert set(cm["data"]) == {"ts-4", "default"}  # and a default without sharing
    assert device_plugin.parse_config(cm["data"]["default"]) is None
    assert p.plan.steps[1].why == f"{LABEL}: (none) → ts-4"
    assert p.question.startswith("Apply time-slicing ×4 to 2 node(s)?")


def test_keys_are_added_to_an_existing_config_map_and_nodes_already_on_it_are_left():
    data = {"default": sharing.NO_SHARING_TEXT}
    p = plans.plan_share(
        target(data), [node("gpu-1", labels={LABEL: "old"})], TS4, None, (), None, False
    )
    assert steps(p) == [("patch", f"ConfigMap {NS}/{CM}"), ("label", "node gpu-1")]
    assert p.plan.steps[0].detail == {"data": {"ts-4": device_plugin.config_text(TS4)}}
    done = {**data, "ts-4": device_plugin.config_text(TS4)}
    again = plans.plan_share(
        target(done), [node("gpu-1", labels={LABEL: "ts-4"})], TS4, None, (), None, False
    )
    assert again.config_map_action == "unchanged" and again.plan.empty


def test_what_cannot_be_planned_is_refused():
    with pytest.raises(GpuctlError, match="no NVIDIA device plugin DaemonSet"):
        plans.plan_share(None, [node("gpu-1")], TS4, None, (), None, False)
    other = {"ts-4": device_plugin.config_text(sharing.make_sharing(device_plugin.MPS, 4))}
    with pytest.raises(GpuctlError, match="already has a config 'ts-4' with different"):
        plans.plan_share(target(other), [node("gpu-1")], TS4, None, (), None, False)
    with pytest.raises(GpuctlError, match="no GPU node matches 'pool=b'"):
        plans.plan_share(target(), [node("gpu-1")], TS4, None, (), "pool=b", False)


def test_offline_every_named_node_is_labelled_in_a_new_config_map():
    p = plans.plan_offline(TS4, None, ("gpu-1",), None, None)
    assert (p.target.namespace, p.target.config_map) == (
        plans.OFFLINE_NAMESPACE,
        device_plugin.DEFAULT_CONFIG_MAP,
    )
    assert [s.action for s in p.plan.steps] == ["create", "label"]


def test_off_removes_the_label_where_the_fallback_shares_nothing():
    data = {"default": sharing.NO_SHARING_TEXT, "ts-4": device_plugin.config_text(TS4)}
    p = plans.plan_off(target(data), [node("gpu-1", labels={LABEL: "ts-4"})], ("gpu-1",), None)
    assert steps(p) == [("label", "node gpu-1")]
    assert p.plan.steps[0].why.startswith(f"remove {LABEL}=ts-4")
    assert p.plan.steps[0].detail["object"]["metadata"]["labels"] == {LABEL: None}


def test_off_adds_a_default_without_sharing_first_where_the_fallback_shares():
    # the Helm chart's fallbacks: a lone sharing key is every unlabelled node's config
    lone = target(
        {"ts-4": device_plugin.config_text(TS4)}, sharing.Selection(None, ("named", "single"))
    )
    p = plans.plan_off(lone, [node("gpu-1", labels={LABEL: "ts-4"})], ("gpu-1",), None)
    assert steps(p) == [("patch", f"ConfigMap {NS}/{CM}"), ("label", "node gpu-1")]
    assert set(p.added) == {"default"}
    assert plans.fallback_change(lone, p.added)[0].startswith("'ts-4' (fallback single")


def test_off_on_nodes_without_the_label_and_a_safe_fallback_plans_nothing():
    p = plans.plan_off(target({"default": sharing.NO_SHARING_TEXT}), [node("gpu-1")], (), None)
    assert p.plan.empty and p.added == {}
