"""Whole numbers typed by a user (options, spec values, label values), read without surprises."""

from __future__ import annotations

import re

MAX_DIGITS = 100  # far above every limit gpuctl checks; int() refuses more than 4300 digits

_WHOLE = re.compile(rf"0*([0-9]{{1,{MAX_DIGITS}}})\Z")


def whole_number(text: str) -> int | None:
    """`text` as a whole number ≥ 0, or None: ASCII digits only, at most MAX_DIGITS of them
    after leading zeros. str.isdigit() and `\\d` also pass '²' or '٣', which int() refuses
    or a Kubernetes or Prometheus API would."""
    m = _WHOLE.match(text)
    return int(m.group(1)) if m else None
