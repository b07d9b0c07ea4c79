"""Processes gpuctl started in the background, known by what identifies them rather than by
a number that the system reuses: the PID with the process's start time (clock ticks after
boot, field 22 of /proc/PID/stat) and its command line, and the process group and session
it runs in. A process is signalled only while it is still the one recorded, through a pidfd
opened before the check, so that a PID reused after the check cannot be hit either. PIDs
of 1 or less (0 and negatives name process groups to kill(2), 1 is init) are never
signalled, nor is gpuctl's own process group. Linux: reads /proc."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

PROC = "/proc"


@dataclass(frozen=True)
class Identity:
    pid: int
    start: int  # clock ticks after boot when it started
    cmdline: tuple[str, ...]
    group: int  # its process group
    session: int

    def to_dict(self) -> dict:
        return {**asdict(self), "cmdline": list(self.cmdline)}

    @classmethod
    def from_dict(cls, data: object) -> Identity:
        """An identity as recorded; ValueError names what is wrong (a PID of 1 or less
        is refused: kill(2) reads 0 and negatives as process groups)."""
        if not isinstance(data, dict):
            raise ValueError("not an object")
        numbers = {k: data.get(k) for k in ("pid", "start", "group", "session")}
        for key, value in numbers.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{key} {value!r} is not a number")
            if key != "start" and value <= 1:
                raise ValueError(f"{key} {value} is not a process gpuctl started")
        cmdline = data.get("cmdline")
        if not isinstance(cmdline, list) or not all(isinstance(a, str) for a in cmdline):
            raise ValueError("cmdline is not a list of strings")
        return cls(
            int(numbers["pid"] or 0),
            int(numbers["start"] or 0),
            tuple(cmdline),
            int(numbers["group"] or 0),
            int(numbers["session"] or 0),
        )


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(start time, process group, session) of PID, None when there is no such process."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ')'
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[19]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def user_of(pid: int) -> str | None:
    """Who runs process PID on this machine: its user's name, else its uid; None: gone."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def identify(pid: int) -> Identity | None:
    """What identifies the running process PID, None when none runs (or it is a zombie
    with no command line left)."""
    if pid <= 1:
        return None
    stat = _stat(pid)
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if stat is None or not raw:
        return None
    cmdline = tuple(a.decode(errors="surrogateescape") for a in raw.rstrip(b"\0").split(b"\0"))
    return Identity(pid, stat[0], cmdline, stat[1], stat[2])


def identify_child(pid: int, timeout: float = 2.0) -> Identity | None:
    """What identifies a child this process just started: its command line shows only once
    the kernel has finished exec(2), a moment after subprocess.Popen returns."""
    deadline = time.monotonic() + timeout
    while (found := identify(pid)) is None and time.monotonic() < deadline:
        time.sleep(0.005)
    return found


def is_running(recorded: Identity) -> bool:
    """Whether the process recorded still runs (the same start time and command line)."""
    now = identify(recorded.pid)
    return now is not None and (now.start, now.cmdline) == (recorded.start, recorded.cmdline)


@contextlib.contextmanager
def _pinned(pid: int) -> Iterator[int | None]:
    """A pidfd on PID (None where the kernel has none): while it is open, a signal sent
    through it reaches that process or none, never one that reused the number."""
    try:
        fd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        yield -1
        return
    except (AttributeError, OSError):
        fd = None
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def send(recorded: Identity, sig: int) -> bool:
    """Send SIG to the recorded process if it is still that process; False when it is gone
    (or its PID now belongs to another process, which is left alone)."""
    if recorded.pid <= 1 or recorded.group == os.getpgrp():
        return False
    with _pinned(recorded.pid) as fd:
        if fd == -1 or not is_running(recorded):
            return False
        try:
            if fd is None:
                os.kill(recorded.pid, sig)
            else:
                signal.pidfd_send_signal(fd, sig)
        except ProcessLookupError:
            return False
    return True


def session_of(leader: Identity) -> list[Identity]:
    """The processes in the session LEADER created, while LEADER is still that process
    (then no other session can have its number); none otherwise."""
    if not is_running(leader) or leader.session != leader.pid:
        return []
    members = []
    for entry in os.listdir(PROC):
        if entry.isdigit() and int(entry) != leader.pid:
            found = identify(int(entry))
            if found is not None and found.session == leader.pid:
                members.append(found)
    return members


def wait_gone(recorded: list[Identity], timeout: float) -> list[Identity]:
    """Wait up to TIMEOUT seconds for the recorded processes to end; those still running."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in recorded if is_running(p)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)
