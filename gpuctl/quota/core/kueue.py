"""A team's quota as Kueue objects: a ResourceFlavor per GPU type, a ClusterQueue for the
team, a LocalQueue in its namespace, and what changes against the objects that exist. Pure.

Shapes follow Kueue's CRDs (kubernetes-sigs/kueue config/components/crd/bases/, v0.19.2):
`kueue.x-k8s.io/v1beta2` (storage since 0.16) and `v1beta1`, where the ClusterQueue's
cohort is `cohort` instead of `cohortName`. The rules Kueue's webhook enforces that matter
here are checked before anything is rendered: a borrowing or lending limit needs a cohort,
a lending limit may not exceed the nominal quota, every flavor lists the covered resources
in their order."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from gpuctl.common.errors import UsageError
from gpuctl.common.k8s_names import dns1123_subdomain, label_value
from gpuctl.common.quantity import from_api
from gpuctl.gpus import identity, vendor_models
from gpuctl.k8s.apis import kueue_api_version
from gpuctl.k8s.labels import GPU_TOLERATION, MANAGED, accelerator_toleration
from gpuctl.k8s.nodes import GPU, allocatable, gpus_of, inventory_of, is_gpu_node
from gpuctl.k8s.objects import annotations_of, labels_of, name_of
from gpuctl.k8s.placement import AUTO
from gpuctl.quota.core.rules import MAX_GPUS

NAMESPACE_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by Kubernetes
ALL_GPUS_FLAVOR = "nvidia-gpu"  # the one flavor when GPU nodes carry no GPU-type label
MAX_FLAVORS = 64  # per resource group (the CRD's maxItems)
# On a flavor gpuctl made: the nodes of its GPU type that its nodeLabels do not select
LEFT_OUT = "gpuctl.io/gpu-nodes-not-selected"
_SHOWN = 5  # nodes named in one note


def cohort_field(version: str) -> str:
    return "cohort" if version == "v1beta1" else "cohortName"


@dataclass(frozen=True)
class TeamQuota:
    """What `gpuctl quota set` was asked for."""

    team: str
    gpus: int
    mig: dict[str, int] = field(default_factory=dict)  # resource -> count
    cpu: str | None = None  # quantities; None: what the flavor's nodes have
    memory: str | None = None
    cohort: str | None = None
    borrowing_limit: int | None = None  # of nvidia.com/gpu
    lending_limit: int | None = None
    weight: str | None = None  # fair-sharing weight, a quantity
    # --gpus is per GPU type (Kueue counts a ClusterQueue's quota per flavor): must be said
    # when there are several types, never assumed
    per_type: bool = False


def check(q: TeamQuota) -> TeamQuota:
    """Refuse what Kueue's webhook would refuse, naming the option."""
    if q.cohort is not None and not dns1123_subdomain(q.cohort):
        raise UsageError(f"--cohort {q.cohort!r} is not a valid name (lower-case DNS subdomain)")
    for option, value in (
        ("--borrowing-limit", q.borrowing_limit),
        ("--lending-limit", q.lending_limit),
    ):
        if value is None:
            continue
        if not 0 <= value <= MAX_GPUS:
            raise UsageError(f"{option} must be between 0 and {MAX_GPUS}, got {value}")
        if q.cohort is None:
            raise UsageError(
                f"{option} needs --cohort: a team borrows from and lends to the other "
                "ClusterQueues of its cohort"
            )
    if q.lending_limit is not None and q.lending_limit > q.gpus:
        raise UsageError(
            f"--lending-limit {q.lending_limit} is more than the team's {q.gpus} GPUs "
            "(Kueue: must be less than or equal to the nominalQuota)"
        )
    for option, text in (("--cpu", q.cpu), ("--memory", q.memory), ("--weight", q.weight)):
        amount = None if text is None else from_api(text)
        if text is not None and (amount is None or amount < 0 or text != text.strip()):
            raise UsageError(f"{option} {text!r} is not a quantity ≥ 0 (e.g. 64, 500m, 256Gi)")
    return q


