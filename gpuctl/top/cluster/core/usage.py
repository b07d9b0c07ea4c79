"""Cluster GPU usage from DCGM-exporter samples: the PromQL to ask, rows per GPU, idle
detection, per-namespace and per-cluster summaries. Pure: samples in, plain data out."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from gpuctl.common.ordering import natural_key
from gpuctl.dcgm import busy, exporters, holders
from gpuctl.dcgm.holders import Exporter, Holder
from gpuctl.dcgm.metrics import (
    BY_HOST,
    BY_UUID,
    FB_FREE,
    FB_RESERVED,
    FB_USED,
    IDENTITY,
    METRICS,
    POWER,
    TEMP,
    Key,
    key_of,
)
from gpuctl.dcgm.promql import METRIC, duration_seconds

# Labels worth showing, and those that say who holds the device (see holders.py).
# (`uuid`: dcgm-exporter's --use-old-namespace; such devices are keyed by node and index.)
ROW_LABELS = IDENTITY + ("uuid", "GPU_I_PROFILE", "modelName", "instance")  # what a row shows
ATTRIBUTES = tuple(dict.fromkeys(ROW_LABELS + holders.LABELS))
# A row's labels, kept as values (None where absent): those its node's devices share, as
# one shared tuple per node, then the device's own (gpu and GPU_I_ID: one shared copy of
# each value).
_NODE_LABELS = ("Hostname", "hostname", "modelName", "instance", "GPU_I_PROFILE")
_DEVICE_LABELS = ("gpu", "GPU_I_ID", "UUID", "uuid")
assert set(_NODE_LABELS + _DEVICE_LABELS) == set(ROW_LABELS)

Sample = tuple[dict[str, Any], float]  # (labels, value)


@dataclass(frozen=True)
class Queries:
    current: str  # every metric's latest value, per device
    attributes: str  # one series per device carrying its model, MIG profile and holder
    window_util: str  # per-device mean busy signal (percent) over the window, `signal` naming it


# Each device once: series with a UUID keyed by it alone (a smaller answer to decode), any
# without one by node and index. Selecting on UUID's presence costs Prometheus a merge of
# every GPU's postings per selector; a query limited to a few nodes groups by all of them.
Keyings = tuple[tuple[tuple[str, ...], str], ...]  # (labels grouped by, matcher)
KEYINGS: Keyings = ((BY_UUID, 'UUID!=""'), (BY_HOST, 'UUID=""'))
FEW_KEYINGS: Keyings = ((IDENTITY, ""),)


def _per_device(make: Callable[[str, str], str], keyings: Keyings = KEYINGS) -> str:
    # make(matcher, by) gives the expression for one keying; the keyings are disjoint.
    return " or ".join(make(matcher, ", ".join(by)) for by, matcher in keyings)


def on_nodes(nodes: Iterable[str]) -> tuple[str, ...]:
    """Label matchers selecting exactly the series of these nodes (node_matching)."""
    return node_matching(holders.any_of(sorted(set(nodes))))


def node_matching(regex: str) -> tuple[str, ...]:
    """Label matchers selecting the series whose node matches REGEX (a PromQL string), as
    disjoint alternatives: a row's node is its `Hostname`, else its `hostname`, else its
    `instance`."""
    return (
        f"Hostname=~{regex}",
        f'Hostname="", hostname=~{regex}',
        f'Hostname="", hostname="", instance=~{regex}',
    )


def queries(window: str, only: tuple[str, ...] = ("",), others: bool = False) -> Queries:
    """The three instant queries one frame needs, whatever the cluster size; `only`:
    label matchers (alternatives, e.g. on_nodes()) limiting them to some series. others:
    also every other vendor's exporter's series (gpuctl.dcgm.exporters), in the answers
    of `current` and `window_util`, which FrameBuilder sets apart."""
    duration_seconds(window, "--window")
    names = '__name__=~"' + "|".join(METRICS) + '"'
    keyings = KEYINGS if only == ("",) else FEW_KEYINGS

    def select(*matchers: str, wrap: Callable[[str], str] = str) -> str:
        # One selector per alternative in `only`, each wrapped, joined by `or`.
        return " or ".join(wrap("{" + ", ".join(filter(None, (*matchers, o))) + "}") for o in only)

    def window_mean(metric: str, matcher: str) -> str:
        def make(m: str, by: str) -> str:
            means = select(
                f'__name__="{metric}"',
                m,
                matcher,
                wrap=lambda sel: f"avg_over_time({sel}[{window}])",
            )
            return f"max by ({by}) ({means})"

        return _per_device(make, keyings)

    found = Queries(
        current=_per_device(lambda m, by: f"max by (__name__, {by}) ({select(names, m)})", keyings),
        attributes=f"group by ({', '.join(ATTRIBUTES)}) ({select(names)})",
        window_util=busy.promql(window_mean, labelled=True),
    )
    if not others:
        return found
    # (`or` is left-associative and the lowest binding: no parentheses needed)
    return Queries(
        f"{found.current} or {exporters.current_query()}",
        found.attributes,
        f"{found.window_util} or {exporters.means_query(window)}",
    )


@dataclass(slots=True)
class ClusterGpuRow:
    node: str
    gpu: str
    uuid: str | None
    model: str | None
    mig_profile: str | None
    utilization_gpu: float | None  # percent, now
    mean_utilization: float | None  # percent, over the window
    memory_used_mib: float | None
    memory_total_mib: float | None  # used + free (+ reserved where reported)
    temperature_c: float | None
    power_w: float | None
    holders: tuple[Holder, ...]  # sorted; several when a shared GPU (time-slicing, MPS)
    idle: bool | None  # None when the window holds no utilization sample
    signal: str | None = None  # the busy signal judged by (gpuctl.dcgm.busy.SIGNALS' names)
    board: MigGpu | None = None  # a MIG device's GPU (its temperature and power are the GPU's)
    vendor: str = "nvidia"  # whose device (gpuctl.gpus.vendors' names; dcgm-exporter: NVIDIA)

    @property
    def pod(self) -> str | None:
        return self.holders[0].pod if self.holders else None

    @property
    def namespace(self) -> str | None:
        return self.holders[0].namespace if self.holders else None

    @property
    def allocated(self) -> bool:
        return bool(self.holders)

    @property
    def idle_allocated(self) -> bool:
        return bool(self.idle) and self.allocated


@dataclass(slots=True)
class MigGpu:
    """A GPU split into MIG devices: it is one physical GPU, and what DCGM reads from the
    board (temperature, power, clocks) is its own, not its devices': dcgm-exporter repeats
    those readings on each MIG device's series (NVIDIA/dcgm-exporter#317)."""

    node: str
    gpu: str  # its index
    uuid: str | None
    model: str | None
    temperature_c: float | None
    power_w: float | None
    slices: int = 0  # its MIG devices that report


