"""The node view's live loop: an NVML sample every `delay` seconds, handed to the caller's
`show`, until `q` is pressed on the terminal (Ctrl-C ends it as any command)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from gpuctl.gpus.sample import NodeSample


def watch(nvml, delay: float, show: Callable[[NodeSample], None]) -> None:
    with _Keys() as keys:
        show(nvml.sample())
        while not keys.quit_within(delay):
            show(nvml.sample())


class _Keys:
    """Watches stdin for `q` while waiting between frames (terminal in cbreak mode)."""

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

    def quit_within(self, seconds: float) -> bool:
        if self._fd is None:
            time.sleep(seconds)
            return False
        import select

        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._fd], [], [], left)
            if ready and os.read(self._fd, 1) in (b"q", b"Q"):
                return True
        return False
