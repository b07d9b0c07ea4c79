"""The node view's live loop: an NVML sample every `delay` seconds, handed to the caller's
`show` with the view's state, redrawn at once when a key changes it (gpuctl.common.keys:
help, sort, filter), until `q` (Ctrl-C ends it as any command)."""

from __future__ import annotations

import time
from collections.abc import Callable

from gpuctl.common.keys import View
from gpuctl.gpus.sample import NodeSample
from gpuctl.runtime.terminal import KeyReader
from gpuctl.top.node.core.keys import KEYS


def watch(
    nvml, delay: float, show: Callable[[NodeSample, View], None], view: View | None = None
) -> None:
    state: View | None = view or View()
    with KeyReader() as keys:
        sample = nvml.sample()
        deadline = time.monotonic() + delay
        while state is not None:
            show(sample, state)
            for key in keys.within(max(deadline - time.monotonic(), 0.0)):
                state = KEYS.press(state, key) if state is not None else None
            if time.monotonic() >= deadline:
                sample = nvml.sample()
                deadline = time.monotonic() + delay