@dataclass
class NamespaceUsage:
    namespace: str
    gpus: int  # whole GPUs its pods hold
    mean_utilization: float | None  # over its GPUs and MIG devices
    idle_gpus: int
    mig_slices: int = 0  # MIG devices its pods hold
    idle_mig_slices: int = 0


@dataclass
class NodeUsage:
    node: str
    mean_utilization: float


@dataclass
class ClusterSummary:
    gpus: int  # physical GPUs: whole ones and those split into MIG devices
    mean_utilization: float | None  # over the whole GPUs and the MIG devices
    idle_gpus: int  # whole GPUs
    idle_allocated_gpus: int
    busiest: NodeUsage | None
    idlest: NodeUsage | None
    request_shape: int | None = None  # whole GPUs the most common pod holds
    stranded_gpus: int | None = None  # free GPUs on nodes with fewer free than that
    signal: str = "none"  # the busy signals the GPUs were judged by (busy.summary)
    mig_gpus: int = 0  # GPUs split into MIG devices
    mig_slices: int = 0  # their MIG devices
    idle_mig_slices: int = 0
    idle_allocated_mig_slices: int = 0

    @property
    def devices(self) -> int:
        """Whole GPUs and MIG devices: a row each."""
        return self.gpus - self.mig_gpus + self.mig_slices


