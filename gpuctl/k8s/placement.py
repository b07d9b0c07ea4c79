"""Where a job's GPUs can be: the resource a worker asks for and the node affinity that
selects the nodes that have them, under whatever label scheme the cluster uses. Pure.

With the cluster's nodes at hand the affinity names what those nodes carry (each node's
own selector, gpuctl.gpus.identity); without them it names the GPU under every scheme
gpuctl knows (`auto`), or under the one label key the user set. A request for whole GPUs is
kept off MIG slices (single strategy) and off time-shared replicas; a MIG or shared request
asks for the resource the nodes really offer. Another vendor's accelerators are placed by
gpuctl.k8s.vendor_placement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuctl.common.quantity import count
from gpuctl.gpus import dra_cel, identity, names
from gpuctl.gpus.dra import DraView
from gpuctl.gpus.identity import GPU, SHARED_GPU, NodeGpus
from gpuctl.k8s import vendor_placement
from gpuctl.k8s.claims import ClaimRequest, accelerator_request, request_for
from gpuctl.k8s.labels import accelerator_toleration, vendor_toleration
from gpuctl.k8s.nodes import allocatable, gpus_of, is_gpu_node
from gpuctl.k8s.objects import labels_of
from gpuctl.k8s.selectors import expression, expressions_match
from gpuctl.k8s.vendor_placement import AcceleratorRequest

AUTO = "auto"
# how a job's GPUs are asked for: as a device plugin's extended resource, or through DRA
# claims; auto: DRA where only DRA offers them on the cluster read (device plugin offline)
DEVICE_PLUGIN = "device-plugin"
DRA = "dra"
ALLOCATIONS = (AUTO, DEVICE_PLUGIN, DRA)
Expression = dict[str, Any]
Term = tuple[Expression, ...]


@dataclass(frozen=True)
class GpuRequest:
    gpus: int = 0
    mig: str | None = None  # a profile, e.g. 1g.10gb
    shared: bool = False
    gpu_types: tuple[str, ...] = ()
    accelerator: AcceleratorRequest | None = None  # another vendor's (gpuctl.k8s.vendor_placement)
    compute_domain: int = 0  # the workers that share a ComputeDomain (gpuctl.k8s.compute_domain)


@dataclass(frozen=True)
class Placement:
    """What each worker asks for (RESOURCE × PER_WORKER; None: no GPU) and the node
    affinity (TERMS, OR'ed, each a tuple of matchExpressions; () = none)."""

    resource: str | None
    per_worker: int
    terms: tuple[Term, ...] = ()
    wanted: str = ""  # the GPU in words, e.g. "H100-80GB", for reasons
    scheme: str = ""  # how the affinity was chosen, for the user
    notes: tuple[str, ...] = ()
    refusal: str = ""  # why nodes of the type do not count, when only those would fit
    claim: ClaimRequest | None = None  # DRA: what each worker claims (gpuctl.k8s.claims)

    @property
    def toleration(self) -> dict[str, Any] | None:
        """The toleration of the accelerator taint of what each worker asks for: the
        resource's vendor's, else the vendor's whose devices it claims; None: neither."""
        own = accelerator_toleration(self.resource)
        if own is None and self.claim is not None:
            own = vendor_toleration(self.claim.vendor)
        return own

    @property
    def affinity(self) -> dict[str, Any] | None:
        if not self.terms:
            return None
        return {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [_copy(e) for e in term]} for term in self.terms
                    ]
                }
            }
        }


def _copy(e: Expression) -> Expression:
    return {k: list(v) if isinstance(v, list) else v for k, v in e.items()}


def terms_match(labels: dict[str, str], terms: Sequence[Sequence[dict[str, Any]]]) -> bool:
    """Whether a node with LABELS meets a Placement's TERMS (OR of ANDs, as the scheduler
    reads nodeSelectorTerms: gpuctl.k8s.selectors); no terms (no affinity): yes."""
    return not terms or any(expressions_match(labels, t) for t in terms)


