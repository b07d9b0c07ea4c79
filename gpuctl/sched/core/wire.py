"""kube-scheduler's extender protocol on the wire: a request decoded as a Go extender's
encoding/json decodes it, and the answers in the upstream field names. Pure.

The types are k8s.io/kube-scheduler extender/v1 (types.go). They carry no JSON tags, so
kube-scheduler (pkg/scheduler/extender.go, json.Marshal) sends Go's field names, nil
pointers as null:

    ExtenderArgs          {"Pod": v1.Pod, "Nodes": v1.NodeList | null, "NodeNames": [..] | null}
    ExtenderFilterResult  {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes",
                           "Error"}
    HostPriorityList      [{"Host": name, "Score": 0..MaxExtenderPriority}]

NodeNames is set when the extender is configured nodeCacheCapable, Nodes (every candidate's
Node object) when not; kube-scheduler then reads the filter's answer from the same field.

Go's decoder matches a key to a field by its exact name, else ignoring case (Unicode simple
folding: "nodenames", "NODENAMES" and "NodeNameſ" all set NodeNames), at every level (the
Kubernetes objects' fields too); it ignores unknown keys; null leaves a field unset (a string
"", a list or map empty); a value of the wrong type fails the whole request. Those rules
apply here to the request's fields and to the fields of the Pod and the Nodes that the
extender reads; the other fields of those objects are not read, so not checked. Two keys
for one field: the last wins (Go would merge two objects given for one field). Unlike Go,
invalid UTF-8 is refused rather than read as U+FFFD: kube-scheduler's encoder never sends
it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gpuctl.common.quantity import parse

# The parts of a v1.Pod the extender reads (sched/core/extender.py pod_of), by JSON name:
# a struct is a dict of its fields, a list holds its element's schema; the leaves are kinds.
STRING, LABELS, RESOURCES = "a string", "an object of strings", "an object of quantities"
_CONTAINER = {"name": STRING, "resources": {"limits": RESOURCES, "requests": RESOURCES}}
_POD = {
    "metadata": {"name": STRING, "namespace": STRING},
    "spec": {
        "containers": [_CONTAINER],
        "initContainers": [_CONTAINER],
        "nodeName": STRING,
        "nodeSelector": LABELS,
    },
}
_NODE_LIST = {"items": [{"metadata": {"name": STRING}}]}
_ARGS = {"Pod": _POD, "Nodes": _NODE_LIST, "NodeNames": [STRING]}


class BadRequest(ValueError):
    """A request body no Go extender would decode, or one with no pod or no candidates."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Request:
    """An ExtenderArgs: the pod (the fields read, by their JSON names) and its candidates."""

    pod: dict[str, Any]
    names: list[str]  # the candidates, in the order sent
    node_names: bool  # sent as NodeNames (nodeCacheCapable: true): answered so
    nodes: list[tuple[str, Any]] | None  # the NodeList's items as sent, by name


def decode(body: bytes) -> Request:
    """The ExtenderArgs in BODY, or BadRequest saying what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(f"the body is not UTF-8 (byte {e.start})") from None
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise BadRequest("the body is JSON nested too deeply") from None
    except ValueError as e:
        raise BadRequest(f"the body is not JSON: {e}") from None
    if doc is not None and not isinstance(doc, dict):
        raise BadRequest(f"the body is {_kind(doc)}, not an ExtenderArgs object")
    fields = _members(doc or {}, _ARGS)
    pod, node_list, names = fields.get("Pod"), fields.get("Nodes"), fields.get("NodeNames")
    if pod is None:
        raise BadRequest(f"no Pod in the ExtenderArgs ({_keys(doc)})")
    if names is None and node_list is None:
        raise BadRequest(f"no candidates: neither NodeNames nor Nodes ({_keys(doc)})")
    nodes = None if node_list is None else _nodes(node_list)
    if names is not None:
        candidates = _read(names, _ARGS["NodeNames"], "NodeNames")
    else:
        assert nodes is not None
        candidates = [name for name, _ in nodes]
    return Request(_read(pod, _POD, "Pod"), candidates, names is not None, nodes)


def filter_result(
    request: Request,
    passed: Sequence[str],
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
) -> dict[str, Any]:
    """The ExtenderFilterResult: the candidates that pass, in the field they were sent in
    (names for NodeNames, the Node objects as sent for Nodes), and why the others fail
    (unresolvable: what no preemption would change)."""
    keep, nodes = set(passed), request.nodes
    kept = [item for name, item in nodes or [] if name in keep]
    return {
        "Nodes": None if nodes is None else {"metadata": {}, "items": kept},
        "NodeNames": list(passed) if request.node_names else None,
        "FailedNodes": dict(failed),
        "FailedAndUnresolvableNodes": dict(unresolvable),
        "Error": "",
    }


def filter_error(message: str) -> dict[str, Any]:
    """An ExtenderFilterResult that fails the scheduling cycle with MESSAGE (kube-scheduler
    tries the pod again later, or skips an ignorable extender)."""
    return {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": None,
        "FailedAndUnresolvableNodes": None,
        "Error": message,
    }


def host_priorities(names: Iterable[str], scores: Iterable[int]) -> list[dict[str, Any]]:
    """The HostPriorityList: each candidate with its score."""
    return [{"Host": name, "Score": score} for name, score in zip(names, scores)]


def _nodes(node_list: Any) -> list[tuple[str, Any]]:
    """The NodeList's items as sent, each with its name (a null item: a Node with none)."""
    if not isinstance(node_list, dict):
        raise BadRequest(f"Nodes: expected an object (a v1.NodeList), got {_kind(node_list)}")
    items = _members(node_list, _NODE_LIST).get("items")
    read = _read(items, _NODE_LIST["items"], "Nodes.items")
    return [
        (node["metadata"]["name"], {} if item is None else item)
        for node, item in zip(read, items or [])
    ]


