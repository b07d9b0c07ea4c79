"""The live cluster view with Prometheus doing the aggregation. Pure: PromQL out, answers in.

A terminal shows a screenful of GPUs, so a live frame never fetches every GPU's series:

- `figures_query`: one query whose answer is small whatever the cluster size: the
  summary (count, avg), every namespace's figures (count/avg by namespace), each node's
  GPU count and mean (the busiest and idlest node, and which nodes come first in node
  order), the request-shape and free-GPU histograms behind the stranded figure
  (count_values), and, for a sort by value, the GPUs on screen (topk/bottomk).
- `usage.queries(window, usage.on_nodes(page_nodes(...)))`: per-GPU values for the nodes
  on screen only, turned into rows by usage.build_frame as for the whole cluster.

The figures read the same labels as usage.build_frame under every scrape setup: devices
are keyed by UUID (else node and index), MIG boards are not devices, holders follow
holders.held_branches, a shared GPU counts once in each namespace holding it. Unlike the
full frame, a device counts here when it reports utilization (DCGM_FI_DEV_GPU_UTIL, or
DCGM_FI_PROF_GR_ENGINE_ACTIVE): the figures then need one series per device, not seven.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields

from gpuctl.common.errors import UsageError
from gpuctl.common.ordering import natural_key
from gpuctl.dcgm import busy, exporters, holders
from gpuctl.dcgm.holders import Exporter
from gpuctl.dcgm.metrics import (
    FB_FREE,
    FB_RESERVED,
    FB_USED,
    GR_ACTIVE,
    IDENTITY,
    POWER,
    TEMP,
    UTIL,
    WHOLE,
)
from gpuctl.dcgm.promql import duration_seconds
from gpuctl.top.cluster.core import usage
from gpuctl.top.cluster.core.usage import (
    ClusterGpuRow,
    ClusterSummary,
    NamespaceUsage,
    NodeUsage,
)

# Cluster view orders: by node (the full view's order), or the highest reading first
# (utilization now, memory used %, temperature, power), or the lowest mean over the
# window first (`idle`: where GPUs are wasted).
SORT_KEYS = ("index", "util", "memory", "temp", "power", "idle")

_UTILIZATION = f'__name__=~"{UTIL}|{GR_ACTIVE}"'
# (namespace, pod) label names of a holder, in holders.held_branches' order of precedence
_HOLDER_LABELS = (holders.EXPORTED[:2], holders.OLD_NAMESPACE[:2], holders.PLAIN[:2])
_KEYINGS = usage.FEW_KEYINGS  # answers are small: no UUID matcher (see usage.KEYINGS)
_ON = ", ".join(IDENTITY)
_NODE = "Hostname, hostname, instance"
_NAMESPACE = ", ".join(label for label, _ in _HOLDER_LABELS)
_POD = ", ".join(f"{ns}, {pod}" for ns, pod in _HOLDER_LABELS)


@dataclass
class Figures:
    summary: ClusterSummary
    namespaces: list[NamespaceUsage]  # every namespace, most GPUs first
    node_gpus: dict[str, int]  # rows per node: its whole GPUs and MIG devices
    page: list[str] = field(default_factory=list)  # nodes of the GPUs on screen, by value
    others: int = 0  # other vendors' exporters' series (gpuctl.dcgm.exporters): 0 without


def check_sort(sort: str) -> None:
    if sort not in SORT_KEYS:
        raise UsageError(
            f"--sort: unknown key {sort!r} for the cluster view",
            hint="use one of: " + ", ".join(SORT_KEYS),
        )


def _per_device(inner: Callable[[str], str], node: bool = False) -> str:
    """`max by` device of inner(matchers), an expression over raw series, for devices keyed
    by UUID and for those keyed by node and index; with the labels naming its node if asked
    (its Hostname or hostname, or for a device with neither, its instance: grouping by
    instance everywhere would count a GPU scraped by two jobs twice)."""
    parts = []
    for by, key in _KEYINGS:
        if not node:
            parts.append(f"max by ({', '.join(by)}) ({inner(key)})")
            continue
        named = ", ".join(dict.fromkeys(by + ("Hostname", "hostname")))
        unnamed = _join(key, 'Hostname="", hostname=""')
        parts.append(
            f"max by ({', '.join(by)}, instance) ({inner(unnamed)}) "
            f"or on ({_ON}) max by ({named}) ({inner(key)})"
        )
    return " or ".join(f"({part})" for part in parts)


KIND = "kind"  # "mig" on a MIG device's figures


def _kinded(expr: str) -> str:
    """EXPR's per-device series, those of MIG devices labelled kind="mig"."""
    return f'label_replace({expr}, "{KIND}", "mig", "GPU_I_ID", ".+")'