@dataclass(frozen=True)
class Flavor:
    """A ResourceFlavor: GPU nodes of one type (gpu_type None: every GPU node), and what
    those nodes have, which is the default cpu and memory quota on it."""

    name: str
    gpu_type: str | None
    label_key: str
    cpu: str | None = None
    memory: str | None = None
    # the nodes of its GPU type that its nodeLabels miss, with the labels they have instead
    left_out: str = ""
    of_type: int = 0  # GPU nodes of its type
    model: str = ""  # its type in words, e.g. H100-80GB
    # another vendor's accelerator: the resource its quota is on, and labels that select
    # its nodes besides label_key (a TPU slice's topology)
    resource: str = GPU
    more_labels: tuple[tuple[str, str], ...] = ()

    def node_labels(self) -> dict[str, str]:
        if self.gpu_type is None:
            return {}
        return {self.label_key: self.gpu_type, **dict(self.more_labels)}

    def object(self) -> dict[str, Any]:
        toleration = accelerator_toleration(self.resource) or GPU_TOLERATION
        spec: dict[str, Any] = {"tolerations": [dict(toleration)]}
        if self.gpu_type is not None:
            spec["nodeLabels"] = self.node_labels()
        metadata: dict[str, Any] = {"name": self.name, "labels": dict(MANAGED)}
        if self.left_out:
            metadata["annotations"] = {LEFT_OUT: self.left_out}
        return {
            "apiVersion": kueue_api_version("v1beta2"),  # the same shape in v1beta1
            "kind": "ResourceFlavor",
            "metadata": metadata,
            "spec": spec,
        }

    def left_out_note(self) -> str | None:
        """What the quota leaves out (None: nothing): a ResourceFlavor matches nodes by
        equal labels only, so nodes of its type labelled under another scheme are not in it."""
        if not self.left_out:
            return None
        return (
            f"ResourceFlavor {self.name} selects {self.label_key}={self.gpu_type}; of the "
            f"{self.of_type} {self.model or self.gpu_type} nodes these lack it and are left "
            f"out of the quota: {self.left_out} (label them {self.label_key}="
            f"{self.gpu_type}, or give --gpu-label-key with a label they all carry)"
        )