def _read(value: Any, schema: Any, where: str) -> Any:
    """VALUE as Go decodes it into the type SCHEMA describes: only the schema's fields,
    under their JSON names; null as the type's zero; BadRequest for a wrong type."""
    if isinstance(schema, dict):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise BadRequest(f"{where}: expected an object, got {_kind(value)}")
        members = _members(value, schema)
        return {f: _read(members.get(f), sub, f"{where}.{f}") for f, sub in schema.items()}
    if isinstance(schema, list):
        if value is None:
            return []
        if not isinstance(value, list):
            raise BadRequest(f"{where}: expected a list, got {_kind(value)}")
        if schema[0] == STRING and all(type(v) is str for v in value):
            return value  # node names: thousands, as sent
        return [_read(v, schema[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if schema == STRING:
        if value is None or isinstance(value, str):
            return value or ""
        raise BadRequest(f"{where}: expected a string, got {_kind(value)}")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"{where}: expected {schema}, got {_kind(value)}")
    leaf = _quantity if schema == RESOURCES else _string
    return {key: leaf(v, f"{where}[{key}]") for key, v in value.items()}


def _string(value: Any, where: str) -> str:
    return str(_read(value, STRING, where))


def _quantity(value: Any, where: str) -> str:
    """A resource.Quantity: a JSON string or number the API's grammar reads (null: 0)."""
    if value is None:
        return "0"
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        text = str(value).strip()
        if parse(text) is not None:
            return text
        raise BadRequest(f"{where}: {value!r} is not a quantity")
    raise BadRequest(f"{where}: expected a quantity, got {_kind(value)}")


def _members(obj: dict[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """OBJ's values by the field each key sets: the field of that exact name, else the one
    equal to it under Unicode case folding; keys that match no field are left out."""
    out: dict[str, Any] = {}
    folded = _folded(tuple(fields))
    for key, value in obj.items():
        field = key if key in fields else folded.get(_fold(key))
        if field is not None:
            out[field] = value
    return out


@lru_cache(maxsize=64)
def _folded(fields: tuple[str, ...]) -> dict[str, str]:
    return {_fold(f): f for f in fields}


@lru_cache(maxsize=1024)
def _fold(text: str) -> str:
    """TEXT with each character replaced by the least of its simple case-folding orbit,
    as Go's encoding/json compares field names (ASCII letters: their upper case)."""
    return text.upper() if text.isascii() else "".join(map(_fold_char, text))


def _fold_char(c: str) -> str:
    orbit, todo = {c}, [c]
    while todo:
        x = todo.pop()
        for y in (x.upper(), x.lower()):
            if len(y) == 1 and y not in orbit:
                orbit.add(y)
                todo.append(y)
    return min(orbit)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "a string", type(None): "null"}.get(
        type(value), "a number"
    )


def _keys(doc: Any) -> str:
    if doc is None:
        return "the body is null"
    keys = list(doc)
    shown = ", ".join(json.dumps(k) for k in keys[:5]) + (", …" if len(keys) > 5 else "")
    return f"keys: {shown}" if keys else "an empty object"
