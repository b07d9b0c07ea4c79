"""The one LabelSelector and node-affinity matcher, against apimachinery's rules
(pkg/apis/meta/v1/helpers.go LabelSelectorAsSelector, pkg/labels/selector.go Requirement)
and component-helpers' scheduling/corev1/nodeaffinity, on real node objects too."""

from __future__ import annotations

import pytest

from gpuctl.k8s.selectors import (
    expressions_match,
    label_selector_matches,
    node_selector_matches,
    pod_may_run_on,
)
from tests.node_corpus import corpus

POD = {"app": "llm", "tier": "serve"}


def expr(key, op, *values):
    out = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def sel(*exprs, **labels):
    out = {}
    if labels:
        out["matchLabels"] = labels
    if exprs:
        out["matchExpressions"] = list(exprs)
    return out


def test_a_null_selector_selects_nothing_an_empty_one_everything():
    assert not label_selector_matches(None, POD)
    assert not label_selector_matches(None, {})
    assert label_selector_matches({}, POD)
    assert label_selector_matches({"matchLabels": {}, "matchExpressions": []}, {})


def test_match_labels_need_the_key_with_that_value():
    assert label_selector_matches(sel(app="llm"), POD)
    assert not label_selector_matches(sel(app="web"), POD)
    assert not label_selector_matches(sel(zone="a"), POD)
    assert not label_selector_matches(sel(app="llm", tier="batch"), POD)  # ANDed


@pytest.mark.parametrize(
    ("requirement", "selected"),
    [
        (expr("app", "In", "llm", "web"), True),
        (expr("app", "In", "web"), False),
        (expr("zone", "In", "a"), False),  # In needs the key
        (expr("app", "NotIn", "web"), True),
        (expr("app", "NotIn", "llm"), False),
        (expr("zone", "NotIn", "a"), True),  # NotIn holds without the key
        (expr("app", "Exists"), True),
        (expr("zone", "Exists"), False),
        (expr("zone", "DoesNotExist"), True),
        (expr("app", "DoesNotExist"), False),
    ],
)
def test_each_operator_of_a_label_selector(requirement, selected):
    assert label_selector_matches(sel(requirement), POD) is selected


def test_expressions_and_labels_are_anded():
    assert label_selector_matches(sel(expr("tier", "In", "serve"), app="llm"), POD)
    assert not label_selector_matches(sel(expr("tier", "In", "batch"), app="llm"), POD)
    assert not label_selector_matches(sel(expr("tier", "Exists"), expr("app", "NotIn", "llm")), POD)


@pytest.mark.parametrize(
    "bad",
    [
        expr("app", "In"),  # In and NotIn need values
        expr("app", "NotIn"),
        expr("app", "Exists", "llm"),  # Exists and DoesNotExist take none
        expr("zone", "DoesNotExist", "a"),
        expr("app", "Equals", "llm"),  # not a LabelSelector operator
        expr("replicas", "Gt", "1"),  # Gt and Lt are node selector operators only
    ],
)
def test_a_selector_kubernetes_cannot_convert_selects_nothing(bad):
    # NotIn and DoesNotExist would hold here: only the conversion error stops them
    assert not label_selector_matches(sel(bad), {"app": "llm", "replicas": "3"})


NODE = {"gpu-count": "8", "pool": "train", "kubernetes.io/hostname": "n1"}