def flavor_names(gpu_types: list[str]) -> dict[str, str]:
    """GPU type label value -> ResourceFlavor name: the value in lower case, each run of
    characters other than letters and digits replaced by '-'. Values that would share a name (`A100`, `a100`)
    each get a suffix from a hash of the value, so the names do not depend on the order."""
    plain = {t: re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-") or "gpu" for t in gpu_types}
    clash = {n for n in plain.values() if list(plain.values()).count(n) > 1}
    return {
        t: f"{n}-{hashlib.sha256(t.encode()).hexdigest()[:5]}" if n in clash else n
        for t, n in plain.items()
    }


def quantity_total(values: list[Any]) -> Fraction:
    return sum((from_api(v) or Fraction(0) for v in values), Fraction(0))


def format_quantity(value: Fraction, resource: str) -> str:
    """An exact quantity the API reads back as the same value: memory in the largest binary
    unit that divides it, cpu in millicores when not whole, anything else as a number."""
    if value.denominator == 1:
        n = int(value)
        if resource == "memory":
            for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
                if n and n % size == 0:
                    return f"{n // size}{suffix}"
        return str(n)
    millis = value * 1000
    if millis.denominator == 1:
        return f"{int(millis)}m"
    return f"{float(value):.3g}"


def check_gpu_types(gpu_types: tuple[str, ...]) -> tuple[str, ...]:
    for t in gpu_types:
        if not t or not label_value(t):
            raise UsageError(f"--gpu-type {t!r} is not a node label value")
    if len(set(gpu_types)) != len(gpu_types):
        raise UsageError("--gpu-type: a GPU type is given twice")
    return gpu_types


def flavors_for(
    nodes: list[dict[str, Any]], label_key: str, gpu_types: tuple[str, ...]
) -> list[Flavor]:
    """One flavor per GPU type: the types asked for, else those on GPU nodes' labels (one
    flavor for every GPU node when none carries the label). With `auto` the types are the
    GPU models the nodes' labels name (gpuctl.gpus.identity), each selected by a label all
    its nodes carry and no other GPU node does. cpu and memory: the totals the matching GPU
    nodes have allocatable (None without nodes)."""
    check_gpu_types(gpu_types)
    gpu_nodes = [n for n in nodes if is_gpu_node(n)]
    others: list[Chosen] = []
    if label_key == AUTO:
        others = _vendor_types(nodes, gpu_types)
        known = {c.typed for c in others}
        asked = tuple(t for t in gpu_types if not _vendor_type(t, known))
        chosen = _auto_types(gpu_nodes, asked) if asked or not gpu_types else []
        chosen += others
    else:
        types = list(gpu_types) or sorted(
            {t for n in gpu_nodes if (t := labels_of(n).get(label_key)) is not None}
        )
        chosen = [Chosen(t, label_key, t) for t in types]
    if len(chosen) > MAX_FLAVORS:
        raise UsageError(
            f"{len(chosen)} GPU types: a ClusterQueue takes {MAX_FLAVORS} flavors at most"
        )
    named = flavor_names([c.typed for c in chosen if c.typed is not None])
    rows: list[Chosen] = [*chosen] or [Chosen(None, "", None)]
    out = []
    for row in sorted(rows, key=lambda c: named.get(c.typed or "", "")):
        typed, key, value = row.typed, row.key, row.value
        if row.resource != GPU:
            members = list(row.of_type)
        else:
            members = [n for n in gpu_nodes if value is None or labels_of(n).get(key) == value]
        cpu = memory = None
        if members:
            cpu = format_quantity(
                quantity_total([allocatable(n).get("cpu", 0) for n in members]), "cpu"
            )
            memory = format_quantity(
                quantity_total([allocatable(n).get("memory", 0) for n in members]), "memory"
            )
        name = named[typed] if typed is not None else ALL_GPUS_FLAVOR
        left_out = _left_out(row.of_type, key, value) if value is not None else ""
        flavor = Flavor(name, value, key or label_key, cpu, memory, resource=row.resource)
        flavor = replace(flavor, more_labels=row.more_labels, left_out=left_out)
        out.append(replace(flavor, of_type=len(row.of_type), model=row.model))
    return out


def outside_note(
    nodes: list[dict[str, Any]], flavors: list[Flavor], label_key: str, gpu_types: tuple[str, ...]
) -> str | None:
    """When the flavors are to cover every GPU type (no GPU_TYPES given): the GPU nodes that
    none of FLAVORS selects, besides those of a flavor's own model (its note names them);
    None when there is none."""
    if gpu_types or any(f.gpu_type is None for f in flavors):
        return None
    models = {m for f in flavors for m in f.model.split(" or ") if m}
    out = []
    for n in nodes:
        if not is_gpu_node(n) or (gpus_of(n).name or "") in models:
            continue
        if not any(labels_of(n).get(f.label_key) == f.gpu_type for f in flavors):
            out.append(name_of(n))
    if not out:
        return None
    why = "gpuctl names no GPU model from their labels" if label_key == AUTO else f"no {label_key}"
    more = len(out) - _SHOWN
    shown = ", ".join(sorted(out)[:_SHOWN]) + (f" and {more} more" if more > 0 else "")
    return (
        f"GPU nodes in no ResourceFlavor, so outside every quota: {shown} ({why}; label "
        "them, or give --gpu-label-key with a label they carry)"
    )


@dataclass(frozen=True)
class Chosen:
    """A flavor's GPU type (None: every GPU node), the label that selects it, and (with
    `auto`) the GPU nodes of that type, in words MODEL."""

    typed: str | None
    key: str
    value: str | None
    of_type: tuple[dict[str, Any], ...] = ()
    model: str = ""
    resource: str = GPU  # another vendor's: its device plugin's resource
    more_labels: tuple[tuple[str, str], ...] = ()


# Labels that name another vendor's model, most precise first (gpuctl.gpus.vendor_models):
# a flavor selects its nodes by the first that all of them carry and no other accelerator
# node of another model does.
VENDOR_KEYS = {
    "amd": (
        "amd.com/gpu.product-name",
        "beta.amd.com/gpu.product-name",
        "amd.com/gpu.device-id",
        "beta.amd.com/gpu.device-id",
        vendor_models.INSTANCE_TYPE,
    ),
    "aws": (vendor_models.KARPENTER_ACCELERATOR, vendor_models.INSTANCE_TYPE),
    "google": (vendor_models.TPU_ACCELERATOR,),
    "intel": (vendor_models.GAUDI_TYPE, vendor_models.GAUDI_ID, vendor_models.INSTANCE_TYPE),
}


def _vendor_type(text: str, known: set[str | None]) -> bool:
    """Whether a --gpu-type names another vendor's type (one of KNOWN or a model the
    vendors' tables know)."""
    return text in known or bool(vendor_models.models_named(text))


def _vendor_types(nodes: list[dict[str, Any]], gpu_types: tuple[str, ...]) -> list[Chosen]:
    """Per other vendor's model on the nodes (and TPU slice topology: a flavor is one slice
    shape), the label that selects its nodes and no other accelerator node; only those
    GPU_TYPES name, when given. A model no label selects alone is refused."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    seen: list[tuple[dict[str, Any], tuple[str, str, str, str]]] = []
    for n in nodes:
        for a in inventory_of(n, []).accelerators:
            if a.vendor in VENDOR_KEYS and a.model and a.resource and a.count:
                key = (a.vendor, a.model, a.resource, a.partition or "")
                groups.setdefault(key, []).append(n)
                seen.append((n, key))
                break
    out = []
    for (vendor, model, resource, part), members in sorted(groups.items()):
        typed = f"{model}-{part}" if vendor == "google" and part else model
        if gpu_types and not any(
            t == typed or model in vendor_models.models_named(t) for t in gpu_types
        ):
            continue
        others = [n for n, k in seen if k != (vendor, model, resource, part)]
        pair = _common_label(members, others, VENDOR_KEYS[vendor])
        if pair is None:
            raise UsageError(
                f"the nodes with {vendor} {model} carry no label that selects them and no "
                "other accelerator node, which a ResourceFlavor needs",
                hint="label them, and give --gpu-type with that label's value",
            )
        more = ((vendor_models.TPU_TOPOLOGY, part),) if vendor == "google" and part else ()
        out.append(Chosen(typed, *pair, tuple(members), model, resource, more))
    return out


def _left_out(of_type: tuple[dict[str, Any], ...], key: str, value: str) -> str:
    """The nodes of OF_TYPE without KEY=VALUE, grouped by the GPU labels they have instead,
    e.g. `ip-10-1-2-3 (labelled gpu-type=h100)`; "" when every one has it."""
    by_labels: dict[str, list[str]] = {}
    for n in of_type:
        if labels_of(n).get(key) == value:
            continue
        sel = ", ".join(f"{k}={v}" for k, v in gpus_of(n).selector)
        why = f"labelled {sel}" if sel else f"no {key}"
        by_labels.setdefault(why, []).append(name_of(n))
    parts = []
    for why, names in sorted(by_labels.items()):
        names.sort()
        more = len(names) - _SHOWN
        shown = ", ".join(names[:_SHOWN]) + (f" and {more} more" if more > 0 else "")
        parts.append(f"{shown} ({why})")
    return "; ".join(parts)


def _auto_types(gpu_nodes: list[dict[str, Any]], gpu_types: tuple[str, ...]) -> list[Chosen]:
    """Per GPU model on the nodes (those GPU_TYPES mean, when given): the label of the
    model's selectors that selects most of the model's nodes and no node of another model
    (Chosen.of_type: all the model's nodes, so that the ones it misses can be named)."""
    seen = [(n, gpus_of(n)) for n in gpu_nodes]
    by_model: dict[str, list[dict[str, Any]]] = {}
    for n, g in seen:
        if g.name:
            by_model.setdefault(g.name, []).append(n)
    if gpu_types:
        wanted = {t: identity.models_for(t) or [t] for t in gpu_types}
    else:
        wanted = {m: [m] for m in sorted(by_model)}
    out = []
    for typed, models in wanted.items():
        members = [n for m in models for n in by_model.get(m, [])]
        if not members:  # not on the cluster (or no cluster): gpuctl's own label
            out.append(Chosen(typed, identity.GPUCTL_TYPE, typed))
            continue
        others = [n for n, g in seen if g.name not in models]
        pair = _common_label(members, others)
        if pair is None:
            raise UsageError(
                f"the nodes with {typed} carry no label that selects them and no other GPU "
                "node, which a ResourceFlavor needs",
                hint="give --gpu-label-key with a label they share",
            )
        model = " or ".join(m for m in models if m in by_model)
        out.append(Chosen(typed, *pair, tuple(members), model))
    return out


def _common_label(
    members: list[dict[str, Any]],
    others: list[dict[str, Any]],
    keys: tuple[str, ...] | None = None,
) -> tuple[str, str] | None:
    """The GPU label (key, value) that selects the most MEMBERS and none of OTHERS (the
    first scheme's on a tie); None when none does. KEYS: the label keys to try (default:
    those of NVIDIA's label schemes)."""
    best: tuple[int, str, str] | None = None
    for key in keys or dict.fromkeys(identity.SCHEME_KEYS.values()):
        for value in sorted({v for n in members if (v := labels_of(n).get(key))}):
            if any(labels_of(n).get(key) == value for n in others):
                continue
            covered = sum(labels_of(n).get(key) == value for n in members)
            if best is None or covered > best[0]:
                best = (covered, key, value)
    return (best[1], best[2]) if best else None


def covered_resources(q: TeamQuota, flavors: list[Flavor] | None = None) -> list[str]:
    """cpu, memory, each accelerator resource of FLAVORS (nvidia.com/gpu first; every
    flavor of one resource group lists them all), the MIG profiles."""
    accelerators = sorted({f.resource for f in flavors or []} | {GPU}, key=lambda r: (r != GPU, r))
    if flavors and all(f.resource != GPU for f in flavors):
        accelerators.remove(GPU)
    return ["cpu", "memory", *accelerators, *sorted(q.mig)]


def cluster_queue(q: TeamQuota, flavors: list[Flavor], version: str) -> dict[str, Any]:
    """The team's ClusterQueue: every flavor with the same quota (Kueue counts it per
    flavor), borrowing and lending limits on its accelerator, reclaiming lent quota by
    preemption when it is in a cohort. Another vendor's flavor has its quota on that vendor's
    resource (amd.com/gpu, aws.amazon.com/neuron, google.com/tpu, habana.ai/gaudi), and 0 of
    the others: one resource group, as Kueue needs for cpu and memory to go with them."""
    groups = []
    covered = covered_resources(q, flavors)
    for f in flavors:
        cpu, memory = q.cpu or f.cpu, q.memory or f.memory
        if cpu is None or memory is None:
            raise UsageError(
                f"no cpu and memory quota for flavor {f.name}: give --cpu and --memory "
                "(they default to what the flavor's nodes have, read from the cluster; "
                "without a cluster, or with no node of that GPU type, there is nothing to read)"
            )
        gpu: dict[str, Any] = {"name": f.resource, "nominalQuota": str(q.gpus)}
        if q.borrowing_limit is not None:
            gpu["borrowingLimit"] = str(q.borrowing_limit)
        if q.lending_limit is not None:
            gpu["lendingLimit"] = str(q.lending_limit)
        # a flavor has none of the other accelerators' resources, nor MIG devices unless
        # it is NVIDIA's
        resources = [
            {"name": "cpu", "nominalQuota": cpu},
            {"name": "memory", "nominalQuota": memory},
        ]
        for r in covered[2:]:
            if r == f.resource:
                resources.append(gpu)
            elif r in q.mig and f.resource == GPU:
                resources.append({"name": r, "nominalQuota": str(q.mig[r])})
            else:
                resources.append({"name": r, "nominalQuota": "0"})
        groups.append({"name": f.name, "resources": resources})
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: q.team}},
        "resourceGroups": [{"coveredResources": covered, "flavors": groups}],
        "fairSharing": {"weight": q.weight or "1"},
    }
    if q.cohort:
        spec[cohort_field(version)] = q.cohort
        spec["preemption"] = {"reclaimWithinCohort": "Any"}
    return {
        "apiVersion": kueue_api_version(version),
        "kind": "ClusterQueue",
        "metadata": {"name": q.team, "labels": dict(MANAGED)},
        "spec": spec,
    }


