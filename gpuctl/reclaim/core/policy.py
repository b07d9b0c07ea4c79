"""The reclaim policy (``apiVersion: gpuctl/v1, kind: ReclaimPolicy``): which workloads
`gpuctl reclaim` may act on, after how long idle, and how. Parsed and validated through
its field table (gpuctl.common.spec_fields), which also gives `gpuctl schema
reclaim-policy`. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gpuctl.common import selector
from gpuctl.common.errors import UsageError
from gpuctl.common.k8s_names import DNS1123_LABEL
from gpuctl.common.spec_fields import (
    DURATION,
    INTEGER,
    MAPPING,
    MAPPINGS,
    NAME,
    STRINGS,
    TEXT,
    Field,
    Rule,
    Table,
)
from gpuctl.common.specfile import Doc, Fields

API_VERSION = "gpuctl/v1"
KIND = "ReclaimPolicy"
REPORT, SUSPEND, SCALE, DELETE = "report", "suspend", "scale-to-zero", "delete"
ACTIONS = (REPORT, SUSPEND, SCALE, DELETE)
# What each action can be applied to; anything else covered by a rule is reported.
APPLIES_TO = {
    REPORT: None,  # every kind
    SUSPEND: ("Job", "JobSet"),
    SCALE: ("Deployment", "StatefulSet"),
    DELETE: ("Pod",),
}
EXEMPT_LABEL = ("gpuctl.io/reclaim", "never")  # on a workload or any of its pods
DEFAULT_IDLE_FOR = 2 * 3600
DEFAULT_BUSY_PERCENT = 5
DEFAULT_STALE_AFTER = 120
DEFAULT_MAX_ACTIONS = 10

_NAMESPACE = Rule(DNS1123_LABEL, "a valid namespace name")

EXEMPT = Table(
    Field("namespaces", STRINGS, "Namespaces never acted on.", pattern=_NAMESPACE, at_entry=True),
)  # fmt: skip
RULE = Table(
    Field("name", NAME, "The rule's name, recorded with each action it causes."),
    Field("namespaces", STRINGS, "The namespaces the rule covers; none: every namespace.",
          pattern=_NAMESPACE, at_entry=True, single=True),
    Field("selector", TEXT, "A label selector the workload's labels must match "
          "(e.g. 'team=ml,!keep'); none: every workload."),
    Field("idleFor", DURATION, "How long every GPU of a workload must have been idle.",
          default=DEFAULT_IDLE_FOR),
    Field("action", STRINGS, "What to do, first applicable one wins: report (annotate and "
          "emit an Event), suspend (Jobs, JobSets; Kueue-managed ones through their Workload), "
          "scale-to-zero (Deployments, StatefulSets; restore puts them back), delete (bare "
          "pods, through the Eviction API). A workload no action applies to is reported.",
          default=(REPORT,), single=True, non_empty=True),
    Field("grace", DURATION, "Warn first (annotation and Event), act at a later run once this "
          "long has passed with the workload still idle; none: act at once."),
)  # fmt: skip
POLICY = Table(
    Field("apiVersion", TEXT, "The policy's version.", required=True, choices=(API_VERSION,)),
    Field("kind", TEXT, "ReclaimPolicy.", required=True, choices=(KIND,)),
    Field("name", NAME, "The policy's name."),
    Field("busyPercent", INTEGER, "A GPU at or above this busy signal (percent) is busy.",
          default=DEFAULT_BUSY_PERCENT, minimum=1, maximum=100),
    Field("staleAfter", DURATION, "A GPU whose newest sample is older than this is stale: "
          "unknown, never idle.", default=DEFAULT_STALE_AFTER),
    Field("maxActions", INTEGER, "At most this many workloads acted on per run (report "
          "included).", default=DEFAULT_MAX_ACTIONS, minimum=1, maximum=10000),
    Field("exempt", MAPPING, "What is never acted on, beside the label gpuctl.io/reclaim: never.",
          fields=EXEMPT),
    Field("rules", MAPPINGS, "Which workloads are covered and how; the first rule that "
          "matches a workload decides.", minimum=1, fields=RULE),
)  # fmt: skip


@dataclass(frozen=True)
class PolicyRule:
    name: str
    namespaces: tuple[str, ...]  # () = every namespace
    selector_text: str | None
    selector: tuple[selector.Requirement, ...]
    idle_for_s: int
    actions: tuple[str, ...]
    grace_s: int

    def covers(self, namespace: str, labels: dict[str, str]) -> bool:
        if self.namespaces and namespace not in self.namespaces:
            return False
        return selector.matches(self.selector, labels)

    def action_for(self, kind: str) -> str:
        """The first of the rule's actions that applies to KIND; report if none does."""
        for action in self.actions:
            kinds = APPLIES_TO[action]
            if kinds is None or kind in kinds:
                return action
        return REPORT


