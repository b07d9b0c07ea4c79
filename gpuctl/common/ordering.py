"""Orders people expect of names with numbers in them: gpu-2 before gpu-10. Pure."""

from __future__ import annotations

import functools
import re

from gpuctl.common.numbers import whole_number


@functools.lru_cache(maxsize=65536)
def natural_key(text: str) -> tuple[tuple[int, int, str], ...]:
    parts = [(p, whole_number(p)) for p in re.split(r"([0-9]+)", text) if p]
    return tuple((1, 0, p) if n is None else (0, n, "") for p, n in parts)
