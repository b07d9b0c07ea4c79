"""Kubernetes resource quantities (`500m`, `64Gi`, `1e3`, `2`) read as the API server reads
them, to an exact value. Pure.

The grammar is apimachinery's (resource.Quantity):
    quantity ::= [+-] number [suffix]
    number   ::= digits | digits "." digits | digits "." | "." digits   (ASCII 0-9 only)
    suffix   ::= n u m k M G T P E | Ki Mi Gi Ti Pi Ei | e or E, [+-], digits (an int32)
Like the API server, the value is rounded up (away from zero) to a whole nano and binary
quantities are capped at 2**63 - 1. Unlike it:
- decimal quantities are capped there too, so that `1e2000000000` is no number of unbounded size;
- more than MAX_DIGITS digits (leading zeros and the fraction's trailing zeros aside) are refused;
- a sign, `.` or suffix without a digit (`+`, `.`, `Ki`), which its scanner reads as 0, is refused.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from gpuctl.common.numbers import MAX_DIGITS

MAX = 2**63 - 1
_NANOS = 10**9
_INT32 = 2**31
# suffix → (power of ten, power of two)
_SCALE = {
    "n": (-9, 0),
    "u": (-6, 0),
    "m": (-3, 0),
    "": (0, 0),
    "k": (3, 0),
    "M": (6, 0),
    "G": (9, 0),
    "T": (12, 0),
    "P": (15, 0),
    "E": (18, 0),
    "Ki": (0, 10),
    "Mi": (0, 20),
    "Gi": (0, 30),
    "Ti": (0, 40),
    "Pi": (0, 50),
    "Ei": (0, 60),
}
# a mantissa of MAX_DIGITS digits times 10**_TINY (times 2**60 at most) is below a nano, so
# rounds up to one; times 10**_HUGE it is above MAX: clamping the exponent there is exact
_TINY, _HUGE = -(MAX_DIGITS + 30), 20
# The grammar as a whole-text pattern that Python's `re` and ECMA-262 read alike (the job
# spec's JSON Schema states it too): ASCII classes, no flags.
GRAMMAR = (
    r"([+-]?)(?=\.?[0-9])([0-9]*)(?:\.([0-9]*))?"
    r"(?:[eE]([+-]?)([0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)
# ... of one that is not negative: no '-', or a '-' before a zero ("-0", "-0.0Gi")
NOT_NEGATIVE = GRAMMAR.replace("([+-]?)", r"(\+?|-(?=0*(?:\.0*)?(?![0-9.])))", 1)
# ... of one above zero: a digit other than 0 before any exponent or suffix (however small,
# the value rounds up to a nano)
POSITIVE = GRAMMAR.replace("([+-]?)", r"(\+?)(?=[0-9.]*[1-9])", 1)
_QUANTITY = re.compile(GRAMMAR + r"\Z")


# A cluster's pods repeat a handful of quantities ("1", "500m", "16Gi"): at 50,000 pods the
# cache makes reading them a dict lookup instead of Fraction arithmetic (bench_governance).
@lru_cache(maxsize=4096)
def parse(text: str) -> Fraction | None:
    """The exact value of a quantity, or None if `text` is not one (no surrounding spaces)."""
    m = _QUANTITY.match(text)
    if not m:
        return None
    sign, whole, fraction, exponent_sign, exponent, suffix = m.groups()
    whole, fraction = whole.lstrip("0"), (fraction or "").rstrip("0")
    if len(whole) + len(fraction) > MAX_DIGITS:
        return None
    ten, two = _SCALE[suffix or ""]
    if exponent is not None:
        exponent = exponent.lstrip("0") or "0"
        ten = int(exponent_sign + exponent) if len(exponent) <= 10 else _INT32
        if not -_INT32 <= ten < _INT32:  # the API server reads the exponent as an int32
            return None
    mantissa = int(whole + fraction or "0")
    if mantissa == 0:
        return Fraction(0)
    ten = min(max(ten - len(fraction), _TINY), _HUGE)
    nanos = math.ceil(mantissa * 2**two * Fraction(10) ** ten * _NANOS)
    value = Fraction(min(nanos, MAX * _NANOS), _NANOS)
    return -value if sign == "-" else value


def from_api(value: object) -> Fraction | None:
    """A quantity as the API returns it, or None: the API server's JSON reader ignores the
    spaces around one, and an object written by hand may hold a number."""
    return parse(str(value).strip())


def count(value: object) -> int:
    """An extended resource's count (GPUs, MIG devices) as the API returns it: a whole
    number ≥ 0. Anything else counts as none; the API server stores no other."""
    amount = from_api(value)
    return int(amount) if amount is not None and amount >= 0 and amount.denominator == 1 else 0


def rounded_down(value: object) -> int | None:
    """A quantity as the API returns it, rounded down to a whole number; None if not one."""
    amount = from_api(value)
    return None if amount is None else math.floor(amount)
