"""Validate a custom resource against its CustomResourceDefinition the way the API server
would, offline: the version's openAPIV3Schema, strict (a field the schema does not declare
is an error, as with `kubectl apply --validate=strict`; a server without it would prune
the field, so an object gpuctl relies on would lose it), and its CEL rules
(`x-kubernetes-validations`, evaluated with cel-python; transition rules, which compare
with `oldSelf`, need an old object and are skipped). Used by the tests and by the API
emulator, which checks every custom resource written to it (gpuctl/sim/kube.py).

The schema follows the structural-schema rules of apiextensions.k8s.io/v1: an object with
no `additionalProperties` and no `x-kubernetes-preserve-unknown-fields` keeps only its
`properties`; `x-kubernetes-int-or-string` is an integer or a string; `nullable` allows
null; `metadata` at the root is an ObjectMeta (kubernetes-validate's strict definition).

The upstream CRDs of the Kueue, JobSet and KEDA objects gpuctl makes are under
gpuctl/sim/crds/ (README.md there names their repository, commit and licence)."""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import re
from typing import Any

CRD_DIR = pathlib.Path(__file__).parent / "crds"
CRD_FILES = {
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "Topology": "kueue.x-k8s.io_topologies.yaml",
    "Workload": "kueue.x-k8s.io_workloads.yaml",
    "JobSet": "jobset.x-k8s.io_jobsets.yaml",
    "ScaledObject": "keda.sh_scaledobjects.yaml",
    "TriggerAuthentication": "keda.sh_triggerauthentications.yaml",
    "ComputeDomain": "resource.nvidia.com_computedomains.yaml",
}
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@functools.cache
def read_crd(path: pathlib.Path) -> dict[str, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the Workload CRD is 1.4 MB
    return yaml.load(path.read_text(), Loader=loader)


def crd(kind: str) -> dict[str, Any]:
    """The upstream CRD of KIND under gpuctl/sim/crds/."""
    return read_crd(CRD_DIR / CRD_FILES[kind])


def _convert(node: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in node.items() if k != "description" and not k.startswith("x-")}
    if node.get("x-kubernetes-int-or-string"):
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    out.pop("nullable", None)
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if "properties" in node:
        out["properties"] = {k: _convert(v) for k, v in node["properties"].items()}
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = _convert(node["additionalProperties"])
    elif node.get("type") == "object" and not node.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    if "items" in node:
        out["items"] = _convert(node["items"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            out[key] = [_convert(x) for x in node[key]]
    if "not" in node:
        out["not"] = _convert(node["not"])
    return out


@functools.cache
def _definitions() -> Any:
    import kubernetes_validate
    from kubernetes_validate.utils import schema_contents

    version = kubernetes_validate.latest_version()
    return schema_contents(
        f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", version
    )


def _served(definition: dict[str, Any], version: str) -> dict[str, Any] | None:
    return next(
        (v for v in definition["spec"]["versions"] if v["name"] == version and v.get("served")),
        None,
    )


@functools.cache
def validator(kind: str, version: str):
    """A jsonschema validator for KIND at VERSION (a version its CRD under gpuctl/sim/crds serves)."""
    return validator_of(crd(kind), version)


def validator_of(definition: dict[str, Any], version: str):
    """A jsonschema validator for the custom resource a CRD defines, at VERSION."""
    import jsonschema
    from referencing import Registry, Resource

    served = _served(definition, version)
    if served is None:
        raise KeyError(f"{definition['metadata']['name']} serves no version {version}")
    schema = _convert(served["schema"]["openAPIV3Schema"])
    if importlib.util.find_spec("kubernetes_validate") is None:
        # gpuctl[sandbox] without the test tools: metadata is not checked field by field
        schema["properties"]["metadata"] = {"type": "object"}
        return jsonschema.Draft202012Validator(schema)
    defs = _definitions()
    schema["properties"]["metadata"] = {"$ref": f"{defs['$id']}#/$defs/{_OBJECT_META}"}
    registry = Resource.from_contents(defs) @ Registry()
    return jsonschema.Draft202012Validator(schema, registry=registry)


def errors(obj: dict[str, Any], definition: dict[str, Any] | None = None, check=None) -> list[str]:
    """Every reason the API server would refuse OBJ (empty: it would accept it), against
    DEFINITION (default: the CRD of OBJ's kind under gpuctl/sim/crds/). CHECK: a validator
    already made for it."""
    kind = obj.get("kind")
    if definition is None:
        if kind not in CRD_FILES:
            return [f"no CRD for {obj.get('apiVersion')} {kind} under gpuctl/sim/crds"]
        definition = crd(str(kind))
    group, want = definition["spec"]["group"], definition["spec"]["names"]["kind"]
    api_group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    if (api_group, kind) != (group, want):
        return [f"apiVersion/kind {obj.get('apiVersion')}/{kind} is not {group}/{want}"]
    served = _served(definition, version)
    if served is None:
        names = [v["name"] for v in definition["spec"]["versions"] if v.get("served")]
        return [f"version {version!r} is not served (served: {', '.join(names)})"]
    if check is None:
        same = CRD_FILES.get(str(kind)) and definition is crd(str(kind))
        check = validator(str(kind), version) if same else validator_of(definition, version)
    found = sorted(check.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    out = [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in found]
    return out + cel_errors(obj, served["schema"]["openAPIV3Schema"], "")


def assert_valid_cr(obj: dict[str, Any], definition: dict[str, Any] | None = None) -> None:
    problems = errors(obj, definition)
    name = (obj.get("metadata") or {}).get("name")
    assert not problems, f"{obj.get('kind')} {name}: " + "; ".join(problems)


# --- CEL ------------------------------------------------------------------------------


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


@functools.cache
def _program(rule: str) -> Any:
    import celpy

    env = celpy.Environment()
    return env.program(env.compile(rule), functions=EXTENSIONS)


def cel_errors(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    import celpy
    from celpy.celtypes import BoolType
    from celpy.evaluation import CELEvalError

    out = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue
        result: Any
        try:
            result = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        except CELEvalError as e:
            result = e
        if isinstance(result, CELEvalError):
            out.append(f"{path or '(root)'}: rule {rule['rule']!r} failed: {_first(result)}")
        elif not (isinstance(result, BoolType) and bool(result)):
            out.append(f"{path or '(root)'}: {rule.get('message') or rule['rule']}")
    if isinstance(value, dict):
        for key, sub in value.items():
            child = (schema.get("properties") or {}).get(key)
            if child is None and isinstance(schema.get("additionalProperties"), dict):
                child = schema["additionalProperties"]
            if child is not None:
                out += cel_errors(sub, child, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, sub in enumerate(value):
            out += cel_errors(sub, schema["items"], f"{path}[{i}]")
    return out


def _first(error: Exception) -> str:
    return str(error.args[0] if error.args else error)[:200]
