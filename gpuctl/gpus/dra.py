"""Dynamic Resource Allocation as a cluster publishes it (resource.k8s.io; kubernetes/api
resource/v1/types.go): DeviceClasses, the devices drivers publish in ResourceSlices, and
the ResourceClaims that allocate them — read into a `DraView`, the DRA half of the
accelerator inventory (gpuctl.gpus.accelerators.DraSource). Pure.

- Versions: v1 (Kubernetes 1.34+) and v1beta2 keep a device's fields at its top; v1beta1
  (1.32, 1.33) nests them under `basic:`. A capacity is `{value: <quantity>}`.
- Pools: a device is (driver, pool, name). A driver republishes a pool under a higher
  `generation`; only the newest generation whose `resourceSliceCount` slices are all
  there is read (the newest one, with a problem named, when none is complete).
- Devices are node-local when their slice names a `nodeName` (or, with
  perDeviceNodeSelection, the device does); devices reachable from several nodes
  (nodeSelector, allNodes) are no node's inventory.
- Who a device is comes from its attributes and capacity, never from its name: the vendor
  from the driver (gpuctl.gpus.vendors), the product from `productName` (NVIDIA, AMD, HAMi),
  `model` (Intel Gaudi) or `instanceType` (AWS Neuron), the model from the product
  (NVIDIA's through gpuctl.gpus.identity, the others' through gpuctl.gpus.vendor_models),
  the MIG profile from `profile` (its GPU: `parentUUID`), an AMD partition from
  `partitionProfile` on an `amdgpu-partition`, the memory from the `memory` capacity (AMD
  writes 0 when it could not read it), else, for a whole device, the model's. Unprefixed
  names are the driver's own domain.
- Partitionable devices (KEP-4815; DRAPartitionableDevices, beta from 1.36): a pool's
  slices publish `sharedCounters` (counter sets, e.g. a GPU's memory and memory slices)
  and each device the amounts it `consumesCounters`; a device is free only while what the
  allocated devices consumed leaves its amounts (NVIDIA's DynamicMIG: a MIG device uses
  memory slices of its GPU, the GPU all of them). A counter set the pool does not publish
  limits nothing.
- A device is unhealthy when a NoSchedule or NoExecute taint is on it, or when its driver
  says `healthy: false` (Intel Gaudi); allocated when a claim's `status.allocation` holds it
  (admin access, which takes nothing from others, aside). The claims kube-scheduler makes
  for extended resources backed by DRA (KEP-5004) are claims like the others.
- Its DeviceClass is the class whose CEL selectors all select it (gpuctl.gpus.dra_cel): the
  vendor's own classes first (gpu.nvidia.com before a site's a100.example.com), else the
  first by name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from gpuctl.common import quantity
from gpuctl.gpus import dra_cel, identity, vendor_models
from gpuctl.gpus.accelerators import DRA, Accelerator
from gpuctl.gpus.vendors import vendor_of_driver

EXTENDED_CLAIM = "resource.kubernetes.io/extended-resource-claim"  # KEP-5004's annotation
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"  # a claim made from a template
UNHEALTHY_EFFECTS = ("NoSchedule", "NoExecute")
GAUDI_DRIVER = "gaudi.intel.com"  # Intel's GPU driver (gpu.intel.com) names no model gpuctl knows

Key = tuple[str, str, str]  # (driver, pool, device); a counter set's: (driver, pool, set)
Counters = dict[str, Fraction]
ALL_DEVICES = 32  # AllocationResultsMaxSize: what an `All` request is charged to quota


@dataclass(frozen=True)
class Device:
    """One device a driver publishes (gpuctl.gpus.dra_cel.CelDevice)."""

    driver: str
    pool: str
    name: str
    node: str | None
    attributes: Mapping[str, Any]  # domain/name -> str, int, bool or dra_cel.Version
    capacity: Mapping[str, Fraction]  # domain/name -> quantity
    shared: bool = False  # allowMultipleAllocations
    taints: tuple[Mapping[str, Any], ...] = ()
    # a NoSchedule or NoExecute taint on it, or its driver's `healthy: false`
    unhealthy: bool = False
    consumes: tuple[tuple[str, Mapping[str, Fraction]], ...] = ()  # (counter set, amounts)

    @property
    def key(self) -> Key:
        return (self.driver, self.pool, self.name)

    def attribute(self, name: str) -> Any:
        """The driver's own attribute NAME (or a qualified one), None when absent."""
        return self.attributes.get(name if "/" in name else f"{self.driver}/{name}")

    def amount(self, name: str) -> Fraction | None:
        return self.capacity.get(name if "/" in name else f"{self.driver}/{name}")

    @cached_property
    def product(self) -> str | None:
        value = (
            self.attribute("productName")
            or self.attribute("model")
            or self.attribute("instanceType")
        )
        return str(value) if value is not None else None

    @cached_property
    def model(self) -> str | None:
        """The canonical model (gpuctl.gpus.identity, gpuctl.gpus.vendor_models)."""
        whole = self.attribute("parentUUID") is None and self.partition is None
        return model_of(self.driver, self.product, self.memory_bytes if whole else None)

    @property
    def partition(self) -> str | None:
        """A MIG profile, or an AMD compute/memory partition of a partitioned GPU."""
        if self.attribute("profile") is not None:
            return str(self.attribute("profile"))
        if str(self.attribute("type") or "").endswith("partition"):
            value = self.attribute("partitionProfile")
            return str(value) if value is not None else None
        return None

    @property
    def memory_bytes(self) -> int | None:
        memory = self.amount("memory")
        return int(memory) if memory else None  # AMD's 0: not read

    @property
    def uuid(self) -> str | None:
        value = self.attribute("uuid")
        return str(value) if value is not None else None


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]  # CEL expressions; all must select a device
    extended_resource: str | None = None  # KEP-5004: spec.extendedResourceName

    def selects(self, device: Device) -> bool:
        """Whether every selector selects DEVICE (a selector failing on it: no)."""
        try:
            return dra_cel.selector(*self.selectors).matches(device)
        except dra_cel.SelectorError:
            return False


