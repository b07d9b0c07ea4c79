"""Keys pressed at the terminal while a live view waits between frames (`gpuctl top`)."""

from __future__ import annotations

import os
import sys
import time


class KeyReader:
    """Reads keys from stdin while waiting between frames, the terminal in cbreak mode (its
    settings restored on leaving); without a terminal it only waits."""

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
