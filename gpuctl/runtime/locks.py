"""A lock one run holds for the whole of a change (a `mig configure` of a node, a sandbox
started or stopped), so that a second run cannot interleave its steps: the second is
refused, told who holds it, at once or after waiting its turn for a while."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator

from gpuctl.common.errors import GpuctlError
from gpuctl.runtime.files import make_private_dir, open_lock


class Held(GpuctlError):
    """Another run holds the lock."""


@contextlib.contextmanager
def holding(path: str, what: str, wait: float = 0.0) -> Iterator[None]:
    """Hold the lock at PATH for the block, or raise Held naming its holder (its pid and
    command, as it wrote them into the lock file) when it is still held after WAIT seconds.
    The kernel releases it when the holder ends, however it ends: a crashed run leaves no
    stale lock."""
    try:
        make_private_dir(os.path.dirname(os.path.abspath(path)))
        fd = open_lock(path)
    except OSError as e:
        raise GpuctlError(f"cannot open the lock {path}: {e.strerror or e}") from None
    try:
        deadline = time.monotonic() + wait
        while not _take(fd):
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another run"
                raise Held(
                    f"{what} is being changed by another run ({holder})",
                    hint=f"wait for it to finish, then run this again (lock: {path})",
                )
            time.sleep(0.1)
        os.ftruncate(fd, 0)
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        command = " ".join(["gpuctl", *sys.argv[1:]])[:200]
        os.pwrite(fd, f"pid {os.getpid()}, since {started}: {command}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _take(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
