"""DRA's device selectors: CEL expressions over `device` (its `driver`, `attributes` and
`capacity` by domain, `allowMultipleAllocations`), with the Kubernetes CEL library
functions selectors use — `quantity()` and its `isGreaterThan`, `isLessThan`, `compareTo`,
`asInteger`, `isInteger`, `sign`, `add`, `sub`; `semver()` and its `isGreaterThan`,
`isLessThan`, `compareTo`, `major`, `minor`, `patch` — beside cel-python's standard CEL.
kubernetes/api resource/v1/types.go (CELDeviceSelector) defines the environment: a domain a
device lacks is an empty map, a missing attribute an evaluation error; version attributes
are semvers and capacities quantities.

Expressions are compiled once (`selector`: one, or several that must all select a device),
and evaluated once per distinct value of what they read: an expression names the attributes
and capacities it reads (`device.attributes['gpu.nvidia.com'].productName`), so two devices
that differ only in others (their uuid, their PCI address) get the same answer without a
second evaluation; one that reads a domain or map whole is evaluated on every device. Pure: cel-python is imported inside functions (`gpuctl --help` stays
light)."""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache, total_ordering
from typing import Any, Protocol

from gpuctl.common import quantity


class SelectorError(Exception):
    """An expression that does not compile, or that fails on a device (a missing attribute
    read without a check, a wrong type): the scheduler allocates no device by it."""


class CelDevice(Protocol):
    @property
    def driver(self) -> str: ...
    @property
    def attributes(self) -> Mapping[str, Any]: ...  # domain/name -> str, int, bool, Version
    @property
    def capacity(self) -> Mapping[str, Fraction]: ...  # domain/name -> quantity
    @property
    def shared(self) -> bool: ...  # allowMultipleAllocations


@total_ordering
@dataclass(frozen=True)
class Quantity:
    value: Fraction

    def __lt__(self, other: object) -> bool:
        return bool(self.value < _of(other, Quantity).value)


@total_ordering
@dataclass(frozen=True)
class Version:
    """A semantic version (DRA's `version` attributes; semver 2.0.0 precedence)."""

    text: str
    parts: tuple[int, int, int] = field(compare=False, default=(0, 0, 0))
    pre: tuple[Any, ...] = field(compare=False, default=())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._order() == other._order()

    def __hash__(self) -> int:
        return hash(self._order())

    def __lt__(self, other: object) -> bool:
        return bool(self._order() < _of(other, Version)._order())

    def _order(self) -> tuple[Any, ...]:
        # a release ranks above its pre-releases; numeric identifiers below alphanumeric ones
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.parts, not self.pre, pre)


_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)


@lru_cache(maxsize=4096)  # a cluster's devices repeat a few driver and CUDA versions
def version(text: str) -> Version | None:
    """TEXT as a semantic version, or None if it is not one."""
    m = _SEMVER.fullmatch(text)
    if m is None:
        return None
    pre = tuple(int(p) if p.isdigit() else p for p in (m.group(4) or "").split(".") if p)
    major, minor, patch = (int(g) for g in m.groups()[:3])
    return Version(text, (major, minor, patch), pre)


def _of(value: object, kind: type) -> Any:
    if not isinstance(value, kind):
        raise TypeError(f"no such overload: {kind.__name__} and {type(value).__name__}")
    return value


@dataclass(frozen=True)
class Reads:
    """What an expression reads of a device: the attributes and capacities it names
    (domain/name), or everything (None: it reads a domain or a map whole)."""

    attributes: tuple[str, ...]
    capacity: tuple[str, ...]

    def key(self, device: CelDevice) -> Hashable:
        """What DEVICE shows of itself to the expression: devices that show the same get
        the same answer."""
        shown = tuple(map(device.attributes.get, self.attributes))
        if self.capacity:
            shown += tuple(map(device.capacity.get, self.capacity))
        return (device.driver, device.shared, shown)

    def __or__(self, other: Reads) -> Reads:
        return Reads(
            tuple(dict.fromkeys(self.attributes + other.attributes)),
            tuple(dict.fromkeys(self.capacity + other.capacity)),
        )


@dataclass(frozen=True)
class Selector:
    """Expressions compiled once, all of which must select a device (a DeviceClass's
    selectors, then a request's), each answer kept for what the device shows of itself."""

    expressions: tuple[str, ...]
    programs: tuple[Any, ...]  # cel-python's Runners
    reads: Reads | None  # None: anything
    answers: dict[Hashable, bool] = field(default_factory=dict, compare=False)

    def matches(self, device: CelDevice) -> bool:
        """Whether DEVICE is selected; SelectorError when an expression fails on it."""
        key = self.reads.key(device) if self.reads is not None else None
        if key is not None:
            found = self.answers.get(key)
            if found is not None:
                return found
        activation = {"device": _activation(device)}
        answer = all(_evaluate(p, activation) for p in self.programs)
        if key is not None:
            self.answers[key] = answer
        return answer


def _evaluate(program: Any, activation: dict[str, Any]) -> bool:
    from celpy.celtypes import BoolType

    try:
        result = program.evaluate(activation)
    except Exception as e:  # cel-python reports evaluation errors as values or raises
        raise SelectorError(_reason(e)) from None
    if not isinstance(result, BoolType):
        raise SelectorError(_reason(result))
    return bool(result)


