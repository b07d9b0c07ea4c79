"""Offline OpenAPI validation of rendered manifests (kubernetes-validate, strict)."""

import kubernetes_validate

VERSIONS = ("1.29", kubernetes_validate.latest_version().rsplit(".", 1)[0])


def assert_valid(obj: dict) -> None:
    for version in VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)
