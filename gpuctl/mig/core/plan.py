"""What `gpuctl mig plan` is asked for: the GPUs (``--gpu``/``--gpus``) and the demand
(``--demand``), read into what the planner (gpuctl.gpus.mig_demand) takes."""

from __future__ import annotations

import re

from gpuctl.common.errors import UsageError
from gpuctl.common.numbers import whole_number
from gpuctl.gpus.geometry import find_model
from gpuctl.gpus.mig_demand import Fleet
from gpuctl.gpus.mig_layout import parse_layout_text, parse_profile_name

_FLEET_PART = re.compile(r"^(?:([0-9]+)\s*[x×*]\s*)?(.+)\Z", re.DOTALL)
_RESOURCE_PREFIX = "nvidia.com/mig-"
MAX_DEMAND = 100_000  # slices of one profile --demand may ask for


def parse_fleet(text: str | None) -> list[Fleet]:
    """``8xH100-80GB``, ``H100-80GB`` (unbounded) or ``4xH100-80GB,2xA100-80GB``."""
    out: dict[str, Fleet] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        m = _FLEET_PART.match(part)
        assert m is not None  # its (.+) matches any part that is not empty
        count = whole_number(m.group(1)) if m.group(1) else None
        if m.group(1) and count is None:
            raise UsageError(f"{part[:40]!r}…: the GPU count is too large")
        if count == 0:
            raise UsageError(f"{part!r}: a GPU count must be at least 1")
        model = find_model(m.group(2).strip())
        if model.short_name in out:
            raise UsageError(f"{model.short_name} is given twice in {text!r}")
        out[model.short_name] = Fleet(model, count)
    if not out:
        raise UsageError("no GPUs given: use e.g. --gpu H100-80GB or --gpus 8xH100-80GB")
    return list(out.values())


def parse_demand(text: str | None) -> dict[str, int]:
    """``1g.10gb=9,3g.40gb=3``; Kubernetes resource names (``nvidia.com/mig-1g.10gb``) too.
    Each a MIG profile name, at most MAX_DEMAND of each."""
    out: dict[str, int] = {}
    for name, n in parse_layout_text(text).items():
        if name.startswith(_RESOURCE_PREFIX):
            # The device plugin writes the + of an attribute as a dot: 1g.10gb.me, 1g.24gb.me.all
            name = re.sub(r"^(\d+g\.\d+gb)\.", r"\1+", name[len(_RESOURCE_PREFIX) :])
        why = parse_profile_name(name)
        if isinstance(why, str):
            raise UsageError(f"--demand: {name!r} is not a MIG profile name (like 1g.10gb): {why}")
        out[name] = out.get(name, 0) + n
        if out[name] > MAX_DEMAND:
            raise UsageError(f"--demand: {out[name]} of {name} is more than {MAX_DEMAND}")
    return {k: v for k, v in out.items() if v}