def _reason(failure: object) -> str:
    args = getattr(failure, "args", None)
    text = str(args[0]) if args else str(failure)
    return " ".join(text.split(" (in activation")[0].split())[:200]


# device.attributes['domain'].name, device.capacity["domain"].name
_NAMED = re.compile(r"""device\.(attributes|capacity)\[\s*(['"])([^'"]+)\2\s*\]\.([A-Za-z_]\w*)""")
_ANY = re.compile(r"\b(?:attributes|capacity)\b")


def _reads(expression: str) -> Reads | None:
    """What EXPRESSION reads; None when it reads more than named fields (a domain or map
    whole: `in`, `size()`, macros, a map passed on)."""
    named = _NAMED.findall(expression)
    if len(named) != len(_ANY.findall(expression)):
        return None
    if any(name in ("exists", "all", "exists_one", "map", "filter", "size") for *_, name in named):
        return None
    attributes = tuple(dict.fromkeys(f"{d}/{n}" for kind, _, d, n in named if kind == "attributes"))
    capacity = tuple(dict.fromkeys(f"{d}/{n}" for kind, _, d, n in named if kind == "capacity"))
    return Reads(attributes, capacity)


@lru_cache(maxsize=1024)
def selector(*expressions: str) -> Selector:
    """EXPRESSIONS compiled (once), all to select; SelectorError when one does not compile."""
    import celpy

    env = celpy.Environment(runner_class=celpy.InterpretedRunner)
    programs = []
    reads: Reads | None = Reads((), ())
    for expression in expressions:
        try:
            programs.append(env.program(env.compile(expression), functions=_FUNCTIONS))
        except Exception as e:
            raise SelectorError(f"does not compile: {_reason(e)}") from None
        more = _reads(expression)
        reads = reads | more if reads is not None and more is not None else None
    return Selector(tuple(expressions), tuple(programs), reads)


def _activation(device: CelDevice) -> Any:
    from celpy import celtypes

    def domains(values: Mapping[str, Any], convert: Any) -> Any:
        by: dict[str, dict[Any, Any]] = {}
        for name, value in values.items():
            domain, _, short = name.rpartition("/")
            by.setdefault(domain, {})[celtypes.StringType(short)] = convert(value)
        return _domains_class()(
            {celtypes.StringType(d): celtypes.MapType(m) for d, m in by.items()}
        )

    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(device.driver),
            celtypes.StringType("attributes"): domains(device.attributes, _attribute),
            celtypes.StringType("capacity"): domains(device.capacity, Quantity),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(device.shared),
        }
    )


def _attribute(value: Any) -> Any:
    from celpy import celtypes

    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, Version):
        return value
    return celtypes.StringType(value)


@lru_cache(maxsize=1)
def _domains_class() -> type:
    from celpy import celtypes

    class Domains(celtypes.MapType):
        """A device's attributes or capacities by domain: a domain it lacks is empty."""

        def __missing__(self, key: Any) -> Any:
            return celtypes.MapType()

    return Domains


def _new_quantity(text: Any) -> Quantity:
    value = quantity.parse(str(text))
    if value is None:
        raise SelectorError(f"quantity({str(text)!r}): not a quantity")
    return Quantity(value)


def _new_version(text: Any) -> Version:
    found = version(str(text))
    if found is None:
        raise SelectorError(f"semver({str(text)!r}): not a semantic version")
    return found


def _bool(value: bool) -> Any:
    from celpy.celtypes import BoolType

    return BoolType(value)


def _int(value: int) -> Any:
    from celpy.celtypes import IntType

    return IntType(value)


def _compare(a: Any, b: Any) -> int:
    if type(a) is not type(b) or not isinstance(a, (Quantity, Version)):
        raise TypeError(f"no such overload: compareTo({type(a).__name__}, {type(b).__name__})")
    return int(a > b) - int(a < b)


def _number(q: Any) -> Fraction:
    return Fraction(_of(q, Quantity).value)


_FUNCTIONS: dict[str, Any] = {
    "quantity": _new_quantity,
    "isQuantity": lambda t: _bool(quantity.parse(str(t)) is not None),
    "semver": _new_version,
    "isSemver": lambda t: _bool(version(str(t)) is not None),
    "compareTo": lambda a, b: _int(_compare(a, b)),
    "isGreaterThan": lambda a, b: _bool(_compare(a, b) > 0),
    "isLessThan": lambda a, b: _bool(_compare(a, b) < 0),
    "asInteger": lambda q: _int(int(_number(q))),
    "isInteger": lambda q: _bool(_number(q).denominator == 1),
    "asApproximateFloat": lambda q: float(_number(q)),
    "sign": lambda q: _int((_number(q) > 0) - (_number(q) < 0)),
    "add": lambda a, b: Quantity(_number(a) + (_number(b) if isinstance(b, Quantity) else b)),
    "sub": lambda a, b: Quantity(_number(a) - (_number(b) if isinstance(b, Quantity) else b)),
    "major": lambda v: _int(_of(v, Version).parts[0]),
    "minor": lambda v: _int(_of(v, Version).parts[1]),
    "patch": lambda v: _int(_of(v, Version).parts[2]),
}
