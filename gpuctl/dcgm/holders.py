"""Who holds a GPU, read from one DCGM-exporter series, whatever the scrape setup. Pure.

dcgm-exporter adds `pod`, `namespace` and `container` to a series when a pod holds the
device (one series per pod when several share it), and nothing when none does. How they
reach Prometheus depends on the scrape:

- Prometheus Operator ServiceMonitor, `honorLabels: false` (the GPU Operator's and the
  dcgm-exporter chart's default): the target's own labels (the exporter pod) take the
  plain names, the holder's are renamed `exported_pod`/`exported_namespace`/
  `exported_container`. A free GPU carries only the exporter pod's labels.
- `honorLabels: true`: the holder's labels keep the plain names; a free GPU carries the
  exporter pod's (the target labels fill in what the series lacks).
- dcgm-exporter's `--use-old-namespace`: the holder is `pod_name`/`pod_namespace`/
  `container_name`, which no scrape renames.

So, per series: `exported_*` wins, then the old names, then the plain ones unless they
describe the exporter itself: its `container` is one of the exporter's container names,
or, on a series without `container`, its `job` is one of the exporter's job names.
`holder` (the cluster view, advise, reclaim) and `held_matchers` (the alert rules) apply
this one rule; `holder` also names the pod a DRA claim holds a device for, by its UUID
(Exporter.claimed), or a MIG device by its parent's UUID and profile where one pod holds
every such device (Exporter.claimed_mig), where the series names none.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gpuctl.common.errors import UsageError

# NVIDIA GPU Operator: container and ServiceMonitor job (jobLabel: app) `nvidia-dcgm-exporter`,
# `nvidia-dcgm-exporter-dra` for its DRA variant; dcgm-exporter's own manifest
# (dcgm-exporter.yaml): container and service `dcgm-exporter`; dcgm-exporter's Helm chart:
# container `exporter`, job = the release's full name (`dcgm-exporter` for a release of
# that name, otherwise unpredictable: name it with --exporter-job).
DEFAULT_CONTAINERS = (
    "nvidia-dcgm-exporter",
    "nvidia-dcgm-exporter-dra",
    "dcgm-exporter",
    "exporter",
)
DEFAULT_JOBS = ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter-dra", "dcgm-exporter")

# (namespace, pod, container) label names, in order of precedence.
EXPORTED = ("exported_namespace", "exported_pod", "exported_container")
OLD_NAMESPACE = ("pod_namespace", "pod_name", "container_name")
PLAIN = ("namespace", "pod", "container")
# every label the rule reads but the device's UUID (gpuctl.dcgm.metrics.IDENTITY)
LABELS = EXPORTED + OLD_NAMESPACE + PLAIN + ("job", "GPU_I_PROFILE")
_REGEX_SPECIAL = set("\\.+*?()|[]{}^$")  # what stands for itself only escaped, in RE2


class Holder(NamedTuple):  # a tuple: made for every series of every frame, it must be cheap
    namespace: str | None
    pod: str
    container: str | None


_new_holder = functools.partial(tuple.__new__, Holder)  # Holder from a (ns, pod, container)


@dataclass(frozen=True)
class Exporter:
    """How the exporter's own pod is recognised: its container names and scrape job names;
    and the holders of DRA-allocated devices, which its series may not name: CLAIMED maps a
    device's UUID to the (namespace, pod) its ResourceClaim is reserved for
    (gpuctl.gpus.dra.DraView.holders). dcgm-exporter names that pod only when it runs with
    --kubernetes-enable-dra, off by default (NVIDIA/dcgm-exporter @ d5e5f51: pkg/cmd/app.go;
    internal/pkg/transformation/kubernetes.go, which then adds pod/namespace/container and
    dra_claim_name/dra_claim_namespace/dra_driver_name/dra_pool_name/dra_device_name): by
    default a DRA-allocated GPU's series carries its UUID and no pod. MODELS: node →
    vendor → the model its labels name (gpuctl.k8s.nodes.models_by_node), which other
    vendors' exporters label poorly (AMD's a board part number) or not at all (Gaudi's)."""

    containers: tuple[str, ...] = DEFAULT_CONTAINERS
    jobs: tuple[str, ...] = DEFAULT_JOBS
    claimed: Mapping[str, tuple[str, str]] = field(default_factory=dict, compare=False)
    # (parent UUID, MIG profile) → the pod holding every such MIG device (DraView.mig_holders)
    claimed_mig: Mapping[tuple[str, str], tuple[str, str]] = field(
        default_factory=dict, compare=False
    )
    models: Mapping[str, Mapping[str, str]] = field(default_factory=dict, compare=False)

    def is_self(self, labels: Mapping[str, Any]) -> bool:
        container = labels.get("container")
        if container:
            return container in self.containers
        return labels.get("job") in self.jobs


def exporter(
    containers: Iterable[str] | None = None, jobs: Iterable[str] | None = None
) -> Exporter:
    """An Exporter from option values (None: the defaults), each name checked."""
    names = {}
    for option, given, default in (
        ("--exporter-container", containers, DEFAULT_CONTAINERS),
        ("--exporter-job", jobs, DEFAULT_JOBS),
    ):
        values = default if given is None else tuple(given)
        for value in values:
            if not value or not value.isprintable() or value != value.strip():
                raise UsageError(f"{option}: {value!r} is not a name (blank or control characters)")
        names[option] = values
    return Exporter(names["--exporter-container"], names["--exporter-job"])


def holder(labels: Mapping[str, Any], exp: Exporter) -> Holder | None:
    """The pod this series says holds its device; None for a free device."""
    # Spelled out, no loop: this runs for every series of every frame. (Holder(...) runs
    # the named tuple's __new__, written in Python: half as slow again as _holder.)
    get, _holder = labels.get, _new_holder
    pod = get("exported_pod")
    if pod:
        return _holder((get("exported_namespace") or None, pod, get("exported_container") or None))
    pod = get("pod_name")
    if pod:
        return _holder((get("pod_namespace") or None, pod, get("container_name") or None))
    pod = get("pod")
    if not pod or exp.is_self(labels):
        if not (exp.claimed or exp.claimed_mig):
            return None
        profile = get("GPU_I_PROFILE")
        uuid = get("UUID") or ""
        claim = exp.claimed_mig.get((uuid, profile)) if profile else exp.claimed.get(uuid)
        return _holder((*claim, None)) if claim else None
    return _holder((get("namespace") or None, pod, get("container") or None))


def _regex_literal(name: str) -> str:
    """NAME as an RE2 regex that matches exactly it (any text, control characters too)."""

    def char(c: str) -> str:
        if c in _REGEX_SPECIAL:
            return "\\" + c
        return c if c.isprintable() else f"\\x{{{ord(c):x}}}"

    return "".join(map(char, name))


def literal(text: str) -> str:
    """A PromQL string literal holding TEXT."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def any_of(names: Iterable[str]) -> str:
    """A PromQL string literal holding a regex that matches exactly these names (label
    values: any text, control characters included)."""
    return literal("|".join(_regex_literal(n) for n in names))


def containing(text: str) -> str:
    """A PromQL string literal holding a regex that matches any value containing TEXT,
    whatever its case."""
    return literal(f"(?i).*{_regex_literal(text)}.*")


def held_branches(exp: Exporter) -> list[tuple[str, tuple[str, str, str]]]:
    """PromQL label matchers selecting exactly the series `holder` names a holder for, as
    disjoint branches (the holder in exported_*, in the old names, in the plain names),
    each with the labels that name its holder's namespace, pod and container."""
    plain = 'exported_pod="", pod_name="", pod!=""'
    own_container = f", container!~{any_of(exp.containers)}" if exp.containers else ""
    own_job = f", job!~{any_of(exp.jobs)}" if exp.jobs else ""
    return [
        ('exported_pod!=""', EXPORTED),
        ('exported_pod="", pod_name!=""', OLD_NAMESPACE),
        (f'{plain}, container!=""{own_container}', PLAIN),
        (f'{plain}, container=""{own_job}', PLAIN),
    ]


def held_matchers(exp: Exporter) -> list[str]:
    """held_branches' matchers alone."""
    return [matchers for matchers, _ in held_branches(exp)]