def local_queue(team: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": kueue_api_version(version),
        "kind": "LocalQueue",
        "metadata": {"name": team, "namespace": team, "labels": dict(MANAGED)},
        "spec": {"clusterQueue": team},
    }


# --- what changes -------------------------------------------------------------------


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def flat_cluster_queue(spec: dict[str, Any]) -> dict[str, str]:
    """The fields of a ClusterQueue spec that gpuctl sets, as `path: value` lines (either
    version), for a plan a person can read."""
    out: dict[str, str] = {}
    cohort = spec.get("cohortName") or spec.get("cohort")
    if cohort:
        out["cohort"] = str(cohort)
    if "namespaceSelector" in spec:
        out["namespaceSelector"] = _text(spec["namespaceSelector"])
    weight = (spec.get("fairSharing") or {}).get("weight")
    out["fairSharing.weight"] = str(weight) if weight is not None else "1"  # Kueue's default
    for key, value in (spec.get("preemption") or {}).items():
        out[f"preemption.{key}"] = _text(value)
    for i, group in enumerate(spec.get("resourceGroups") or []):
        out[f"resourceGroups[{i}].coveredResources"] = ", ".join(
            group.get("coveredResources") or []
        )
        for f in group.get("flavors") or []:
            for r in f.get("resources") or []:
                for limit in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if r.get(limit) is not None:
                        out[f"{f.get('name')} {r.get('name')} {limit}"] = str(r[limit])
    return out


