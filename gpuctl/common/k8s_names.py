"""Kubernetes naming rules (apimachinery validation), in one place.

Every check matches the whole string (`fullmatch`): a trailing newline from a YAML block
scalar is not a valid name.
"""

from __future__ import annotations

import re

# The node label that names a node's GPU model, unless the settings say otherwise.
DEFAULT_GPU_LABEL_KEY = "gpu-type"

# Whole-text patterns, written so that Python's `re` and ECMA-262 (the JSON Schemas that
# state them too) read them alike: ASCII classes only, no \d or \s, no flags. A length limit
# is a lookahead counting the pattern's own characters.
DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_SUBDOMAIN_BODY = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
DNS1123_SUBDOMAIN = r"(?=[-a-z0-9.]{1,253}(?![-a-z0-9.]))" + _SUBDOMAIN_BODY
_QUALIFIED = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
# [prefix/]name: the prefix a DNS subdomain (at most 253), the name a qualified name (≤ 63)
LABEL_KEY = rf"((?=[-a-z0-9.]{{1,253}}/){_SUBDOMAIN_BODY}/)?{_QUALIFIED}"
LABEL_VALUE = rf"({_QUALIFIED})?"
# a Secret's or ConfigMap's data key: not ".", not starting with ".."
DATA_KEY = r"(?!\.\.)(?!\.(?![-._a-zA-Z0-9]))[-._a-zA-Z0-9]{1,253}"
ENV_VAR = r"[-._a-zA-Z][-._a-zA-Z0-9]*"
_DNS1123_LABEL = re.compile(DNS1123_LABEL)
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN)
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_KEY = re.compile(LABEL_KEY)
_LABEL_VALUE = re.compile(LABEL_VALUE)


def dns1123_label(name: str) -> bool:
    """Namespaces, most object names: lower-case alphanumerics and '-', at most 63."""
    return bool(_DNS1123_LABEL.fullmatch(name))


def dns1123_subdomain(name: str) -> bool:
    """Object names that may contain dots (PriorityClass, Secret, …): at most 253."""
    return bool(_DNS1123_SUBDOMAIN.fullmatch(name))


def dns1035_label(name: str) -> bool:
    """Service names: like a DNS-1123 label, but starting with a letter."""
    return bool(_DNS1035_LABEL.fullmatch(name))


def label_key(key: str) -> bool:
    """[prefix/]name, the prefix a DNS subdomain, the name a qualified name (≤ 63)."""
    return bool(_LABEL_KEY.fullmatch(key))


def label_value(value: str) -> bool:
    """Empty, or a qualified name (≤ 63)."""
    return bool(_LABEL_VALUE.fullmatch(value))


# Label keys a job spec may not set, with who sets them. gpuctl finds its objects by its
# own two; the Job controller (kubernetes/kubernetes pkg/apis/batch: JobNameLabel,
# ControllerUidLabel and their unprefixed legacy forms, job-completion-index) selects its
# pods by its own, and a pod carrying them is taken for a Job's pod.
_RESERVED_LABELS = {
    "app.kubernetes.io/managed-by": "gpuctl",
    "job-name": "the Kubernetes Job controller",
    "controller-uid": "the Kubernetes Job controller",
    "pod-template-hash": "the Kubernetes ReplicaSet controller",
    "controller-revision-hash": "the Kubernetes StatefulSet and DaemonSet controllers",
}
_RESERVED_PREFIXES = {
    "gpuctl.io/": "gpuctl",
    "batch.kubernetes.io/": "the Kubernetes Job controller",
    "jobset.sigs.k8s.io/": "the JobSet controller",
    # "The kubernetes.io/ and k8s.io/ prefixes are reserved for Kubernetes core components"
    # (kubernetes.io/docs/concepts/overview/working-with-objects/labels), subdomains too
    "kubernetes.io/": "Kubernetes",
    "k8s.io/": "Kubernetes",
}


def _literal(text: str) -> str:
    return text.replace(".", r"\.")  # the keys hold letters, digits, '-', '.' and '/'


def not_reserved_label(extra: tuple[str, ...] = ()) -> str:
    """A lookahead refusing what reserved_label names (and the keys EXTRA), in the dialect
    of the patterns above: for a JSON Schema of label keys."""
    exact = "|".join(_literal(k) for k in (*_RESERVED_LABELS, *extra))
    prefixes = "|".join(_literal(p.removesuffix("/")) for p in _RESERVED_PREFIXES)
    return (
        rf"(?!({exact})(?![\s\S]))"
        rf"(?=app\.kubernetes\.io/|(?!([-a-z0-9.]*\.)?({prefixes})/))"
    )


def reserved_label(key: str) -> str | None:
    """Who sets the label `key` itself (so a job spec may not), or None. Keys of the
    app.kubernetes.io/ recommended labels other than managed-by stay free."""
    if key in _RESERVED_LABELS:
        return _RESERVED_LABELS[key]
    prefix = key.rpartition("/")[0] + "/" if "/" in key else ""
    if prefix.startswith("app.kubernetes.io/"):
        return None
    for reserved, owner in _RESERVED_PREFIXES.items():
        if prefix == reserved or prefix.endswith("." + reserved):
            return owner
    return None