def _join(*matchers: str) -> str:
    return ", ".join(m for m in matchers if m)


def _mean(window: str, node: bool = False, whole_only: bool = False, labelled: bool = False) -> str:
    """Per device, its mean busy signal (percent) over the window (see gpuctl.dcgm.busy);
    of whole GPUs only, or with the `signal` label naming the field, if asked."""

    def side(metric: str, matcher: str) -> str:
        return _per_device(
            lambda m: f'avg_over_time({{__name__="{metric}", {_join(m, matcher)}}}[{window}])', node
        )

    return busy.promql(side, whole_only, labelled)


def _held(
    exporter: Exporter, namespace: bool = False, pod: bool = False, whole: bool = False
) -> str:
    """One series per device and holder (with the labels naming the holder's namespace and
    pod, as the series has them, if asked): a device no pod holds has none. Unless a pod
    is asked for, a device whose series name no holder but a DRA claim allocates
    (exporter.claimed) is held by the claim's namespace, as the rows have it (per pod:
    `_claimed_whole`, counted by read_figures: a selector per pod is too many)."""
    parts = []
    for by, key in _KEYINGS:
        for matchers, (ns_label, pod_label, _container) in holders.held_branches(exporter):
            labels = list(by) + [ns_label] * namespace + [pod_label] * pod
            selector = f"{{{_UTILIZATION}, {_join(key, matchers, WHOLE if whole else '')}}}"
            parts.append(f"group by ({', '.join(dict.fromkeys(labels))}) ({selector})")
    named = " or ".join(parts)
    claimed = "" if pod else _claimed(exporter, namespace, whole)
    return f"{named} or (({claimed}) unless on ({_ON}) ({named}))" if claimed else named


def _claimed(exporter: Exporter, namespace: bool = False, whole: bool = False) -> str:
    """One series per DRA-claimed device (by its UUID; a MIG device by its parent's UUID and
    profile: gpuctl.dcgm.holders.Exporter), labelled exported_namespace with its claim's
    namespace if asked."""
    uuids: dict[str, list[str]] = {}
    migs: dict[str, list[tuple[str, str]]] = {}
    for uuid, (ns, _pod) in exporter.claimed.items():
        uuids.setdefault(ns if namespace else "", []).append(uuid)
    for mig, (ns, _pod) in () if whole else exporter.claimed_mig.items():
        migs.setdefault(ns if namespace else "", []).append(mig)
    parts = []
    for ns in sorted(uuids.keys() | migs.keys()):
        whole_ones = _join(f"UUID=~{holders.any_of(uuids.get(ns, []))}", WHOLE if whole else "")
        selectors = [whole_ones] if ns in uuids else []
        selectors += [
            f"UUID=~{holders.any_of([parent])}, GPU_I_PROFILE=~{holders.any_of([profile])}"
            for parent, profile in migs.get(ns, ())
        ]
        expr = " or ".join(f"group by ({_ON}) ({{{_UTILIZATION}, {m}}})" for m in selectors)
        if namespace:  # a Kubernetes name: no `$` to expand
            expr = f'label_replace({expr}, "{holders.EXPORTED[0]}", {json.dumps(ns)}, "", "")'
        parts.append(expr)
    return " or ".join(parts)


def _claimed_whole(exporter: Exporter) -> str:
    """The whole GPUs only a DRA claim names a holder for, by UUID."""
    named = _held(exporter, pod=True)
    return f"group by (UUID) (({_claimed(exporter, whole=True)}) unless on ({_ON}) ({named}))"


def _reading(sort: str) -> str:
    """Per device with its node label: the reading `sort` orders by, highest first."""

    def latest(metric: str, extra: str = "") -> str:
        return _per_device(lambda m: f'{{__name__="{metric}", {_join(m, extra)}}}', node=True)

    if sort == "memory":
        used, free, reserved = latest(FB_USED), latest(FB_FREE), latest(FB_RESERVED)
        return f"100 * ({used}) / (({used}) + ({free}) + (({reserved}) or ({used}) * 0))"
    if sort == "util":
        return busy.promql(latest)
    return latest({"temp": TEMP, "power": POWER}[sort])


