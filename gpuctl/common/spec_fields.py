"""The fields of a spec as a table: name, type, whether required, allowed values, bounds and
what it means. The parser reads each field through its row (gpuctl.common.specfile's
`Fields.read`), and `json_schema` turns the same table into a JSON Schema, so that what
an editor checks and what gpuctl accepts cannot drift apart.

A schema checks shapes: which fields exist, their types, allowed words, number bounds and
name patterns. A rule on text (a name, a quantity, a duration, the keys of a mapping) is a
`Rule` in the row: its pattern decides for both, so the two cannot read it differently, and
its noun (or its `why`, where the pattern joins several rules) says what the parser
refuses. The patterns are written for both regex dialects that read them,
Python's `re` (the parser, and the jsonschema library) and ECMA-262 (editors): ASCII classes
only, no `\\d`, `\\s` or flags; and since a schema's `pattern` searches, each is anchored
here with `^` and an end that both read alike (`$` also matches before a final newline in
Python). What depends on several fields (a MIG slice or whole GPUs, a multi-node
job's name length, min_size ≤ desired_size ≤ max_size, MIG profiles of the GPU type) stays
the parser's job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpuctl.common import quantity
from gpuctl.common.k8s_names import DNS1123_LABEL

# The types of a field, each read by the Fields method of the same name.
TEXT = "text"  # a non-empty string
NAME = "name"  # a DNS-1123 label (most Kubernetes object names)
INTEGER = "integer"  # a whole number written in decimal
FLAG = "flag"  # true or false
STRINGS = "str_list"  # a list of strings (numbers kept as written)
STRING_MAP = "str_map"  # a mapping of names to strings
QUANTITY = "quantity"  # a Kubernetes quantity: 8, 500m, 64Gi
DURATION = "duration"  # 90s, 30m, 24h, 1h30m, 2d or a number of seconds
MAPPING = "child"  # a mapping with fields of its own
MAPPINGS = "list_of_maps"  # a list of such mappings
TEXT_OR_MAPPING = "text_or_mapping"  # a string as a short form of a mapping
RESOURCES = "resources"  # extended resource name -> a count; hugepages-SIZE -> a quantity

DRAFT = "https://json-schema.org/draft/2020-12/schema"
DURATION_PART = r"([0-9]+)(d|h|m|s)"
# A duration's whole text: digits (seconds) or parts, not all zero, spaces around allowed
DURATION_TEXT = r"[ \t\n\r]*(?=[^1-9]*[1-9])([0-9]+|([0-9]+[dhms])+)[ \t\n\r]*"
MAX_SECONDS = 2**31 - 1  # Kubernetes' int32 duration fields (ttlSecondsAfterFinished); 68 years


@dataclass(frozen=True)
class Refusal:
    message: str
    hint: str | None = None


@dataclass(frozen=True)
class Rule:
    """A rule on text: the whole-text PATTERN decides (for the parser and the schema alike),
    and a text it refuses "is not NOUN". Where the pattern joins several rules, WHY names
    the one a text breaks (None: the noun says it)."""

    pattern: str
    noun: str  # "a valid PriorityClass name": 'High' is not a valid PriorityClass name
    hint: str | None = None
    why: Callable[[str], Refusal | None] | None = None

    def refusal(self, text: str) -> Refusal | None:
        """None if TEXT keeps the rule, else why not."""
        if re.fullmatch(self.pattern, text):
            return None
        why = self.why(text) if self.why is not None else None
        return why or Refusal(f"{text!r} is not {self.noun}", self.hint)


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    description: str
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: int | None = None  # a number's least value; a list's fewest items
    maximum: int | None = None  # ... and a name's longest
    # what the whole text keeps: a text, each item of a list, each value of a mapping; a
    # quantity, instead of "not negative" (quantity.POSITIVE)
    pattern: Rule | None = None
    keys: Rule | None = None  # what every key of a mapping keeps
    # a broken rule names the item or entry (node_selector.zone, taints[1]), not the field
    at_entry: bool = False
    single: bool = False  # a list of strings may be written as one string
    non_empty: bool = False  # a list of strings needs an item, and no item may be blank
    fields: Table | None = None  # a mapping's own fields


class Table:
    """The fields of one mapping, in the order documentation lists them."""

    def __init__(self, *fields: Field):
        self.fields = {f.name: f for f in fields}

    def __getitem__(self, name: str) -> Field:
        return self.fields[name]

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self.fields)

    def without(self, *names: str) -> Table:
        return Table(*(f for f in self if f.name not in names))


def json_schema(
    table: Table,
    *,
    title: str,
    schema_id: str,
    required_unless: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of a document whose root mapping has TABLE's fields.
    REQUIRED_UNLESS: field -> another field that, when present, may supply it (a job's
    `image` from the template it names)."""
    schema = {"$schema": DRAFT, "$id": schema_id, "title": title, **_mapping(table)}
    for name, other in (required_unless or {}).items():
        schema["required"].remove(name)
        schema.setdefault("allOf", []).append(
            {"anyOf": [{"required": [name]}, {"required": [other]}]}
        )
    return schema


