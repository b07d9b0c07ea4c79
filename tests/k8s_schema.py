"""Offline OpenAPI validation of rendered manifests (kubernetes-validate, strict)."""

import json

import kubernetes_validate

LATEST = kubernetes_validate.latest_version().rsplit(".", 1)[0]
VERSIONS = ("1.29", LATEST)
# DRA's resource.k8s.io/v1, and pods' resourceClaims in their GA shape, from Kubernetes 1.34
DRA_VERSIONS = ("1.34", LATEST)


def assert_valid(obj: dict) -> None:
    dra = obj.get("apiVersion") == "resource.k8s.io/v1" or '"resourceClaims"' in json.dumps(obj)
    for version in DRA_VERSIONS if dra else VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)
