"""Kubernetes label selectors (`a=b,c!=d,e in (x,y),f,!g`): parse once, match client-side.

The selector is also sent to the API server; matching here as well means gpuctl never acts
on a node the selector does not name, whatever the server did with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuctl.common.errors import UsageError

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]{0,252}/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
_TERM = re.compile(
    rf"^\s*(?:(?P<not>!)\s*(?P<nkey>{_KEY})"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|=|!=)\s*(?P<value>{_VALUE})"
    rf"|\s+(?P<setop>in|notin)\s*\((?P<values>[^()]*)\))?)\s*$"
)


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        has, value = self.key in labels, labels.get(self.key)
        if self.op == "exists":
            return has
        if self.op == "!exists":
            return not has
        if self.op in ("=", "in"):
            return has and value in self.values
        return not has or value not in self.values  # "!=" and "notin"


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


def matches(selector: tuple[Requirement, ...], labels: dict[str, str] | None) -> bool:
    return all(r.matches(labels or {}) for r in selector)
