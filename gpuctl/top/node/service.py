"""The node view's live loop: an NVML sample every `delay` seconds, handed to the caller's
`show` with the view's state, redrawn at once when a key changes it (gpuctl.top.node.core.keys:
help, sort, filter), until `q` (Ctrl-C ends it as any command)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from gpuctl.gpus.sample import NodeSample
from gpuctl.top.node.core.keys import View, press


def watch(
    nvml, delay: float, show: Callable[[NodeSample, View], None], view: View | None = None
) -> None:
    state: View | None = view or View()
    with _Keys() as keys:
        sample = nvml.sample()
        deadline = time.monotonic() + delay
        while state is not None:
            show(sample, state)
            for key in keys.within(max(deadline - time.monotonic(), 0.0)):
                state = press(state, key) if state is not None else None
            if time.monotonic() >= deadline:
                sample = nvml.sample()
                deadline = time.monotonic() + delay


class _Keys:
    """Reads keys from stdin while waiting between frames (terminal in cbreak mode)."""

    def __init__(self):
        self._fd = sys.stdin.fileno() if sys.stdin.isatty() else None
        self._saved = None

    def __enter__(self):
        if self._fd is not None:
            import termios
            import tty

            self._saved = termios.tcgetattr(self._fd)
            tty.setcbreak(self._fd)
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)

    def within(self, seconds: float) -> str:
        """The keys pressed within SECONDS, returned as soon as there are some."""
        if self._fd is None:
            time.sleep(seconds)
            return ""
        import select

        ready, _, _ = select.select([self._fd], [], [], seconds)
        return os.read(self._fd, 64).decode(errors="replace") if ready else ""