def cluster_queue_changes(
    current: dict[str, Any], desired: dict[str, Any]
) -> list[tuple[str, str | None, str | None]]:
    """(field, old, new) for what gpuctl manages. The preemption policy is compared only
    where gpuctl sets it: Kueue fills in defaults for the rest."""
    from gpuctl.quota.core.rules import diff

    now, want = flat_cluster_queue(current), flat_cluster_queue(desired)
    now = {k: v for k, v in now.items() if not k.startswith("preemption.") or k in want}
    return diff(now, want)


MANAGED_FIELDS = {
    "ResourceFlavor": ("nodeLabels", "tolerations"),
    "LocalQueue": ("clusterQueue",),
    "ClusterQueue": ("namespaceSelector", "resourceGroups", "fairSharing", "cohortName", "cohort"),
}


def spec_patch(
    kind: str, current: dict[str, Any], desired: dict[str, Any], undo: bool = False
) -> list[dict[str, Any]]:
    """A JSON patch that makes the spec fields gpuctl manages on KIND what DESIRED holds
    (replaced whole; removed where DESIRED has none) and leaves the others alone. A
    ClusterQueue's preemption policy is set when DESIRED has one (in a cohort); undoing,
    also when CURRENT has one, i.e. gpuctl set it."""
    have = current.get("spec") or {}
    with_preemption = "preemption" in desired or (undo and "preemption" in have)
    fields = MANAGED_FIELDS[kind] + (("preemption",) if with_preemption else ())
    ops: list[dict[str, Any]] = (
        [] if "spec" in current else [{"op": "add", "path": "/spec", "value": {}}]
    )
    for key in fields:
        if key in desired:
            ops.append({"op": "add", "path": f"/spec/{key}", "value": desired[key]})
        elif key in have:
            ops.append({"op": "remove", "path": f"/spec/{key}"})
    return ops