@pytest.mark.parametrize(
    ("requirement", "matched"),
    [
        (expr("pool", "In", "train"), True),
        (expr("pool", "NotIn", "train"), False),
        (expr("zone", "NotIn", "a"), True),
        (expr("pool", "Exists"), True),
        (expr("zone", "DoesNotExist"), True),
        (expr("gpu-count", "Gt", "4"), True),
        (expr("gpu-count", "Gt", "8"), False),
        (expr("gpu-count", "Lt", "+9"), True),  # Go's ParseInt takes a sign
        (expr("gpu-count", "Lt", "8"), False),
        (expr("gpu-count", "Gt", "-1"), True),
        (expr("zone", "Gt", "0"), False),  # Gt and Lt need the key
        (expr("pool", "Gt", "0"), False),  # ... with an integer value
        (expr("gpu-count", "Gt", "1", "2"), False),  # exactly one value
        (expr("gpu-count", "Gt", "4.5"), False),  # an integer one
        (expr("gpu-count", "Gt", "1_0"), False),  # as Go reads it, not Python
        (expr("gpu-count", "Lt", "9223372036854775808"), False),  # over int64
        (expr("pool", "In"), False),
        (expr("pool", "Exists", "train"), False),
        (expr("pool", "Matches", "train"), False),
    ],
)
def test_each_operator_of_a_node_selector_requirement(requirement, matched):
    assert expressions_match(NODE, [requirement]) is matched


def test_terms_are_ored_their_expressions_anded_and_an_empty_term_selects_no_node():
    train = {"matchExpressions": [expr("pool", "In", "train"), expr("gpu-count", "Gt", "4")]}
    serve = {"matchExpressions": [expr("pool", "In", "serve")]}
    assert node_selector_matches([serve, train], NODE, "n1")
    assert not node_selector_matches([serve], NODE, "n1")
    assert not node_selector_matches([{}], NODE, "n1")
    assert not node_selector_matches([{"matchExpressions": []}], NODE, "n1")
    assert not node_selector_matches([], NODE, "n1")
    assert node_selector_matches([{}, train], NODE, "n1")  # an empty term is skipped


def test_match_fields_select_by_the_node_name():
    pinned = {"matchFields": [expr("metadata.name", "In", "n1")]}
    assert node_selector_matches([pinned], NODE, "n1")
    assert not node_selector_matches([pinned], NODE, "n2")
    away = {"matchFields": [expr("metadata.name", "NotIn", "n1")]}
    assert node_selector_matches([away], NODE, "n2")
    assert not node_selector_matches([away], NODE, "n1")
    both = {"matchExpressions": [expr("pool", "In", "serve")], **pinned}
    assert not node_selector_matches([both], NODE, "n1")  # ANDed with the expressions
    two = {"matchFields": [expr("metadata.name", "In", "n1", "n2")]}
    assert not node_selector_matches([two], NODE, "n1")  # one value only
    exists = {"matchFields": [expr("metadata.name", "Exists")]}
    assert not node_selector_matches([exists], NODE, "n1")  # In and NotIn only


NODES = corpus()


def affinity(*terms):
    required = {"nodeSelectorTerms": list(terms)}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def test_a_pods_node_selector_and_affinity_both_hold_on_real_nodes():
    p4d, mig = NODES["karpenter-p4d"], NODES["gfd-a100-mig-single"]
    # Karpenter's own GPU requirement (gpuctl.provision.core.karpenter)
    gpus = {"matchExpressions": [expr("karpenter.k8s.aws/instance-gpu-count", "Gt", "0")]}
    spec = {"affinity": affinity(gpus)}
    assert pod_may_run_on(spec, p4d)
    assert not pod_may_run_on(spec, mig)
    spec["nodeSelector"] = {"karpenter.sh/capacity-type": "spot"}
    assert not pod_may_run_on(spec, p4d)  # the p4d is on-demand
    whole = {"matchExpressions": [expr("nvidia.com/mig.strategy", "NotIn", "single")]}
    assert pod_may_run_on({"affinity": affinity(whole)}, p4d)  # no label: NotIn holds
    assert not pod_may_run_on({"affinity": affinity(whole)}, mig)
    name = mig["metadata"]["name"]
    pinned = {"matchFields": [expr("metadata.name", "In", name)]}
    assert pod_may_run_on({"affinity": affinity(pinned)}, mig)
    assert not pod_may_run_on({"affinity": affinity(pinned)}, p4d)
    assert pod_may_run_on({}, p4d)  # no nodeSelector, no affinity: any node
    assert not pod_may_run_on({"affinity": affinity()}, p4d)  # required, no term: none