@dataclass
class ClusterFrame:
    rows: list[ClusterGpuRow]
    namespaces: list[NamespaceUsage]
    summary: ClusterSummary
    matched: int | None = None  # the rows a live view's filter matches (None: no filter)
    others_left_out: bool = False  # a live frame without the other vendors' devices


def build_frame(
    current: Iterable[Sample],
    attributes: Iterable[Sample],
    window_util: Iterable[Sample],
    idle_threshold: float,
    exporter: Exporter = Exporter(),
) -> ClusterFrame:
    """Rows (one per GPU or MIG device, grouped by node) and the waste summaries."""
    builder = FrameBuilder(exporter)
    builder.add_current(current)
    builder.add_attributes(attributes)
    builder.add_means(window_util)
    return builder.frame(idle_threshold)


# A device's record: one list, filled by the three answers in any order. Its latest
# readings first, by metric (METRICS' order), then what the other two answers say of it.
_SLOT = {m: i for i, m in enumerate(METRICS)}
_USED, _FREE, _RESERVED, _TEMP, _POWER = (
    _SLOT[m] for m in (FB_USED, FB_FREE, FB_RESERVED, TEMP, POWER)
)
_READ = len(METRICS)  # True once the device has a reading: only such devices make rows
_KEPT = _READ + 1  # the attributes its row shows (Kept), None before any
_HELD = _READ + 2  # its holders: its only one, or the set of several (a shared GPU)
_MEAN = _READ + 3  # its busy signal's mean over the window
_SIGNAL = _READ + 4  # the name of that signal
_FIELDS = _READ + 5
# The busy rule (busy.RULE) on a record: (slot, name, scale to percent, judges MIG devices)
_BUSY = tuple((_SLOT[m], name, scale, for_mig) for m, name, scale, for_mig in busy.RULE)


