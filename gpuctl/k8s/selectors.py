"""Kubernetes' structured selectors, matched as Kubernetes matches them. Pure.

- A LabelSelector (matchLabels and matchExpressions: In, NotIn, Exists, DoesNotExist), as
  apimachinery's LabelSelectorAsSelector: a null selector selects nothing, an empty one
  ({}) everything; one it cannot convert (an unknown operator, In or NotIn without values,
  Exists or DoesNotExist with values) selects nothing, as the eviction API and the
  PodDisruptionBudget lister treat it.
- Node affinity (nodeSelectorTerms), as component-helpers' nodeaffinity: the terms are
  ORed, a term's matchExpressions (In, NotIn, Exists, DoesNotExist, Gt, Lt) and matchFields
  (In and NotIn on metadata.name, one value each) ANDed; an empty term, or one that does not
  convert, selects no node.
- A pod's required placement: its nodeSelector and its required node affinity, both.

Each requirement is matched by gpuctl.common.selector.holds, the one rule for a requirement.
Key and value syntax is not checked: the API server refuses objects that break it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuctl.common.selector import holds, integer
from gpuctl.k8s.objects import labels_of, name_of

Labels = Mapping[str, str]
_LABEL_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
_NODE_OPERATORS = {**_LABEL_OPERATORS, "Gt": "gt", "Lt": "lt"}
_FIELD_OPERATORS = {"In": "=", "NotIn": "!="}


def expression(key: str, op: str, values: Iterable[str] = ()) -> dict[str, Any]:
    """A node selector requirement (matchExpressions entry); values deduplicated, in order."""
    out: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn", "Gt", "Lt"):
        out["values"] = list(dict.fromkeys(values))
    return out


def _holds(expr: Mapping[str, Any], operators: Mapping[str, str], labels: Labels) -> bool:
    """Whether LABELS meet EXPR; not where Kubernetes would not convert it."""
    op = operators.get(str(expr.get("operator")))
    values: Sequence[str] = expr.get("values") or ()
    if op is None:
        return False
    if op in ("in", "notin") and not values:
        return False
    if op in ("exists", "!exists") and values:
        return False
    if op in ("gt", "lt", "=", "!=") and len(values) != 1:
        return False
    if op in ("gt", "lt") and integer(values[0]) is None:
        return False
    return holds(op, str(expr.get("key", "")), values, labels)


def _all_hold(
    exprs: Iterable[Mapping[str, Any]], operators: Mapping[str, str], labels: Labels
) -> bool:
    return all(_holds(e, operators, labels) for e in exprs)


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Labels) -> bool:
    """Whether the LabelSelector SELECTOR selects an object with LABELS."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        # a matchLabels pair is `key = value`: the key is there with that value
        return False
    return _all_hold(selector.get("matchExpressions") or (), _LABEL_OPERATORS, labels)


def expressions_match(labels: Labels, exprs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether node LABELS meet every node selector requirement of EXPRS (none: no)."""
    return bool(exprs) and _all_hold(exprs, _NODE_OPERATORS, labels)


def term_matches(term: Mapping[str, Any], labels: Labels, name: str) -> bool:
    """Whether a node NAME with LABELS meets one nodeSelectorTerm."""
    exprs, fields = term.get("matchExpressions") or (), term.get("matchFields") or ()
    if not exprs and not fields:
        return False
    if exprs and not expressions_match(labels, exprs):
        return False
    # a node without a name has no fields to hold to (as the scheduler's nodeaffinity)
    return not name or _all_hold(fields, _FIELD_OPERATORS, {"metadata.name": name})


def node_selector_matches(
    terms: Iterable[Mapping[str, Any]], labels: Labels, name: str = ""
) -> bool:
    """Whether a node NAME with LABELS meets any of the nodeSelectorTerms TERMS."""
    return any(term_matches(t, labels, name) for t in terms)


def required_terms(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The nodeSelectorTerms a pod's required node affinity holds it to; None: no such
    affinity (an affinity with no terms selects no node)."""
    affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    return list(required.get("nodeSelectorTerms") or [])


def may_run_on(
    node: Mapping[str, Any],
    node_selector: Mapping[str, str],
    terms: Iterable[Mapping[str, Any]] | None,
) -> bool:
    """Whether NODE meets a pod's NODE_SELECTOR and the nodeSelectorTerms TERMS of its
    required node affinity (None: it has none), as the scheduler's NodeAffinity filter
    decides (taints and resources are other filters)."""
    labels = labels_of(node)
    if any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    return terms is None or node_selector_matches(terms, labels, name_of(node))


def pod_may_run_on(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """may_run_on() with the nodeSelector and required node affinity of POD_SPEC."""
    return may_run_on(node, pod_spec.get("nodeSelector") or {}, required_terms(pod_spec))
