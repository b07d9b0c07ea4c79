"""Validate an object against a CustomResourceDefinition the way the API server would,
offline: its openAPIV3Schema (structural: a field the schema does not declare is an error,
as with `kubectl apply --validate=strict`), and its CEL rules (`x-kubernetes-validations`,
evaluated with cel-python; transition rules, which compare with `oldSelf`, need an old
object and are skipped)."""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

UPSTREAM = Path(__file__).parent / "upstream"


@cache
def load_crd(name: str) -> dict[str, Any]:
    return yaml.safe_load((UPSTREAM / name).read_text())


def errors(obj: dict[str, Any], crd: dict[str, Any]) -> list[str]:
    """Every reason the API server would refuse `obj` (empty: it would accept it)."""
    import jsonschema

    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    api_group, _, version = obj.get("apiVersion", "").rpartition("/")
    out = []
    if (api_group, obj.get("kind")) != (group, kind):
        out.append(
            f"apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')} is not {group}/{kind}"
        )
    served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
    if version not in served:
        return out + [f"version {version!r} is not served (served: {', '.join(served)})"]
    schema = strict(served[version]["schema"]["openAPIV3Schema"])
    validator = jsonschema.Draft7Validator(schema)
    out += [
        f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]
    out += cel_errors(obj, served[version]["schema"]["openAPIV3Schema"], "")
    return out


def strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` wherever it lists properties and does
    not say otherwise (unknown fields become errors); Kubernetes' own keywords dropped."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if (
                node.get("type") == "object"
                and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def _find(text: Any, pattern: Any) -> Any:
    """Kubernetes' CEL regex library: the first match, or ''."""
    from celpy import celtypes

    match = re.search(str(pattern), str(text))
    return celtypes.StringType(match.group(0) if match else "")


def _split(text: Any, separator: Any) -> Any:
    """The CEL strings extension Kubernetes enables."""
    from celpy import celtypes

    return celtypes.ListType(celtypes.StringType(p) for p in str(text).split(str(separator)))


# The functions these CRDs' rules call beyond CEL's standard ones (Kubernetes adds them).
EXTENSIONS = {"find": _find, "split": _split}


def cel_errors(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    import celpy
    from celpy.celtypes import BoolType
    from celpy.evaluation import CELEvalError

    out = []
    env = celpy.Environment()
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue
        program = env.program(env.compile(rule["rule"]), functions=EXTENSIONS)
        result: Any
        try:
            result = program.evaluate({"self": celpy.json_to_cel(value)})
        except CELEvalError as e:
            result = e
        if isinstance(result, CELEvalError):
            out.append(f"{path or '(root)'}: rule {rule['rule']!r} failed: {e_first(result)}")
        elif not (isinstance(result, BoolType) and bool(result)):
            out.append(f"{path or '(root)'}: {rule.get('message') or rule['rule']}")
    if isinstance(value, dict):
        for key, sub in value.items():
            props = schema.get("properties") or {}
            child = props.get(key)
            if child is None and isinstance(schema.get("additionalProperties"), dict):
                child = schema["additionalProperties"]
            if child is not None:
                out += cel_errors(sub, child, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, sub in enumerate(value):
            out += cel_errors(sub, schema["items"], f"{path}[{i}]")
    return out


def e_first(error: Exception) -> str:
    return str(error.args[0] if error.args else error)[:200]