@dataclass(frozen=True)
class Policy:
    name: str
    busy_percent: int
    stale_after_s: int
    max_actions: int
    exempt_namespaces: tuple[str, ...]
    rules: tuple[PolicyRule, ...]
    source: str = "<default>"

    def rule_for(self, namespace: str, labels: dict[str, str]) -> PolicyRule | None:
        return next((r for r in self.rules if r.covers(namespace, labels)), None)

    @property
    def actions(self) -> set[str]:
        return {a for r in self.rules for a in r.actions} | {REPORT}


def default_policy(idle_for_s: int = DEFAULT_IDLE_FOR) -> Policy:
    """Without --policy: every namespace is covered, and the only action is report."""
    rule = PolicyRule("default", (), None, (), idle_for_s, (REPORT,), 0)
    return Policy(
        "default", DEFAULT_BUSY_PERCENT, DEFAULT_STALE_AFTER, DEFAULT_MAX_ACTIONS, (), (rule,)
    )


def parse_policy(doc: Doc) -> Policy:
    f = doc.root()
    api = f.text("apiVersion")
    if api is not None and api != API_VERSION:
        raise f.error("apiVersion", f"unsupported version {api!r}; this gpuctl reads {API_VERSION}")
    f.reject_unknown(POLICY)
    f.read(POLICY["apiVersion"])
    f.read(POLICY["kind"])
    exempt = f.child("exempt")
    if exempt is not None:
        exempt.reject_unknown(EXEMPT)
    if not f.has("rules"):
        raise f.error(None, "missing required field 'rules'", hint="a policy needs one rule")
    rules = tuple(_rule(r, i) for i, r in enumerate(f.list_of_maps("rules")))
    if not rules:
        raise f.error("rules", "needs at least one rule")
    return Policy(
        name=f.read(POLICY["name"]) or "policy",
        busy_percent=f.read(POLICY["busyPercent"]),
        stale_after_s=f.read(POLICY["staleAfter"]),
        max_actions=f.read(POLICY["maxActions"]),
        exempt_namespaces=tuple(exempt.read(EXEMPT["namespaces"], []) if exempt else ()),
        rules=rules,
        source=doc.file,
    )


def _rule(r: Fields, index: int) -> PolicyRule:
    r.reject_unknown(RULE)
    text = r.read(RULE["selector"])
    try:
        parsed = selector.parse(text) if text is not None else ()
    except UsageError as e:
        raise r.error("selector", e.message, e.hint) from None
    actions = tuple(r.read(RULE["action"], [REPORT]))
    for i, action in enumerate(actions):
        if action not in ACTIONS:
            raise r.doc.error(
                r.path + ("action", i),
                f"unknown action {action!r}; one of {', '.join(ACTIONS)}",
            )
    return PolicyRule(
        name=r.read(RULE["name"]) or f"rule-{index + 1}",
        namespaces=tuple(r.read(RULE["namespaces"], [])),
        selector_text=text,
        selector=parsed,
        idle_for_s=r.read(RULE["idleFor"]),
        actions=actions,
        grace_s=r.read(RULE["grace"]) or 0,
    )
