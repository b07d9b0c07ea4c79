"""Will a job whose workers claim their GPUs through DRA fit? Per node that publishes
devices, how many workers' claims its devices meet now (devices no claim holds) and on an
empty node, by the scheduler's rules: a device counts for a choice when its DeviceClass's
selectors and the choice's select it (gpuctl.gpus.dra_cel), a tainted or unhealthy device
never, nor one whose shared counters (KEP-4815) the devices taken before it use up; a claim takes the first choice (firstAvailable) the node can meet; the node's own
taints, cordon and the job's node_selector as for device-plugin GPUs (gpuctl.k8s.fit). Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from gpuctl.gpus import dra_cel
from gpuctl.gpus.dra import Device, DraView
from gpuctl.k8s.claims import Choice, ClaimRequest
from gpuctl.k8s.fit import FitReport, NodeFit, tolerates
from gpuctl.k8s.nodes import taints
from gpuctl.k8s.objects import labels_of, name_of
from gpuctl.k8s.placement import Placement


def check_claim_fit(
    nodes: Sequence[dict[str, Any]],
    view: DraView,
    where: Placement,
    workers: int,
    tolerations: list[dict[str, Any]],
    node_selector: tuple[tuple[str, str], ...] = (),
) -> FitReport:
    """Per node with DRA devices: the workers whose claim (WHERE.claim) fits now and ever."""
    claim = where.claim
    assert claim is not None
    selectors = [_selector(view, c) for c in claim.choices]
    out = []
    for node in nodes:
        name = name_of(node) or "?"
        devices = view.on(name)
        if not devices:
            continue
        chosen = [_chosen(s, devices) for s in selectors]
        ever = max((len(view.available(ds, now=False)) for ds in chosen), default=0)
        now = max((len(view.available(ds)) for ds in chosen), default=0)
        reason = _refused(node, tolerations, node_selector, ever, claim)
        if reason:
            out.append(NodeFit(name, _models(devices), ever, now, 0, 0, reason))
            continue
        slots_now, slots_ever = now // claim.count, ever // claim.count
        why = f"{now} of {ever} matching devices free" + (
            "" if slots_now else f", a worker claims {claim.count}"
        )
        out.append(NodeFit(name, _models(devices), ever, now, slots_now, slots_ever, why))
    refusal = ""
    if sum(n.slots_ever for n in out) < workers:  # only a refusal names what there is
        published = _published(view)
        refusal = f"the cluster's DRA devices: {published}" if published else "the cluster publishes no DRA devices"  # fmt: skip
    return FitReport(_what(claim), claim.count, workers, tuple(out), where.wanted, refusal)


def _selector(view: DraView, choice: Choice) -> dra_cel.Selector | None:
    """The class's selectors and the choice's, compiled once; None: no such class, or one
    that does not compile (no device is chosen by it)."""
    found = view.class_named.get(choice.device_class)
    try:
        return dra_cel.selector(*found.selectors, *choice.selectors) if found else None
    except dra_cel.SelectorError:
        return None


def _chosen(selector: dra_cel.Selector | None, devices: Sequence[Device]) -> list[Device]:
    if selector is None:
        return []
    out = []
    for d in devices:
        try:
            if selector.matches(d):
                out.append(d)
        except dra_cel.SelectorError:  # the scheduler allocates nothing by it
            continue
    return out


def _refused(
    node: dict[str, Any],
    tolerations: list[dict[str, Any]],
    node_selector: tuple[tuple[str, str], ...],
    matching: int,
    claim: ClaimRequest,
) -> str:
    labels = labels_of(node)
    unmatched = [(k, v) for k, v in node_selector if labels.get(k) != v]
    untolerated = [t for t in taints(node) if not tolerates(t, tolerations)]
    if not matching:
        return "no device its claim selects"
    if matching < claim.count:
        return f"{matching} matching devices, a worker claims {claim.count}"
    if unmatched:
        k, v = unmatched[0]
        return f"node_selector {k}={v}: the node has {k}={labels.get(k, '(none)')}"
    if untolerated:
        t = untolerated[0]
        return f"taint {t.get('key')}={t.get('value', '')}:{t.get('effect')} not tolerated"
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned"
    return ""


def _what(claim: ClaimRequest) -> str:
    """The claim in words for a refusal, less its count."""
    text = claim.describe()
    return text.split(" ", 1)[1]  # "devices of gpu.nvidia.com where …"


def _models(devices: Sequence[Device]) -> str | None:
    products = sorted({d.product for d in devices if d.product})
    return ", ".join(products) or None


def _published(view: DraView) -> str:
    """What the cluster's DRA devices are, in one phrase: `2 Tesla T4 (gpu.nvidia.com), …`."""
    kinds: Counter[tuple[str, str | None, str | None]] = Counter()
    for d in view.devices:
        if d.node is not None and not d.unhealthy:
            kinds[(d.product or d.name, d.partition, view.class_of(d))] += 1
    return ", ".join(
        f"{n} {product}" + (f" {partition}" if partition else "") + f" ({cls or 'no class'})"
        for (product, partition, cls), n in sorted(kinds.items(), key=lambda kv: -kv[1])
    )
