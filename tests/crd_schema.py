"""The upstream CRDs under tests/crds/ as JSON Schemas, strict: a field the CRD does not
define is an error (the API server would prune it, so an object gpuctl relies on would lose
it). Used by the tests (`assert_valid_cr`) and by the API emulator, which checks every
custom resource written to it.

The conversion follows the structural-schema rules of apiextensions.k8s.io/v1: an object
with no `additionalProperties` and no `x-kubernetes-preserve-unknown-fields` keeps only its
`properties`; `x-kubernetes-int-or-string` is an integer or a string; `nullable` allows
null; `metadata` at the root is an ObjectMeta (kubernetes-validate's strict definition).
CEL rules (`x-kubernetes-validations`) are not evaluated."""

from __future__ import annotations

import functools
import pathlib
from typing import Any

CRD_DIR = pathlib.Path(__file__).parent / "crds"
CRD_FILES = {
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "Workload": "kueue.x-k8s.io_workloads.yaml",
    "JobSet": "jobset.x-k8s.io_jobsets.yaml",
}
KUEUE = ("ClusterQueue", "LocalQueue", "ResourceFlavor", "Workload")
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@functools.cache
def crd(kind: str) -> dict[str, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the Workload CRD is 1.4 MB
    return yaml.load((CRD_DIR / CRD_FILES[kind]).read_text(), Loader=loader)


def served_versions(kind: str) -> list[str]:
    return [v["name"] for v in crd(kind)["spec"]["versions"] if v.get("served")]


def api_version(kind: str, version: str | None = None) -> str:
    """`group/version`, by default the CRD's storage version."""
    spec = crd(kind)["spec"]
    version = version or next(v["name"] for v in spec["versions"] if v.get("storage"))
    return f"{spec['group']}/{version}"


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


@functools.cache
def validator(kind: str, version: str):
    """A jsonschema validator for KIND at VERSION (a version its CRD serves)."""
    return validator_of(crd(kind), version)


def validator_of(definition: dict[str, Any], version: str):
    """A jsonschema validator for the custom resource a CRD defines, at VERSION."""
    import jsonschema
    from referencing import Registry, Resource

    for v in definition["spec"]["versions"]:
        if v["name"] == version and v.get("served"):
            break
    else:
        raise KeyError(f"{definition['metadata']['name']} serves no version {version}")
    schema = _convert(v["schema"]["openAPIV3Schema"])
    defs = _definitions()
    schema["properties"]["metadata"] = {"$ref": f"{defs['$id']}#/$defs/{_OBJECT_META}"}
    registry = Resource.from_contents(defs) @ Registry()
    return jsonschema.Draft202012Validator(schema, registry=registry)


def errors(obj: dict[str, Any]) -> list[str]:
    """What the CRD's schema finds wrong with OBJ ('path: message'), in document order."""
    kind, (group, _, version) = obj.get("kind"), str(obj.get("apiVersion")).rpartition("/")
    if kind not in CRD_FILES or crd(kind)["spec"]["group"] != group:
        return [f"no CRD for {obj.get('apiVersion')} {kind} under tests/crds"]
    found = validator(kind, version).iter_errors(obj)
    return [
        "/".join(str(p) for p in e.absolute_path) + f": {e.message}"
        for e in sorted(found, key=lambda e: list(map(str, e.absolute_path)))
    ]


def assert_valid_cr(obj: dict[str, Any]) -> None:
    problems = errors(obj)
    assert not problems, f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}: " + "; ".join(
        problems
    )