@dataclass(frozen=True)
class Allocated:
    """A device a claim holds, for which request."""

    key: Key
    request: str
    admin: bool = False


@dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    devices: tuple[Allocated, ...]
    pods: tuple[str, ...]  # reservedFor: the pods' names (in the claim's namespace)
    extended: bool = False  # made by kube-scheduler for an extended resource (KEP-5004)
    # DeviceClass → the devices ResourceQuota charges for it (`charges`)
    charged: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class DraView:
    """A cluster's DRA: its classes, devices and claims (gpuctl.gpus.accelerators.DraSource)."""

    classes: tuple[DeviceClass, ...]
    devices: tuple[Device, ...]
    claims: tuple[Claim, ...] = ()
    # (driver, pool) → why its devices may be incomplete
    pool_problems: Mapping[tuple[str, str], str] = field(default_factory=dict)
    counters: Mapping[Key, Mapping[str, Fraction]] = field(default_factory=dict)  # sharedCounters
    _by_node: dict[str, list[Device]] = field(default_factory=dict, compare=False, repr=False)
    _ranking: dict[str, list[DeviceClass]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for d in self.devices:
            if d.node is not None:
                self._by_node.setdefault(d.node, []).append(d)

    def on(self, node: str) -> Sequence[Device]:
        return self._by_node.get(node, ())

    @cached_property
    def allocated(self) -> dict[Key, Claim]:
        """Each device a claim holds (admin access aside) → the claim."""
        return {a.key: c for c in self.claims for a in c.devices if not a.admin}

    @cached_property
    def _left(self) -> dict[Key, Counters]:
        """What the allocated devices leave of each counter set."""
        left = {k: dict(v) for k, v in self.counters.items()}
        for d in self.devices:
            if d.consumes and d.key in self.allocated:
                _take(left, d)
        return left

    def available(self, devices: Sequence[Device], now: bool = True) -> list[Device]:
        """Of DEVICES, those one claim could take together: healthy, held by no claim and
        each within what the counter sets it consumes have left once the ones before it are
        taken (NOW; else on an empty node, nothing held)."""
        if not self.counters:
            held = self.allocated if now else {}
            return [d for d in devices if not d.unhealthy and d.key not in held]
        base = self._left if now else self.counters
        # a copy of the counter sets these devices consume alone: not the cluster's each call
        consumed = {(d.driver, d.pool, name) for d in devices for name, _ in d.consumes}
        left = {k: dict(base[k]) for k in consumed if k in base}
        out = []
        for d in devices:
            if d.unhealthy or (now and d.key in self.allocated) or not _fits(left, d):
                continue
            _take(left, d)
            out.append(d)
        return out

    def holders(self) -> dict[str, tuple[str, str]]:
        """Each allocated device's uuid → the (namespace, pod) its claim is reserved for:
        the holder of a DRA device, to join to DCGM's series by their UUID."""
        uuids = {d.key: d.uuid for d in self.devices if d.uuid}
        return {
            uuids[key]: (claim.namespace, claim.pods[0])
            for key, claim in self.allocated.items()
            if key in uuids and claim.pods
        }

    def mig_holders(self) -> dict[tuple[str, str], tuple[str, str]]:
        """(parent GPU's UUID, MIG profile) → the (namespace, pod) whose claims hold every MIG
        device of that profile on that GPU. DCGM's MIG series carry the parent's UUID, the
        profile and the GPU instance id; NVIDIA's driver publishes the parent, the profile
        and the placement (memorySlice<N>, the name), never the instance id, which NVML
        assigns apart from the placement: only where one pod holds every MIG device of the
        profile on that GPU is it the holder of each such series. The devices that exist:
        those with a `uuid` (created), and those allocated (DynamicMIG creates its devices,
        published uuid-less, when allocated)."""
        groups: dict[tuple[str, str], set[tuple[str, str] | None]] = {}
        for d in self.devices:
            parent, profile = d.attribute("parentUUID"), d.attribute("profile")
            claim = self.allocated.get(d.key)
            if parent is None or profile is None or (d.uuid is None and claim is None):
                continue
            held = (claim.namespace, claim.pods[0]) if claim is not None and claim.pods else None
            groups.setdefault((str(parent), str(profile)), set()).add(held)
        out = {}
        for key, holders in groups.items():
            (only, *others) = holders
            if only is not None and not others:
                out[key] = only
        return out

    @cached_property
    def class_named(self) -> dict[str, DeviceClass]:
        return {c.name: c for c in self.classes}

    def class_of(self, device: Device) -> str | None:
        """The DeviceClass DEVICE is shown under: its vendor's own classes first."""
        return next((c.name for c in self._ranked(device.driver) if c.selects(device)), None)

    def _ranked(self, driver: str) -> list[DeviceClass]:
        if driver not in self._ranking:
            vendor = vendor_of_driver(driver)
            own = list(vendor.device_classes) if vendor is not None else []
            self._ranking[driver] = sorted(
                self.classes,
                key=lambda c: (own.index(c.name) if c.name in own else len(own), c.name),
            )
        return self._ranking[driver]

    def accelerators(self, node: str) -> tuple[Accelerator, ...]:
        """NODE's devices, one Accelerator per kind: (driver, class, model, partition,
        memory); allocated from the claims, unhealthy from taints and health attributes."""
        groups: dict[tuple[Any, ...], list[Device]] = {}
        for d in self.on(node):
            kind = (d.driver, self.class_of(d), d.product, d.partition, d.memory_bytes)
            groups.setdefault(kind, []).append(d)
        held = self.allocated
        out = []
        for (driver, device_class, product, partition, memory), devices in groups.items():
            allocated = sum(1 for d in devices if d.key in held and not d.unhealthy)
            unhealthy = sum(1 for d in devices if d.unhealthy)
            vendor = vendor_of_driver(driver)
            model = model_of(driver, product, memory)
            if memory is None and partition is None:  # a driver that publishes none
                memory = vendor_models.memory_of(model)
            out.append(
                Accelerator(
                    vendor.name if vendor is not None else "unknown",
                    model,
                    product,
                    len(devices),
                    memory,
                    DRA,
                    device_class=device_class,
                    driver=driver,
                    partition=partition,
                    allocated=allocated,
                    unhealthy=unhealthy,
                    blocked=len(devices) - allocated - unhealthy - len(self.available(devices)),
                    devices=tuple(d.name for d in devices),
                    scheme="dra",
                )
            )
        return tuple(out)

    def problems(self, node: str) -> tuple[str, ...]:
        """A GPU published whole beside its own MIG devices (dra-driver-nvidia-gpu issue 719:
        allocating one leaves the other unusable), and the node's incomplete pools."""
        devices = self.on(node)
        whole = {d.uuid: d for d in devices if d.uuid and d.attribute("parentUUID") is None}
        parts: dict[str, int] = {}
        for d in devices:
            parent = d.attribute("parentUUID")
            if parent in whole and not _shared(whole[str(parent)], d):
                parts[str(parent)] = parts.get(str(parent), 0) + 1
        out = [
            f"{whole[uuid].name} ({uuid}) is published whole and as {n} MIG device(s) of "
            f"{whole[uuid].driver}: a claim on one leaves the other unusable"
            for uuid, n in parts.items()
        ]
        pools = dict.fromkeys((d.driver, d.pool) for d in devices)
        return (*out, *(self.pool_problems[p] for p in pools if p in self.pool_problems))


def _shared(a: Device, b: Device) -> bool:
    """Whether A and B consume one counter set: the scheduler keeps them apart."""
    return bool({s for s, _ in a.consumes} & {s for s, _ in b.consumes})


def _fits(left: dict[Key, Counters], d: Device) -> bool:
    for name, amounts in d.consumes:
        counters = left.get((d.driver, d.pool, name))
        if counters is not None and any(counters.get(c, Fraction(0)) < v for c, v in amounts.items()):  # fmt: skip
            return False
    return True


def _take(left: dict[Key, Counters], d: Device) -> None:
    for name, amounts in d.consumes:
        counters = left.get((d.driver, d.pool, name))
        if counters is not None:
            for c, v in amounts.items():
                counters[c] = counters.get(c, Fraction(0)) - v


def model_of(driver: str, product: str | None, memory: int | None) -> str | None:
    """The canonical model of a device DRIVER publishes as PRODUCT (its MEMORY, in bytes,
    tells NVIDIA's boards of one name apart); None: one gpuctl does not know."""
    vendor = vendor_of_driver(driver)
    if vendor is None or not product:
        return None
    if vendor.name == "nvidia":
        return identity.model_named(product, memory >> 20 if memory else None)
    if vendor.name == "amd":
        return vendor_models.amd_model(product)
    if driver == GAUDI_DRIVER:
        return vendor_models.gaudi_model(product)
    if vendor.name == "aws":
        row = vendor_models.instance({vendor_models.INSTANCE_TYPE: product})
        return row[0] if row else None
    return None


def view(
    classes: Iterable[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]] = (),
) -> DraView:
    """The DRA of a cluster from its DeviceClasses, ResourceSlices and ResourceClaims as the
    API returns them (any version gpuctl speaks)."""
    kept, problems = newest_pools(slices)
    devices = tuple(d for s in kept for d in slice_devices(s))
    return DraView(
        tuple(device_class(c) for c in classes),
        devices,
        tuple(claim(c) for c in claims),
        problems,
        {k: v for s in kept for k, v in shared_counters(s).items()},
    )