def figures_query(
    window: str, idle_threshold: float, exporter: Exporter, sort: str = "index", rows: int = 0
) -> str:
    """One instant query for every cluster-wide figure of a live frame; each answer series
    carries a `figure` label saying which. `rows`: GPUs on screen, for a sort by value."""
    check_sort(sort)
    duration_seconds(window, "--window")
    threshold = repr(float(idle_threshold))
    mean, by_node = _mean(window), _mean(window, node=True)
    held, by_namespace = _held(exporter), _held(exporter, namespace=True)
    free = f"({_mean(window, node=True, whole_only=True)}) unless on ({_ON}) ({held})"
    figures = {
        # per node and kind (MIG devices `kind="mig"`): devices idle (1) and not (0); the
        # sum of their means; its physical GPUs (a GPU's MIG devices count once)
        "node_idle": f'count_values by ({_NODE}, {KIND}) ("idle", '
        f"{_kinded(f'({by_node}) < bool {threshold}')})",
        "node_sum": f"sum by ({_NODE}) ({by_node})",
        "node_gpus": f"count by ({_NODE}) (count without (GPU_I_ID) ({by_node}))",
        "idle_held": f"count by ({KIND}) "
        f"({_kinded(f'(({mean}) < {threshold}) and on ({_ON}) ({held})')})",
        # per namespace and kind: devices its pods hold, idle (1) and not (0); the sum of
        # their means
        "ns_idle": f'count_values by ({_NAMESPACE}, {KIND}) ("idle", '
        + _kinded(f"({by_namespace}) * on ({_ON}) group_left () (({mean}) < bool {threshold})")
        + ")",
        "ns_sum": f"sum by ({_NAMESPACE}) (({by_namespace}) * on ({_ON}) group_left () ({mean}))",
        # how many pods hold n whole GPUs; how many nodes have n whole GPUs free
        "shapes": f'count_values("n", count by ({_POD}) '
        f"({_held(exporter, namespace=True, pod=True, whole=True)}))",
        "free": f'count_values("n", count by ({_NODE}) ({free}))',
        # how many GPUs each busy signal judged
        "signals": f"count by ({busy.LABEL}) ({_mean(window, labelled=True)})",
        # whether other vendors' exporters have series (their devices are not in these figures)
        "others": f"count({exporters.current_query()})",
    }
    if exporter.claimed:  # their pods' shapes (whole GPUs): read_figures counts them
        figures["claimed"] = _claimed_whole(exporter)
    if sort == "idle" and rows > 0:
        figures["page"] = f"bottomk({rows}, {by_node})"
    elif sort != "index" and rows > 0:
        figures["page"] = f"topk({rows}, {_reading(sort)})"
    return " or ".join(
        f'label_replace({expr}, "figure", "{name}", "", "")' for name, expr in figures.items()
    )


@dataclass
class _Count:
    """Per node or namespace: whole GPUs and MIG devices, idle ones, their means' sum, and
    (per node) the physical GPUs."""

    gpus: int = 0
    idle_gpus: int = 0
    slices: int = 0
    idle_slices: int = 0
    means: float = 0.0
    physical: int = 0

    def add(self, labels: dict[str, str], what: str, value: float) -> None:
        n, idle, mig = int(value), labels.get("idle") == "1", labels.get(KIND) == "mig"
        if what == "sum":
            self.means += value
        elif what == "gpus":
            self.physical += n
        elif mig:
            self.slices, self.idle_slices = self.slices + n, self.idle_slices + n * idle
        else:
            self.gpus, self.idle_gpus = self.gpus + n, self.idle_gpus + n * idle

    @property
    def devices(self) -> int:
        return self.gpus + self.slices

    def mean(self) -> float | None:
        return self.means / self.devices if self.devices else None


