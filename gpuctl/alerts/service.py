"""`gpuctl alerts render`'s document: the rule file, or the PrometheusRule that holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuctl.alerts.core import rules


@dataclass(frozen=True)
class RuleObject:
    """Where the Prometheus operator finds the rules: the PrometheusRule's name, namespace
    and labels (those its ruleSelector matches)."""

    name: str
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)


def document(options: rules.AlertOptions, wrap: RuleObject | None = None) -> dict[str, Any]:
    groups = rules.rules(options)
    if wrap is None:
        return groups
    return rules.prometheus_rule(groups, wrap.name, wrap.namespace, wrap.labels)
