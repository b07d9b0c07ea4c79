"""The fields of a spec as a table: name, type, whether required, allowed values, bounds and
what it means. The parser reads each field through its row (gpuctl.common.specfile's
`Fields.read`), and `json_schema` turns the same table into a JSON Schema, so that what
an editor checks and what gpuctl accepts cannot drift apart.

A schema checks shapes: which fields exist, their types, allowed words, number bounds and
name patterns. What depends on several fields (a MIG slice or whole GPUs, a multi-node
job's name length, min_size ≤ desired_size ≤ max_size, MIG profiles of the GPU type) stays
the parser's job.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    description: str
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: int | None = None  # a number's least value; a list's fewest items
    maximum: int | None = None
    pattern: str | None = None  # a regular expression the whole text matches
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
    value = _value(f)
    if f.required:
        out.update(value)
    else:  # `key:` with nothing, or null, reads as the field left out
        out["anyOf"] = [value, {"type": "null"}]
    return out


def _text(pattern: str | None, choices: tuple[str, ...] = ()) -> dict[str, Any]:
    if choices:
        return {"type": "string", "enum": list(choices)}
    # the parser refuses an empty or blank string
    return {"type": "string", "pattern": f"^(?:{pattern})$" if pattern else r"\S"}


def _bounds(f: Field, low: str, high: str) -> dict[str, Any]:
    out = {}
    if f.minimum is not None:
        out[low] = f.minimum
    if f.maximum is not None:
        out[high] = f.maximum
    return out


def _value(f: Field) -> dict[str, Any]:
    if f.type == TEXT:
        return _text(f.pattern, f.choices)
    if f.type == NAME:
        return _text(DNS1123_LABEL)
    if f.type == INTEGER:
        # JSON Schema counts 2.0 as an integer; the parser refuses it (a limit of the schema)
        return {"type": "integer", **_bounds(f, "minimum", "maximum")}
    if f.type == FLAG:
        return {"type": "boolean"}
    if f.type == STRINGS:
        item = _text(None) if f.non_empty else {"type": "string"}
        strings = {
            "type": "array",
            "items": {"anyOf": [item, {"type": "number"}]},
            **({"minItems": 1} if f.non_empty else {}),
        }
        return {"anyOf": [item, strings]} if f.single else strings
    if f.type == STRING_MAP:
        return {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
    if f.type == QUANTITY:
        return {"type": ["string", "number"]}
    if f.type == DURATION:
        return {
            "anyOf": [
                {"type": "string", "pattern": rf"^\s*([0-9]+|({DURATION_PART})+)\s*$"},
                {"type": "integer", "minimum": 1},
            ]
        }
    if f.type == RESOURCES:
        return {
            "type": "object",
            "patternProperties": {"^hugepages-": {"type": ["string", "number"]}},
            "additionalProperties": {"type": "integer", "minimum": 0, "maximum": f.maximum},
        }
    assert f.fields is not None, f"{f.name}: a mapping field needs its fields"
    mapping = _mapping(f.fields)
    if f.type == MAPPING:
        return mapping
    if f.type == MAPPINGS:
        return {"type": "array", "items": mapping, **_bounds(f, "minItems", "maxItems")}
    if f.type == TEXT_OR_MAPPING:
        return {"anyOf": [_text(f.pattern), mapping]}
    raise ValueError(f"{f.name}: unknown field type {f.type!r}")