def place(
    request: GpuRequest,
    label_key: str = AUTO,
    nodes: list[dict[str, Any]] | None = None,
    dra: DraView | None = None,
    allocation: str = AUTO,
) -> Placement:
    """The resource and affinity of REQUEST under LABEL_KEY (AUTO: detected), from NODES
    when the cluster was read (None: it was not), or the DRA claim of each worker: with
    ALLOCATION dra, or auto where the cluster's DRA (DRA) offers the GPUs and no device
    plugin does."""
    if request.accelerator is not None:
        v = vendor_placement.place(request.accelerator, nodes)
        scheme = "the labels of every scheme gpuctl reads for it"
        plugin = Placement(v.resource, v.per_worker, v.terms, v.wanted, scheme, v.notes)
    else:
        plugin = _plugin(request, label_key, nodes)
    if allocation == DEVICE_PLUGIN or not (request.gpus or request.mig):
        return plugin
    if allocation == AUTO and (dra is None or nodes is None or _offered(plugin, nodes)):
        dra_serves = request.accelerator is None or accelerator_request(request.accelerator, None)
        return _assumed(plugin) if nodes is None and dra_serves else plugin
    view = dra if nodes is not None else None
    if request.accelerator is not None:
        claim = accelerator_request(request.accelerator, view)
    else:
        claim = request_for(request.gpus, request.mig, request.shared, request.gpu_types, view)
    if claim is None or (allocation == AUTO and not _dra_offers(claim, view)):
        return plugin
    return _claimed(plugin, claim, view)


def _claimed(plugin: Placement, claim: ClaimRequest, view: DraView | None) -> Placement:
    """Each worker's accelerators through CLAIM (or the plain limit its class maps)."""
    how = "DRA: ResourceClaims" + (" (no cluster read)" if view is None else "")
    if claim.extended_resource:  # KEP-5004: the plain limit, the scheduler claims
        note = f"GPUs as {claim.extended_resource}, which DeviceClass {claim.choices[0].device_class} maps to DRA devices (KEP-5004)"  # fmt: skip
        return Placement(claim.extended_resource, claim.count, (), plugin.wanted, "", (note,), claim=claim)  # fmt: skip
    what = "GPUs" if claim.vendor == "nvidia" else "Accelerators"
    note = f"{what} through {how}: {claim.describe()}"
    return Placement(None, claim.count, (), plugin.wanted, "", (note,), claim=claim)


def _assumed(plugin: Placement) -> Placement:
    """An offline placement saying the allocation it assumed."""
    if plugin.resource is None:
        return plugin
    note = (
        f"GPUs as the device plugin's {plugin.resource} (no cluster read; "
        "--allocation dra asks through DRA ResourceClaims)"
    )
    return replace(plugin, notes=(*plugin.notes, note))


def _offered(plugin: Placement, nodes: list[dict[str, Any]]) -> bool:
    """Whether a node's device plugin offers PLUGIN's resource where its affinity allows."""
    resource = plugin.resource
    return resource is not None and any(
        count(allocatable(n).get(resource, 0)) > 0 and terms_match(labels_of(n), plugin.terms)
        for n in nodes
    )  # fmt: skip


def _dra_offers(claim: ClaimRequest, view: DraView | None) -> bool:
    """Whether a device the cluster publishes meets one of the claim's choices."""
    return view is not None and any(
        choice_selects(view, c.device_class, c.selectors, d)
        for c in claim.choices
        for d in view.devices
    )


def choice_selects(view: DraView, device_class: str, selectors: Sequence[str], device: Any) -> bool:
    """Whether DEVICE is of DEVICE_CLASS and every one of SELECTORS selects it (selectors
    failing on it: no, as the scheduler allocates nothing by them)."""
    found = view.class_named.get(device_class)
    if found is None:
        return False
    try:
        return dra_cel.selector(*found.selectors, *selectors).matches(device)
    except dra_cel.SelectorError:
        return False