def shared_counters(s: Mapping[str, Any]) -> dict[Key, dict[str, Fraction]]:
    """A slice's counter sets (spec.sharedCounters), by (driver, pool, set name)."""
    spec = s.get("spec") or {}
    driver = str(spec.get("driver") or "")
    pool = str((spec.get("pool") or {}).get("name") or "")
    return {
        (driver, pool, str(c.get("name") or "")): _amounts(c.get("counters"))
        for c in spec.get("sharedCounters") or []
        if isinstance(c, dict)
    }


def _amounts(counters: Any) -> dict[str, Fraction]:
    """A `counters` map (name → {value: quantity}) as amounts."""
    out = {}
    for name, counter in (counters or {}).items() if isinstance(counters, dict) else ():
        value = _capacity_value(counter)
        if value is not None:
            out[str(name)] = value
    return out


def newest_pools(
    slices: Iterable[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], dict[tuple[str, str], str]]:
    """The slices of each pool's newest complete generation, and why a pool has none."""
    pools: dict[tuple[str, str], dict[int, list[Mapping[str, Any]]]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        where = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        pools.setdefault(where, {}).setdefault(_int(pool.get("generation")), []).append(s)
    kept: list[Mapping[str, Any]] = []
    problems = {}
    for (driver, pool), generations in pools.items():
        newest = sorted(generations, reverse=True)
        complete = [g for g in newest if len(generations[g]) >= _slice_count(generations[g][0])]
        chosen = complete[0] if complete else newest[0]
        if not complete:
            want = _slice_count(generations[chosen][0])
            problems[(driver, pool)] = (
                f"pool {pool} of {driver}: {len(generations[chosen])} of {want} "
                f"ResourceSlices of generation {chosen} published"
            )
        kept += generations[chosen]
    return kept, problems


def _slice_count(s: Mapping[str, Any]) -> int:
    return _int(((s.get("spec") or {}).get("pool") or {}).get("resourceSliceCount")) or 1


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def slice_devices(s: Mapping[str, Any]) -> list[Device]:
    spec = s.get("spec") or {}
    driver = str(spec.get("driver") or "")
    pool = str((spec.get("pool") or {}).get("name") or "")
    node = spec.get("nodeName")
    out = []
    for raw in spec.get("devices") or []:
        fields = raw.get("basic") or raw  # v1beta1 nests them
        where = node or fields.get("nodeName")  # perDeviceNodeSelection
        attributes = _qualified(driver, fields.get("attributes"), _attribute_value)
        taints = tuple(t for t in fields.get("taints") or [] if isinstance(t, dict))
        out.append(
            Device(
                driver,
                pool,
                str(raw.get("name") or ""),
                str(where) if where else None,
                attributes,
                _qualified(driver, fields.get("capacity"), _capacity_value),
                bool(fields.get("allowMultipleAllocations")),
                taints,
                attributes.get(f"{driver}/healthy") is False
                or any(t.get("effect") in UNHEALTHY_EFFECTS for t in taints),
                tuple(
                    (str(c.get("counterSet") or ""), _amounts(c.get("counters")))
                    for c in fields.get("consumesCounters") or []
                    if isinstance(c, dict)
                ),
            )
        )
    return out


def _qualified(driver: str, values: Any, convert: Any) -> dict[str, Any]:
    out = {}
    for name, value in (values or {}).items():
        converted = convert(value)
        if converted is not None:
            out[name if "/" in name else f"{driver}/{name}"] = converted
    return out


def _attribute_value(value: Any) -> Any:
    """One of a DeviceAttribute's `int`, `bool`, `string`, `version`."""
    if not isinstance(value, dict):
        return None
    if "version" in value:
        return dra_cel.version(str(value["version"]))
    for kind in ("string", "int", "bool"):
        if kind in value:
            return value[kind]
    return None


def _capacity_value(value: Any) -> Fraction | None:
    """A DeviceCapacity's `value` (v1alpha3 wrote the quantity alone)."""
    raw = value.get("value") if isinstance(value, dict) else value
    return quantity.from_api(raw) if raw is not None else None


def device_class(obj: Mapping[str, Any]) -> DeviceClass:
    spec = obj.get("spec") or {}
    selectors = tuple(
        str((s.get("cel") or {}).get("expression") or "")
        for s in spec.get("selectors") or []
        if isinstance(s, dict) and s.get("cel")
    )
    return DeviceClass(
        str((obj.get("metadata") or {}).get("name") or ""),
        selectors,
        spec.get("extendedResourceName"),
    )


def claim(obj: Mapping[str, Any]) -> Claim:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    return Claim(
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        tuple(
            Allocated(
                (str(r.get("driver")), str(r.get("pool")), str(r.get("device"))),
                str(r.get("request") or ""),
                bool(r.get("adminAccess")),
            )
            for r in results
            if isinstance(r, dict)
        ),
        tuple(
            str(r.get("name"))
            for r in status.get("reservedFor") or []
            if isinstance(r, dict) and r.get("resource") == "pods"
        ),
        EXTENDED_CLAIM in (meta.get("annotations") or {}),
        tuple(sorted(charges(obj.get("spec") or {}).items())),
    )


def charges(spec: Mapping[str, Any]) -> dict[str, int]:
    """DeviceClass → the devices a claim of SPEC is charged, as kube-apiserver's quota
    evaluator charges `<class>.deviceclass.resource.k8s.io/devices` (kubernetes/kubernetes
    pkg/quota/v1/evaluator/core/resource_claims.go): from its requests, allocated or not;
    `count` devices (default 1), `All` as 32; a firstAvailable request its largest
    alternative per class (the worst case). KEP-5004's generated claims are charged too."""
    out: dict[str, int] = {}
    for request in (spec.get("devices") or {}).get("requests") or []:
        if not isinstance(request, dict):
            continue
        ways = request.get("firstAvailable") or [request.get("exactly") or request]  # v1beta1: flat
        worst: dict[str, int] = {}
        for way in ways:
            if isinstance(way, dict) and way.get("deviceClassName"):
                name = str(way["deviceClassName"])
                worst[name] = max(worst.get(name, 0), _devices(way))
        for name, n in worst.items():
            out[name] = out.get(name, 0) + n
    return out


def _devices(request: Mapping[str, Any]) -> int:
    mode = request.get("allocationMode") or "ExactCount"
    if mode == "All":
        return ALL_DEVICES
    if mode != "ExactCount":
        return 0  # a mode this version does not know: not charged
    count = request.get("count")
    return count if isinstance(count, int) and not isinstance(count, bool) else 1