class FrameBuilder:
    """The three answers of `queries` folded as they are decoded (each by its own thread)
    into one record per device, keeping only what its row needs: its readings, its fullest
    attributes, its holders and its window mean. Memory grows with the GPUs, not with the
    answers; each sample costs one lookup of its device."""

    def __init__(self, exporter: Exporter = Exporter()):
        self.exporter = exporter
        self.devices: dict[Key, list[Any]] = {}
        self._texts: dict[str | None, str | None] = {}  # one copy of each repeated label value
        self._nodes: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # one copy of each node's labels
        # another vendor's device -> (vendor, the signal of its latest reading)
        self.vendors: dict[Key, tuple[str, str | None]] = {}
        self._other_current: list[Sample] = []  # other vendors' series, shaped by frame()
        self._other_means: list[Sample] = []

    def _record(self, key: Key) -> list[Any]:
        # setdefault: another thread may add the same device meanwhile
        return self.devices.get(key) or self.devices.setdefault(key, [None] * _FIELDS)

    def add_current(self, samples: Iterable[Sample]) -> None:
        devices, slot, finite, record = self.devices, _SLOT, math.isfinite, self._record
        last_uuid = last_instance = None
        readings: list[Any] = []
        for labels, value in samples:  # spelled out: 5 to 7 series per GPU
            try:
                i = slot[labels["__name__"]]
            except KeyError:  # not a metric read here (or no name), or another vendor's
                if labels.get("__name__") in exporters.OWNER:
                    self._other_current.append((labels, value))
                continue
            if finite(value):
                uuid, instance = labels.get("UUID"), labels.get("GPU_I_ID", "")
                # A device's series mostly come one after another: its record is looked
                # up when the device changes (by UUID: key_of's first case, inline).
                if uuid != last_uuid or instance != last_instance or not uuid:
                    last_uuid, last_instance = uuid, instance
                    key = (uuid, instance) if uuid else key_of(labels)
                    readings = devices.get(key) or record(key)
                    readings[_READ] = True
                readings[i] = value

    def add_attributes(self, samples: Iterable[Sample]) -> None:
        # The same device can come with more than one set of attributes (a label present
        # on some metrics only, one set per pod sharing it): keep the fullest,
        # deterministically. Only the labels a row shows are kept.
        devices, intern, record = self.devices, self._texts.setdefault, self._record
        holder, exporter, nodes = holders.holder, self.exporter, self._nodes
        for labels, _ in samples:
            get = labels.get
            uuid = get("UUID")  # key_of's first case, inline
            key = (uuid, get("GPU_I_ID", "")) if uuid else key_of(labels)
            device = devices.get(key) or record(key)
            if (h := holder(labels, exporter)) is not None:
                known = device[_HELD]
                if known is None:
                    device[_HELD] = h
                elif type(known) is set:
                    known.add(h)
                elif known != h:
                    device[_HELD] = {known, h}
            size = len(labels)
            if "" in labels.values():  # Prometheus drops empty labels; other sources may not
                size -= list(labels.values()).count("")
            best = device[_KEPT]
            if best is not None and size < best[0]:
                continue
            node = tuple(map(get, _NODE_LABELS))
            node = nodes.get(node) or nodes.setdefault(node, node)
            gpu, instance_id = get("gpu"), get("GPU_I_ID")
            new = (
                size,
                node,
                intern(gpu, gpu),
                intern(instance_id, instance_id),
                uuid,
                get("uuid"),
            )
            if best is None or size > best[0] or _shown(new) > _shown(best):
                device[_KEPT] = new

    def add_means(self, samples: Iterable[Sample]) -> None:
        devices, intern, record, finite = (
            self.devices,
            self._texts.setdefault,
            self._record,
            math.isfinite,
        )
        for labels, value in samples:
            if METRIC in labels:  # another vendor's (queries(others=True))
                self._other_means.append((labels, value))
            elif finite(value):
                uuid = labels.get("UUID")  # key_of's first case, inline
                key = (uuid, labels.get("GPU_I_ID", "")) if uuid else key_of(labels)
                device = devices.get(key) or record(key)
                device[_MEAN] = value
                if name := labels.get(busy.LABEL):
                    device[_SIGNAL] = intern(name, name)

    def add_others(self, shaped: exporters.Shaped) -> None:
        """Other vendors' devices (gpuctl.dcgm.exporters.shape), each row saying whose."""
        self.add_current(shaped.current)
        self.add_attributes(shaped.attributes)
        self.add_means(shaped.means)
        self.vendors.update(shaped.vendors)

    def frame(self, idle_threshold: float) -> ClusterFrame:
        if self._other_current or self._other_means:
            shaped = exporters.shape(self._other_current, self._other_means, self.exporter.models)
            self.add_others(shaped)
            self._other_current, self._other_means = [], []
        devices, vendors = self.devices, self.vendors
        # A MIG-enabled GPU may also report board-level series (temperature, power)
        # without a GPU instance: those are its GPU's readings instead of a row of their own.
        mig_boards = {k[:-1] + ("",) for k, d in devices.items() if k[-1] and d[_READ]}
        # Each device's holders as a tuple, one shared copy per holder (a pod holds several)
        alone: dict[Holder, tuple[Holder, ...]] = {}
        boards: dict[Key, MigGpu] = {}
        rows = []
        for key, device in devices.items():
            if not device[_READ] or key in mig_boards:
                continue
            pods = device[_HELD]
            who: tuple[Holder, ...] = (
                ()
                if pods is None
                else alone.get(pods) or alone.setdefault(pods, (pods,))
                if type(pods) is Holder
                else tuple(sorted(pods, key=_holder_order))
            )
            kept = device[_KEPT] or _kept_of(key)
            row = _row(device, kept, who, idle_threshold)
            if vendors and (other := vendors.get(key)):
                row.vendor, row.signal = other[0], device[_SIGNAL] or other[1]
            if key[-1]:
                row.board = _board(boards, key, row, kept, device, devices.get(key[:-1] + ("",)))
            rows.append(row)
        _in_node_order(rows)
        return ClusterFrame(rows, namespace_usage(rows), summarize(rows))


