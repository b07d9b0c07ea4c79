"""Kubernetes label selectors (`a=b,c!=d,e in (x,y),f,!g`): parse once, match client-side.

The selector is also sent to the API server; matching here as well means gpuctl never acts
on a node the selector does not name, whatever the server did with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuctl.common.errors import UsageError

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]{0,252}/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
_INT64 = re.compile(r"[+-]?[0-9]+")
_TERM = re.compile(
    rf"^\s*(?:(?P<not>!)\s*(?P<nkey>{_KEY})"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|=|!=)\s*(?P<value>{_VALUE})"
    rf"|\s+(?P<setop>in|notin)\s*\((?P<values>[^()]*)\))?)\s*$"
)


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return holds(self.op, self.key, self.values, labels)


def holds(op: str, key: str, values: Sequence[str], labels: Mapping[str, str]) -> bool:
    """Whether LABELS meet the requirement KEY OP VALUES, as apimachinery's
    labels.Requirement matches: In needs the key, NotIn holds without it, Gt and Lt need
    it with an integer value."""
    has = key in labels
    if op == "exists":
        return has
    if op == "!exists":
        return not has
    if op in ("=", "in"):
        return has and labels[key] in values
    if op in ("gt", "lt"):  # both sides decimal int64s, or no match
        have, bound = integer(labels.get(key)), integer(values[0] if values else None)
        if have is None or bound is None:
            return False
        return have > bound if op == "gt" else have < bound
    return not has or labels[key] not in values  # "!=" and "notin"


def integer(text: str | None) -> int | None:
    """TEXT as Go's strconv.ParseInt(text, 10, 64) reads it, None where it fails."""
    if text is None or not _INT64.fullmatch(text):
        return None
    n = int(text)
    return n if -(2**63) <= n < 2**63 else None


def _split(text: str) -> list[str]:
    # commas inside "in (a,b)" do not separate terms
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def parse(text: str) -> tuple[Requirement, ...]:
    if not text.strip():
        raise UsageError("empty label selector")
    out = []
    for term in _split(text):
        m = _TERM.match(term)
        if not m:
            raise UsageError(
                f"bad label selector term {term.strip()!r} in {text!r}",
                hint="e.g. 'gpu-type=h100', 'pool in (a,b)', 'nvidia.com/gpu.present', '!spot'",
            )
        if m["nkey"]:
            out.append(Requirement(m["nkey"], "!exists"))
        elif m["op"]:
            out.append(Requirement(m["key"], "!=" if m["op"] == "!=" else "=", (m["value"],)))
        elif m["setop"]:
            values = tuple(v.strip() for v in m["values"].split(","))
            if values == ("",):  # the API server refuses an empty set
                raise UsageError(f"empty value list in label selector term {term.strip()!r}")
            if not all(re.fullmatch(_VALUE, v) for v in values):
                raise UsageError(f"bad value list in label selector term {term.strip()!r}")
            out.append(Requirement(m["key"], m["setop"], values))
        else:
            out.append(Requirement(m["key"], "exists"))
    return tuple(out)


def matches(selector: tuple[Requirement, ...], labels: Mapping[str, str] | None) -> bool:
    return all(r.matches(labels or {}) for r in selector)