def flavor_changes(
    current: dict[str, Any], desired: dict[str, Any]
) -> list[tuple[str, str | None, str | None]]:
    from gpuctl.quota.core.rules import diff

    def flat(obj: dict[str, Any]) -> dict[str, str]:
        spec = obj.get("spec") or {}
        out = {k: _text(spec[k]) for k in ("nodeLabels", "tolerations") if spec.get(k)}
        left_out = annotations_of(obj).get(LEFT_OUT)
        return out | ({f"annotations.{LEFT_OUT}": left_out} if left_out else {})

    return diff(flat(current), flat(desired))


def annotation_patch(current: dict[str, Any], desired: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON patch that makes a ResourceFlavor's LEFT_OUT annotation what DESIRED has
    (removed where it has none), leaving the other annotations alone."""
    have, want = annotations_of(current), annotations_of(desired)
    path = "/metadata/annotations/" + LEFT_OUT.replace("~", "~0").replace("/", "~1")
    if LEFT_OUT in want:
        value = want[LEFT_OUT]
        if not have:
            return [{"op": "add", "path": "/metadata/annotations", "value": {LEFT_OUT: value}}]
        return [{"op": "add", "path": path, "value": value}]
    return [{"op": "remove", "path": path}] if LEFT_OUT in have else []


def annotated_as(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """CURRENT as annotation_patch(CURRENT, DESIRED) leaves it: its other annotations, and
    the LEFT_OUT annotation as DESIRED has it (what an undo starts from)."""
    kept = {k: v for k, v in annotations_of(current).items() if k != LEFT_OUT}
    if LEFT_OUT in annotations_of(desired):
        kept[LEFT_OUT] = annotations_of(desired)[LEFT_OUT]
    return {"metadata": {"annotations": kept}}


def reuse_flavor(existing: list[dict[str, Any]], wanted: Flavor) -> str | None:
    """The name of an existing ResourceFlavor that already selects exactly the nodes
    WANTED selects (same nodeLabels), which the ClusterQueue then uses as it is."""
    want = wanted.node_labels()
    for rf in sorted(existing, key=name_of):
        if ((rf.get("spec") or {}).get("nodeLabels") or {}) == want:
            return name_of(rf)
    return None