def _plugin(request: GpuRequest, label_key: str, nodes: list[dict[str, Any]] | None) -> Placement:
    """The device plugin's resource and the node affinity of REQUEST."""
    seen = [gpus_of(n) for n in nodes or [] if is_gpu_node(n)] if nodes is not None else None
    if request.mig:
        return _mig(request, request.mig, label_key, seen)
    if request.shared:
        return _shared(request, label_key, seen)
    if request.gpus:
        return _whole(request, label_key, seen)
    return Placement(None, 0, _type_terms(request.gpu_types, label_key, None), "")


def _models(gpu_types: Sequence[str]) -> list[list[str]]:
    return [identity.models_for(t) for t in gpu_types]


def _wanted(gpu_types: Sequence[str]) -> str:
    words = [" or ".join(m) or t for t, m in zip(gpu_types, _models(gpu_types), strict=True)]
    return " or ".join(words)


def _of_type(g: NodeGpus, gpu_types: Sequence[str]) -> bool:
    if not gpu_types:
        return True
    for t, models in zip(gpu_types, _models(gpu_types), strict=True):
        if g.model in models:
            return True
        # a node whose GPU gpuctl cannot name (gpu-type=a100 alone): its label as written
        if g.model is None and (t in g.products or any(v == t for _, v in g.selector)):
            return True
    return False


def _whole(request: GpuRequest, key: str, seen: list[NodeGpus] | None) -> Placement:
    types = request.gpu_types
    wanted = _wanted(types) if types else ""
    if seen is None:
        terms = _type_terms(types, key, "whole")
        return Placement(GPU, request.gpus, terms, wanted, _offline_scheme(key, types))
    ok = [g for g in seen if _of_type(g, types) and _whole_node(g)]
    held = [g for g in seen if _of_type(g, types) and not _whole_node(g)]
    refusal = ""
    if held:
        refusal = (
            f"{len(held)} node{'s' if len(held) != 1 else ''} with "
            f"{wanted or 'GPUs'} offer{'s' if len(held) == 1 else ''} them only as MIG "
            "slices or time-shared replicas (ask with mig: or shared: true)"
        )
    if types:
        terms = _node_terms(ok, key, held) or _type_terms(types, key, "whole")
    else:
        terms = _exclusion_terms(held)
    return Placement(GPU, request.gpus, terms, wanted, "the cluster's nodes", refusal=refusal)


def _whole_node(g: NodeGpus) -> bool:
    return g.mig_strategy != "single" and (g.sharing == "none" or g.shared_resource is not None)


def _exclusion_terms(held: list[NodeGpus]) -> tuple[Term, ...]:
    """Terms that keep a whole-GPU request off the HELD nodes (MIG single, shared)."""
    products = [v for g in held for k, v in g.selector if k == identity.GFD_PRODUCT]
    exprs: list[Expression] = []
    if products:
        exprs.append(expression(identity.GFD_PRODUCT, "NotIn", sorted(products)))
    if any(k == identity.GKE_ACCELERATOR for g in held for k, _ in g.selector):
        exprs.append(expression(identity.GKE_PARTITION, "DoesNotExist"))
        exprs.append(expression(identity.GKE_SHARING, "DoesNotExist"))
    return (tuple(exprs),) if exprs else ()


def _mig(request: GpuRequest, profile: str, key: str, seen: list[NodeGpus] | None) -> Placement:
    types = request.gpu_types
    mixed_resource = "nvidia.com/mig-" + profile.replace("+", ".")
    wanted = f"MIG {profile}" + (f" on {_wanted(types)}" if types else "")
    if seen is None:
        terms = _type_terms(types, key, None)
        note = f"MIG {profile}: no cluster read, so {mixed_resource} (the mixed strategy)"
        return Placement(mixed_resource, 1, terms, wanted, _offline_scheme(key, types), (note,))
    mine = [g for g in seen if _of_type(g, types)]
    mixed = [g for g in mine if g.mig_strategy == "mixed" and g.mig_slices.get(profile)]
    single = [g for g in mine if g.single_profile == profile]
    n_mixed = sum(g.mig_slices[profile] for g in mixed)
    n_single = sum(g.mig_slices[profile] for g in single)
    notes: tuple[str, ...] = ()
    if mixed and single:
        use = "single" if n_single > n_mixed else "mixed"
        notes = (
            f"MIG {profile} is offered two ways: {mixed_resource} on {len(mixed)} "
            f"mixed-strategy node(s) ({n_mixed} slices) and {GPU} on {len(single)} "
            f"single-strategy node(s) ({n_single} slices); a pod asks for one resource, so "
            f"this job uses the {use} ones",
        )
    else:
        use = "single" if single else "mixed"
    if use == "single":
        terms = _node_terms(single, key, []) or ()
        return Placement(GPU, 1, terms, wanted, "the cluster's nodes", notes)
    terms = (_node_terms(mixed, key, []) or _type_terms(types, key, None)) if types else ()
    return Placement(mixed_resource, 1, terms, wanted, "the cluster's nodes", notes)


