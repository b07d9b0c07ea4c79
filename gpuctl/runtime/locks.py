"""A lock one run holds for the whole of a change (a `mig configure` of a node), so that a
second run cannot interleave its steps: the second is refused at once, told who holds it."""

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
def holding(path: str, what: str) -> Iterator[None]:
    """Hold the lock at PATH for the block, or raise Held naming its holder (its pid and
    command, as it wrote them into the lock file). The kernel releases it when the holder
    ends, however it ends: a crashed run leaves no stale lock."""
    try:
        make_private_dir(os.path.dirname(os.path.abspath(path)))
        fd = open_lock(path)
    except OSError as e:
        raise GpuctlError(f"cannot open the lock {path}: {e.strerror or e}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another run"
            raise Held(
                f"{what} is being changed by another run ({holder})",
                hint=f"wait for it to finish, then run this again (lock: {path})",
            ) from None
        os.ftruncate(fd, 0)
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        command = " ".join(["gpuctl", *sys.argv[1:]])[:200]
        os.pwrite(fd, f"pid {os.getpid()}, since {started}: {command}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