def _board(
    boards: dict[Key, MigGpu],
    key: Key,
    row: ClusterGpuRow,
    kept: Kept,
    device: list[Any],
    own: list[Any] | None,
) -> MigGpu:
    """The GPU of the MIG device `key`: its readings are the board series' (`own`) where
    the GPU has them, else those its devices' series carry (the same on each)."""
    temp, power = device[_TEMP], device[_POWER]
    if own is not None:
        temp = temp if own[_TEMP] is None else own[_TEMP]
        power = power if own[_POWER] is None else own[_POWER]
    gpu = boards.get(key[:-1])
    if gpu is None:
        index = row.gpu.partition("/")[0]
        gpu = boards[key[:-1]] = MigGpu(row.node, index, row.uuid, kept[1][2] or None, temp, power)
    else:
        gpu.temperature_c = _max(gpu.temperature_c, temp)
        gpu.power_w = _max(gpu.power_w, power)
    gpu.slices += 1
    return gpu


def _max(a: float | None, b: float | None) -> float | None:
    return a if b is None else b if a is None else max(a, b)


# What a device's row shows of its attributes: (labels set, values of _NODE_LABELS, then
# those of _DEVICE_LABELS), each value None (or "") where the series lacks it.
Kept = tuple[int, tuple[Any, ...], Any, Any, Any, Any]
_NO_NODE = (None,) * len(_NODE_LABELS)


def _shown(kept: Kept) -> list[tuple[str, Any]]:
    """The labels set in `kept`, sorted: which of two equally full sets wins."""
    pairs = zip(_NODE_LABELS + _DEVICE_LABELS, kept[1] + kept[2:])
    return sorted((k, v) for k, v in pairs if v)


def _kept_of(key: Key) -> Kept:
    """A device's attributes as its key gives them (no attributes series for it)."""
    if len(key) == 2:  # BY_UUID
        return (0, _NO_NODE, None, key[1], key[0], None)
    _, host, hostname, gpu, instance_id = key
    return (0, (host, hostname, None, None, None), gpu, instance_id, None, None)


def _holder_order(h: Holder) -> tuple[str, str, str]:
    return (h.namespace or "", h.pod, h.container or "")


def _in_node_order(rows: list[ClusterGpuRow]) -> None:
    """Sorts rows by node, then GPU, in natural order (gpu-2 before gpu-10): each distinct
    name ranked once, rows then sorted by a number."""

    def ranks(names: set[str]) -> dict[str, int]:
        # (sorted as text first: names of one natural key, e.g. n01 and n1, in a set order)
        return {n: i for i, n in enumerate(sorted(sorted(names), key=natural_key))}

    node, gpu = ranks({r.node for r in rows}), ranks({r.gpu for r in rows})
    width = len(gpu)
    rows.sort(key=lambda r: node[r.node] * width + gpu[r.gpu])


def _row(device: list[Any], kept: Kept, who: tuple[Holder, ...], threshold: float) -> ClusterGpuRow:
    """A device's row from its record. A MIG device has no temperature or power of its own:
    they are its GPU's (MigGpu)."""
    _, node, gpu, instance_id, uuid, old_uuid = kept
    host, hostname, model, instance, profile = node
    util = now = None
    for slot, name, scale, for_mig in _BUSY:  # the busy rule on its latest readings
        value = device[slot]
        if value is not None and (for_mig or not instance_id):
            util, now = scale * value, name
            break
    mean, signal = device[_MEAN], device[_SIGNAL]
    used, free, temp, power = device[_USED], device[_FREE], device[_TEMP], device[_POWER]
    model, profile = model or None, profile or None
    if instance_id:
        gpu = f"{gpu or '?'}/mig{instance_id}"
        temp = power = None
        if model:
            model = f"{model} MIG {profile}" if profile else f"{model} MIG"
    reserved = device[_RESERVED]
    return ClusterGpuRow(
        host or hostname or instance or "-",  # node
        gpu or "-",
        uuid or old_uuid or None,
        model,
        profile,  # mig_profile
        util,  # utilization_gpu
        mean,  # mean_utilization
        used,  # memory_used_mib
        # Memory the driver reserves is in neither used nor free (DCGM_FI_DEV_FB_RESERVED).
        (used + free + (0.0 if reserved is None else reserved))
        if used is not None and free is not None
        else None,
        temp,  # temperature_c
        power,  # power_w
        who,  # holders
        None if mean is None else mean < threshold,  # idle
        signal or now,  # the signal of its window mean, else that of its latest readings
    )


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def namespace_usage(rows: list[ClusterGpuRow]) -> list[NamespaceUsage]:
    """GPUs and MIG devices held per namespace (its pods hold them), their mean utilization,
    the idle ones. A GPU shared by pods of several namespaces counts once in each."""
    groups: dict[str, list[ClusterGpuRow]] = {}
    for r in rows:
        if len(r.holders) == 1:  # most GPUs: no set to build
            groups.setdefault(r.holders[0].namespace or "-", []).append(r)
            continue
        for ns in sorted({h.namespace or "-" for h in r.holders}):
            groups.setdefault(ns, []).append(r)
    out = []
    for ns, g in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        slices = [r for r in g if r.board is not None]
        out.append(
            NamespaceUsage(
                ns,
                len(g) - len(slices),
                _mean([r.mean_utilization for r in g]),
                sum(1 for r in g if r.idle and r.board is None),
                len(slices),
                sum(1 for r in slices if r.idle),
            )
        )
    return out