def _shared(request: GpuRequest, key: str, seen: list[NodeGpus] | None) -> Placement:
    types = request.gpu_types
    wanted = "shared " + (_wanted(types) if types else "GPUs")
    if seen is None:
        terms = _type_terms(types, key, None)
        return Placement(SHARED_GPU, request.gpus, terms, wanted, _offline_scheme(key, types))
    mine = [g for g in seen if _of_type(g, types)]
    renamed = [g for g in mine if g.allocatable.get(SHARED_GPU) or g.capacity.get(SHARED_GPU)]
    plain = [g for g in mine if g.sharing != "none" and not g.shared_resource]
    n_renamed = sum(g.capacity.get(SHARED_GPU, 0) for g in renamed)
    n_plain = sum(g.capacity.get(GPU, 0) for g in plain)
    if plain and n_plain > n_renamed:
        terms = _node_terms(plain, key, [])
        return Placement(GPU, request.gpus, terms, wanted, "the cluster's nodes")
    terms = (_node_terms(renamed, key, []) or _type_terms(types, key, None)) if types else ()
    return Placement(SHARED_GPU, request.gpus, terms, wanted, "the cluster's nodes")


def _node_terms(nodes: list[NodeGpus], key: str, held: list[NodeGpus]) -> tuple[Term, ...]:
    """The terms that select NODES: each node's selector under the detected scheme (or its
    label under KEY when one was set), same-key single selectors merged into one In."""
    if key != AUTO:
        values = sorted({v for g in nodes for k, v in _labels_of(g, key)})
        return ((expression(key, "In", values),),) if values else ()
    exclusion = _exclusion_terms(held)
    merged: dict[str, list[str]] = {}
    multi: list[tuple[tuple[str, str], ...]] = []
    for g in nodes:
        if len(g.selector) == 1:
            k, v = g.selector[0]
            merged.setdefault(k, []).append(v)
        elif g.selector and g.selector not in multi:
            multi.append(g.selector)
    terms: list[Term] = []
    for k, values in merged.items():
        extra = exclusion[0] if exclusion and k != identity.GFD_PRODUCT else ()
        terms.append((expression(k, "In", sorted(set(values))), *extra))
    for sel in multi:
        extra = exclusion[0] if exclusion else ()
        terms.append((*(expression(k, "In", [v]) for k, v in sel), *extra))
    return tuple(terms)


def _labels_of(g: NodeGpus, key: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in g.selector if k == key]


def _offline_scheme(key: str, types: Sequence[str]) -> str:
    if not types:
        return ""
    if key != AUTO:
        return f"the label {key} (gpu_label_key)"
    # AKS's VM sizes are patterns: only a node read tells them
    offline = [s for s in identity.SCHEMES if s != "aks"]
    return "every label scheme gpuctl knows (no cluster read): " + ", ".join(offline)


