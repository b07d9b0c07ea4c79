"""Kubernetes naming rules (apimachinery validation), in one place.

Every check matches the whole string (`fullmatch`): a trailing newline from a YAML block
scalar is not a valid name.
"""

from __future__ import annotations

import re

# The node label that names a node's GPU model, unless the settings say otherwise.
DEFAULT_GPU_LABEL_KEY = "gpu-type"

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DATA_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
_ENV_VAR = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def dns1123_label(name: str) -> bool:
    """Namespaces, most object names: lower-case alphanumerics and '-', at most 63."""
    return bool(_DNS1123_LABEL.fullmatch(name))


def dns1123_subdomain(name: str) -> bool:
    """Object names that may contain dots (PriorityClass, Secret, …): at most 253."""
    return len(name) <= 253 and bool(_DNS1123_SUBDOMAIN.fullmatch(name))


def dns1035_label(name: str) -> bool:
    """Service names: like a DNS-1123 label, but starting with a letter."""
    return bool(_DNS1035_LABEL.fullmatch(name))


def label_key(key: str) -> bool:
    """[prefix/]name, the prefix a DNS subdomain, the name a qualified name (≤ 63)."""
    prefix, sep, name = key.rpartition("/")
    if sep and not dns1123_subdomain(prefix):
        return False
    return bool(_QUALIFIED_NAME.fullmatch(name))


def label_value(value: str) -> bool:
    """Empty, or a qualified name (≤ 63)."""
    return value == "" or bool(_QUALIFIED_NAME.fullmatch(value))


def data_key(key: str) -> bool:
    """A key of a Secret's or ConfigMap's data: letters, digits, '-', '_', '.' (≤ 253)."""
    return bool(_DATA_KEY.fullmatch(key)) and key != "." and not key.startswith("..")


def env_var_name(name: str) -> bool:
    """A container environment variable's name (letters, digits, '-', '_', '.'; no leading
    digit)."""
    return bool(_ENV_VAR.fullmatch(name))