def summarize(rows: list[ClusterGpuRow]) -> ClusterSummary:
    per_node: dict[str, list[float | None]] = {}
    for r in rows:
        per_node.setdefault(r.node, []).append(r.mean_utilization)
    nodes = [NodeUsage(n, m) for n, v in per_node.items() if (m := _mean(v)) is not None]
    nodes.sort(key=lambda n: natural_key(n.node))
    shape, stranded_gpus = stranded(rows)
    slices = [r for r in rows if r.board is not None]
    split = len({id(r.board) for r in slices})
    whole = len(rows) - len(slices)
    idle: Counter[bool] = Counter()  # per kind: a whole GPU (True) or a MIG device
    idle_held: Counter[bool] = Counter()
    for r in rows:
        if r.idle:
            idle[r.board is None] += 1
            idle_held[r.board is None] += bool(r.holders)
    return ClusterSummary(
        gpus=whole + split,
        mean_utilization=_mean([r.mean_utilization for r in rows]),
        idle_gpus=idle[True],
        idle_allocated_gpus=idle_held[True],
        busiest=max(nodes, key=lambda n: n.mean_utilization) if nodes else None,
        idlest=min(nodes, key=lambda n: n.mean_utilization) if nodes else None,
        request_shape=shape,
        stranded_gpus=stranded_gpus,
        signal=busy.summary_of(Counter(map(_SIGNAL_OF, rows))),
        mig_gpus=split,
        mig_slices=len(slices),
        idle_mig_slices=idle[False],
        idle_allocated_mig_slices=idle_held[False],
    )


_SIGNAL_OF = attrgetter("signal")


def stranded(rows: list[ClusterGpuRow]) -> tuple[int | None, int | None]:
    """The most common request shape (how many whole GPUs a pod holds, over the pods that
    hold whole GPUs now; a tie goes to the larger) and the stranded GPUs: free whole GPUs
    on nodes with fewer free ones than that shape, which no such pod can use. MIG devices
    are left out of both. (None, None) when no pod holds a whole GPU."""
    whole = [r for r in rows if r.board is None]
    per_pod: Counter[tuple[str | None, str]] = Counter()
    # GPUs per set of holders first (counted in C), then per pod
    for who, gpus in Counter(r.holders for r in whole if r.holders).items():
        if len(who) == 1:  # most GPUs: no set to build
            per_pod[who[0].namespace, who[0].pod] += gpus
        else:
            for pod in {(h.namespace, h.pod) for h in who}:
                per_pod[pod] += gpus
    if not per_pod:
        return None, None
    shapes = Counter(per_pod.values())
    shape = max(shapes, key=lambda n: (shapes[n], n))
    free = Counter(r.node for r in whole if not r.holders)  # not allocated
    return shape, sum(n for n in free.values() if n < shape)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