def read_figures(
    samples: Iterable[usage.Sample], claimed: Mapping[str, tuple[str, str]] | None = None
) -> Figures:
    """The answer of figures_query, as the live frame shows it; CLAIMED: its exporter's."""
    per: dict[str, dict[str, _Count]] = {"node": {}, "ns": {}}
    counts: dict[str, dict[int, int]] = {"shapes": {}, "free": {}}
    idle_held: dict[bool, int] = {False: 0, True: 0}  # per kind: a MIG device or not
    page: list[str] = []
    signals: dict[str, int] = {}
    claims: Counter[tuple[str, str]] = Counter()  # whole GPUs held by a claim's pod alone
    others = 0
    for labels, value in samples:
        figure = labels.get("figure") or ""
        kind, _, what = figure.partition("_")
        if kind in per:
            name = _node(labels) if kind == "node" else _namespace(labels)
            per[kind].setdefault(name, _Count()).add(labels, what, value)
        elif figure in counts:
            counts[figure][int(float(labels["n"]))] = int(value)
        elif figure == "signals":
            signals[labels.get(busy.LABEL) or ""] = int(value)
        elif figure == "idle_held":
            idle_held[labels.get(KIND) == "mig"] += int(value)
        elif figure == "page":
            page.append(_node(labels))
        elif figure == "others":
            others = int(value)
        elif figure == "claimed" and claimed and labels.get("UUID") in claimed:
            claims[claimed[labels["UUID"]]] += 1
    for n in claims.values():
        counts["shapes"][n] = counts["shapes"].get(n, 0) + 1

    nodes = sorted(per["node"].items(), key=lambda item: natural_key(item[0]))
    means = [NodeUsage(n, m) for n, c in nodes if (m := c.mean()) is not None]
    total = _Count(*(sum(getattr(c, f.name) for _, c in nodes) for f in fields(_Count)))
    shapes, free = counts["shapes"], counts["free"]
    shape = max(shapes, key=lambda n: (shapes[n], n)) if shapes else None
    summary = ClusterSummary(
        gpus=total.physical,
        mean_utilization=total.mean(),
        idle_gpus=total.idle_gpus,
        idle_allocated_gpus=idle_held[False],
        busiest=max(means, key=lambda n: n.mean_utilization) if means else None,
        idlest=min(means, key=lambda n: n.mean_utilization) if means else None,
        request_shape=shape,
        stranded_gpus=None if shape is None else sum(n * k for n, k in free.items() if n < shape),
        signal=busy.summary_of(signals),
        mig_gpus=total.physical - total.gpus,
        mig_slices=total.slices,
        idle_mig_slices=total.idle_slices,
        idle_allocated_mig_slices=idle_held[True],
    )
    namespaces = [
        NamespaceUsage(ns, c.gpus, c.mean(), c.idle_gpus, c.slices, c.idle_slices)
        for ns, c in per["ns"].items()
    ]
    namespaces.sort(key=lambda n: (-(n.gpus + n.mig_slices), n.namespace))
    node_rows = {n: c.devices for n, c in nodes}
    return Figures(summary, namespaces, node_rows, list(dict.fromkeys(page)), others)


def _node(labels: dict[str, str]) -> str:
    return labels.get("Hostname") or labels.get("hostname") or labels.get("instance") or "-"


def _namespace(labels: dict[str, str]) -> str:
    return next((ns for label, _ in _HOLDER_LABELS if (ns := labels.get(label))), "-")


def page_nodes(figures: Figures, sort: str, rows: int) -> list[str]:
    """The nodes whose GPUs fill the screen: the first nodes in natural order, or those
    of the GPUs that figures_query ranked first."""
    if sort != "index":
        return figures.page
    chosen, shown = [], 0
    for node in sorted(figures.node_gpus, key=natural_key):
        if shown >= rows:
            break
        chosen.append(node)
        shown += figures.node_gpus[node]
    return chosen


def reading(sort: str) -> Callable[[ClusterGpuRow], float | None]:
    """What a sort by value orders rows by, highest first (`idle`: the mean, negated)."""
    return {
        "util": lambda r: r.utilization_gpu,
        "memory": lambda r: (
            100 * r.memory_used_mib / r.memory_total_mib
            if r.memory_used_mib is not None and r.memory_total_mib
            else None
        ),
        # a MIG device by its GPU's reading
        "temp": lambda r: r.temperature_c if r.board is None else r.board.temperature_c,
        "power": lambda r: r.power_w if r.board is None else r.board.power_w,
        "idle": lambda r: None if r.mean_utilization is None else -r.mean_utilization,
    }[sort]


def page_rows(rows: list[ClusterGpuRow], sort: str, limit: int) -> list[ClusterGpuRow]:
    """The rows on screen, in the sort's order (GPUs without the reading last, ties in node
    order), from the rows of page_nodes."""
    if sort == "index":
        return rows[:limit]  # build_frame's order
    value_of = reading(sort)

    def order(r: ClusterGpuRow) -> tuple[bool, float, tuple[object, ...], tuple[object, ...]]:
        value = value_of(r)
        return (value is None, -(value or 0.0), natural_key(r.node), natural_key(r.gpu))

    return sorted(rows, key=order)[:limit]