def _mapping(table: Table) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {f.name: _field(f) for f in table},
        "required": [f.name for f in table if f.required],
        "additionalProperties": False,
    }


def _field(f: Field) -> dict[str, Any]:
    out: dict[str, Any] = {"description": f.description}
    if f.default is not None:
        out["default"] = list(f.default) if isinstance(f.default, tuple) else f.default
    value = _value(f, f.pattern.pattern if f.pattern else None)
    if f.required:
        out.update(value)
    else:  # `key:` with nothing, or null, reads as the field left out
        out["anyOf"] = [value, {"type": "null"}]
    return out


def whole(pattern: str) -> str:
    """PATTERN as a JSON Schema `pattern` (a search) that the whole text must match."""
    return rf"^(?:{pattern})(?![\s\S])"


def _text(pattern: str | None, choices: tuple[str, ...] = ()) -> dict[str, Any]:
    if choices:
        return {"type": "string", "enum": list(choices)}
    # the parser refuses an empty or blank string
    if pattern is None:
        return {"type": "string", "pattern": "[^ \t\n\r]"}
    return {"type": "string", "minLength": 1, "pattern": whole(pattern)}


def _written(pattern: str | None, booleans: bool) -> dict[str, Any]:
    """A number (or boolean, if BOOLEANS) the parser takes as the text written: any; with a
    pattern, those whose usual spelling it takes (a schema sees a number's value, not how it
    was written: 1e+30 passes as a number ≥ 0, though not as a name)."""
    kinds: list[dict[str, Any]] = []
    if booleans and (pattern is None or re.fullmatch(pattern, "true")):
        kinds.append({"type": "boolean"})
    if pattern is None:
        kinds.append({"type": "number"})
    elif re.fullmatch(pattern, "-12.5"):
        kinds.append({"type": "number"})
    elif re.fullmatch(pattern, "12.5"):
        kinds.append({"type": "number", "minimum": 0})
    elif re.fullmatch(pattern, "10"):
        kinds.append({"type": "integer", "minimum": 0})
    return {"anyOf": kinds} if kinds else {"not": {}}


def _quantity(pattern: str | None) -> dict[str, Any]:
    positive = pattern == quantity.POSITIVE
    number = {"type": "number", ("exclusiveMinimum" if positive else "minimum"): 0}
    text = {"type": "string", "pattern": whole(pattern or quantity.NOT_NEGATIVE)}
    return {"anyOf": [text, number]}


def _bounds(f: Field, low: str, high: str) -> dict[str, Any]:
    out = {}
    if f.minimum is not None:
        out[low] = f.minimum
    if f.maximum is not None:
        out[high] = f.maximum
    return out


def _value(f: Field, pattern: str | None) -> dict[str, Any]:
    if f.type == TEXT:
        return _text(pattern, f.choices)
    if f.type == NAME:
        return {**_text(DNS1123_LABEL), **_bounds(f, "minLength", "maxLength")}
    if f.type == INTEGER:
        # JSON Schema counts 2.0 as an integer; the parser refuses it (a limit of the schema)
        return {"type": "integer", **_bounds(f, "minimum", "maximum")}
    if f.type == FLAG:
        return {"type": "boolean"}
    if f.type == STRINGS:
        item = _text(pattern) if f.non_empty or pattern else {"type": "string"}
        number = _written(pattern, booleans=False)
        strings = {
            "type": "array",
            "items": {"anyOf": [item, number]},
            **({"minItems": 1} if f.non_empty else {}),
        }
        return {"anyOf": [item, strings]} if f.single else strings
    if f.type == STRING_MAP:
        value = {"type": "string", **({"pattern": whole(pattern)} if pattern else {})}
        out = {
            "type": "object",
            "additionalProperties": {"anyOf": [value, _written(pattern, booleans=True)]},
        }
        if f.keys is not None:
            out["propertyNames"] = {"pattern": whole(f.keys.pattern)}
        return out
    if f.type == QUANTITY:
        return _quantity(pattern)
    if f.type == DURATION:
        return {
            "anyOf": [
                {"type": "string", "pattern": whole(DURATION_TEXT)},
                {"type": "integer", "minimum": 1, "maximum": MAX_SECONDS},
            ]
        }
    if f.type == RESOURCES:
        out = {
            "type": "object",
            "patternProperties": {"^hugepages-": _quantity(None)},
            "additionalProperties": {"type": "integer", "minimum": 0, "maximum": f.maximum},
        }
        if f.keys is not None:
            out["propertyNames"] = {"pattern": whole(f.keys.pattern)}
        return out
    assert f.fields is not None, f"{f.name}: a mapping field needs its fields"
    mapping = _mapping(f.fields)
    if f.type == MAPPING:
        return mapping
    if f.type == MAPPINGS:
        return {"type": "array", "items": mapping, **_bounds(f, "minItems", "maxItems")}
    if f.type == TEXT_OR_MAPPING:
        return {"anyOf": [_text(pattern), mapping]}
    raise ValueError(f"{f.name}: unknown field type {f.type!r}")