# The fields of one GPU in the `--once -o json|yaml` document, in order.
GPU_FIELDS = (
    "node",
    "gpu",
    "uuid",
    "vendor",
    "model",
    "utilization_gpu",
    "memory_used_mib",
    "memory_total_mib",
    "temperature_c",
    "power_w",
    "pod",  # the first holder, as before shared GPUs were listed
    "namespace",
    "holders",
    "idle",
    "signal",
)


def _gpu_dict(*values: Any) -> dict[str, Any]:
    return dict(zip(GPU_FIELDS, values))


def gpus_out(rows: Iterable[ClusterGpuRow], make: Callable[..., Any] = _gpu_dict) -> list[Any]:
    """The GPUs of the `--once -o json|yaml` document, each `make(*values of GPU_FIELDS)`
    (a dict by default). Spelled out: this runs once per GPU."""
    # A pod's GPUs share one holders list (it holds several): made once per pod.
    # A reading with no fraction is its own rounding (most of them: utilization, memory,
    # temperature): `v % 1 == 0` costs a tenth of round(v, 1), and holds for no NaN or inf.
    listed: dict[tuple[Holder, ...], list[dict[str, str | None]]] = {}
    out = []
    finite = math.isfinite
    for r in rows:
        util, temp, power, used, total, who = (
            r.utilization_gpu,
            r.temperature_c,
            r.power_w,
            r.memory_used_mib,
            r.memory_total_mib,
            r.holders,
        )
        first = who[0] if who else None
        held = listed.get(who)
        if held is None:
            held = listed[who] = [
                {"namespace": h.namespace, "pod": h.pod, "container": h.container} for h in who
            ]
        # (memory in whole MiB: an exporter's reading can be NaN, or overflow when added up)
        out.append(
            make(
                r.node,
                r.gpu,
                r.uuid,
                r.vendor,
                r.model,
                None if util is None else util if util % 1 == 0 else round(util, 1),
                None if used is None or not finite(used) else round(used),
                None if total is None or not finite(total) else round(total),
                None if temp is None else temp if temp % 1 == 0 else round(temp, 1),
                None if power is None else power if power % 1 == 0 else round(power, 1),
                first and first.pod,
                first and first.namespace,
                held,
                r.idle,
                r.signal,
            )
        )
    return out


def mig_gpus(rows: Iterable[ClusterGpuRow]) -> list[MigGpu]:
    """The GPUs split into MIG devices, in the order of their first device."""
    return list({id(r.board): r.board for r in rows if r.board is not None}.values())


def mig_gpus_out(rows: Iterable[ClusterGpuRow]) -> list[dict[str, Any]]:
    """The `mig_gpus` of the `--once -o json|yaml` document: each GPU split into MIG devices
    with what belongs to the board."""
    return [
        {
            "node": b.node,
            "gpu": b.gpu,
            "uuid": b.uuid,
            "model": b.model,
            "mig_slices": b.slices,
            "temperature_c": _round(b.temperature_c),
            "power_w": _round(b.power_w),
        }
        for b in mig_gpus(rows)
    ]


def frame_to_dict(frame: ClusterFrame) -> dict[str, Any]:
    """The `--once -o json|yaml` document."""
    s = frame.summary
    return {
        "gpus": gpus_out(frame.rows),
        "mig_gpus": mig_gpus_out(frame.rows),
        "namespaces": [
            {
                "namespace": n.namespace,
                "gpus": n.gpus,
                "mig_slices": n.mig_slices,
                "mean_utilization": _round(n.mean_utilization),
                "idle_gpus": n.idle_gpus,
                "idle_mig_slices": n.idle_mig_slices,
            }
            for n in frame.namespaces
        ],
        "summary": {
            "gpus": s.gpus,
            "mig_gpus": s.mig_gpus,
            "mig_slices": s.mig_slices,
            "mean_utilization": _round(s.mean_utilization),
            "idle_gpus": s.idle_gpus,
            "idle_mig_slices": s.idle_mig_slices,
            "idle_allocated_gpus": s.idle_allocated_gpus,
            "idle_allocated_mig_slices": s.idle_allocated_mig_slices,
            "request_shape_gpus": s.request_shape,
            "stranded_gpus": s.stranded_gpus,
            "signal": s.signal,
        },
    }