def _type_terms(types: Sequence[str], key: str, form: str | None) -> tuple[Term, ...]:
    """Terms for the GPU TYPES without the nodes: under KEY's scheme, or every scheme."""
    if not types:
        return ()
    models = _models(types)
    if key != AUTO:
        values = [v for t, ms in zip(types, models, strict=True) for v in _values_for(key, t, ms)]
        return ((expression(key, "In", values),),)
    out: list[Term] = []
    known = list(dict.fromkeys(m for ms in models for m in ms))
    unknown = [t for t, ms in zip(types, models, strict=True) if not ms]
    gfd = [v for t, ms in zip(types, models, strict=True) for v in _gfd_values(t, ms)]
    # A node GPU Feature Discovery labelled is selected by its product (whole GPUs only);
    # the other schemes select nodes it did not label, so never its MIG or shared ones.
    exclusion: tuple[Expression, ...] = ()
    if form == "whole" and known:
        exclusion = (expression(identity.GFD_PRODUCT, "DoesNotExist"),)
    if gfd or unknown:
        out.append((expression(identity.GFD_PRODUCT, "In", gfd + unknown),))
    gke = [v for v, m in identity.GKE_MODELS.items() if m in known]
    if gke:
        whole = (
            (
                expression(identity.GKE_PARTITION, "DoesNotExist"),
                expression(identity.GKE_SHARING, "DoesNotExist"),
            )
            if form == "whole"
            else ()
        )
        out.append((expression(identity.GKE_ACCELERATOR, "In", gke), *whole))
    karpenter = [m for m in known if m in identity.KARPENTER_NAMES]
    by_name: dict[str, list[str]] = {}
    for m in karpenter:
        by_name.setdefault(identity.KARPENTER_NAMES[m], []).append(m)
    for name, ms in by_name.items():
        term: list[Expression] = [expression(identity.KARPENTER_NAME, "In", [name])]
        family = [m for m, n in identity.KARPENTER_NAMES.items() if n == name]
        if len(family) > len(ms):  # the name covers other models too: the memory tells
            sizes = [str(identity.KARPENTER_MEMORY_MIB[m]) for m in ms]
            term.append(expression(identity.KARPENTER_MEMORY, "In", sizes))
        out.append((*term, *exclusion))
    sizes = [s for s, (m, _) in sorted(identity.instance_table().items()) if m in known]
    if sizes:
        out.append((expression(identity.INSTANCE_TYPE, "In", sizes), *exclusion))
    out.append((expression(identity.GPUCTL_TYPE, "In", list(types)), *exclusion))
    return tuple(out)


def _values_for(key: str, typed: str, models: list[str]) -> list[str]:
    """The values of KEY that select nodes with the GPU TYPED (MODELS, where known)."""
    values: list[str] = []
    if not models or key == identity.GPUCTL_TYPE:
        values = []
    elif key == identity.GFD_PRODUCT:
        values = _gfd_values(typed, models)
    elif key == identity.KARPENTER_NAME:
        values = [identity.KARPENTER_NAMES[m] for m in models if m in identity.KARPENTER_NAMES]
    elif key == identity.GKE_ACCELERATOR:
        values = [v for v, m in identity.GKE_MODELS.items() if m in models]
    elif key == identity.INSTANCE_TYPE:
        table = sorted(identity.instance_table().items())
        values = [s for s, (m, _) in table if m in models]
    return list(dict.fromkeys(values)) or [typed]


def _gfd_values(typed: str, models: list[str]) -> list[str]:
    """The product values for a gpu_type: as written when it is one GFD writes (the user
    chose that board), else every product of its models."""
    exact = names.split_product(typed)[1:] != (None, False) or any(
        typed in product_values(m) for m in models
    )
    return [typed] if exact else [v for m in models for v in product_values(m)]


def product_values(model: str) -> list[str]:
    """Every nvidia.com/gpu.product value GFD writes for whole GPUs of MODEL: each NVML
    name with dashes, and the same without `NVIDIA-` as drivers before R470 named them."""
    m = identity.by_short_name(model)
    if m is None:
        return []
    out: list[str] = []
    for name in names.reported_names(m):
        dashed = name.replace(" ", "-")
        out.append(dashed)
        if dashed.startswith("NVIDIA-"):
            out.append(dashed[len("NVIDIA-") :])
    return list(dict.fromkeys(out))
