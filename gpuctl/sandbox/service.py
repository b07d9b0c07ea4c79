"""Start, find, list and stop sandboxes: each a process of gpuctl.sim.sandbox running in the
background under a name (as kind names its clusters; "gpuctl" unless told), with its state
in a directory of its own, $XDG_STATE_HOME/gpuctl/sandbox/NAME/: sandbox.json (what
identifies its processes, then how to reach it once it serves), its kubeconfig, its log
and its Prometheus's data.

What is recorded is trusted only as far as it is checked: the directories must be this
user's and no one else's to write; files in them are written without following a symlink;
a process is signalled only while it is still the one recorded (gpuctl.runtime.processes).
A start or a stop holds the sandbox's lock throughout, so two of them take turns."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.common.k8s_names import dns1123_label
from gpuctl.runtime import extras, processes
from gpuctl.runtime.files import open_new, own_private_dir
from gpuctl.runtime.locks import holding
from gpuctl.runtime.processes import Identity

DEFAULT_NAME = "gpuctl"
START_TIMEOUT_S = 60.0  # kmock, the CRDs and Prometheus on a loaded 2-core machine
STOP_TIMEOUT_S = 20.0
STATE, LOCK, LOG, KUBECONFIG = "sandbox.json", "lock", "sandbox.log", "kubeconfig"
NAME_LENGTH = 40


@dataclass(frozen=True)
class Sandbox:
    name: str
    state_dir: str
    pid: int
    api: str
    kubeconfig: str
    prometheus: str | None
    nodes: str
    kueue: bool
    started: str

    def to_dict(self) -> dict:
        return {"simulator": True, **self.__dict__}


@dataclass(frozen=True)
class Record:
    """What a sandbox's state file says: its processes by role ("sandbox", "prometheus")
    and, once it serves, how to reach it."""

    processes: dict[str, Identity]
    sandbox: Sandbox | None

    def running(self) -> dict[str, Identity]:
        return {role: p for role, p in self.processes.items() if processes.is_running(p)}


def base_dir() -> Path:
    """$XDG_STATE_HOME/gpuctl/sandbox, or ~/.local/state/gpuctl/sandbox."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "gpuctl" / "sandbox"


def check_name(name: str) -> str:
    if not (dns1123_label(name) and len(name) <= NAME_LENGTH):
        raise UsageError(
            f"--name {name!r} is not a sandbox name: lower-case letters, digits and '-', "
            f"at most {NAME_LENGTH} characters, starting and ending with a letter or digit"
        )
    return name


def _private(folder: Path) -> Path:
    """FOLDER and the sandboxes' directory above it, created private or checked to be."""
    for path in (folder.parent, folder):
        try:
            own_private_dir(path)
        except OSError as e:
            raise GpuctlError(
                f"cannot keep the sandbox's state in {path}: {e.strerror or e}",
                hint="set XDG_STATE_HOME to a directory of your own, or remove what is there",
            ) from None
    return folder


def _read(folder: Path) -> Record | None:
    """The state file's record, None when there is none. One that cannot be trusted is an
    error naming the file and what is wrong: nothing is signalled on its word."""
    path = folder / STATE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise GpuctlError(
                f"{path}: a symbolic link, not a state gpuctl wrote; nothing was signalled",
                hint=f"check where it points, then remove {path}",
            ) from None
        raise GpuctlError(f"cannot read {path}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        text = f.read(1 << 20)
    try:
        data = json.loads(text)
        roles = data["processes"]
        found = {role: Identity.from_dict(p) for role, p in roles.items()}
        if "sandbox" not in found:
            raise ValueError("no sandbox process")
        sandbox = _sandbox(folder, data, found["sandbox"]) if data.get("ready") else None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise GpuctlError(
            f"{path}: not a sandbox's state ({e}); nothing was signalled",
            hint=f"check which processes it started, stop them, then remove {path}",
        ) from None
    return Record(found, sandbox)


def _sandbox(folder: Path, data: dict, process: Identity) -> Sandbox:
    fields = {k: data[k] for k in ("api", "kubeconfig", "prometheus", "nodes", "kueue", "started")}
    return Sandbox(name=folder.name, state_dir=str(folder), pid=process.pid, **fields)


def find(name: str = DEFAULT_NAME) -> Sandbox | None:
    """The sandbox of that name while it runs and serves, else None."""
    folder = base_dir() / check_name(name)
    if not folder.is_dir():
        return None
    record = _read(_private(folder))
    if record is None or record.sandbox is None or "sandbox" not in record.running():
        return None
    return record.sandbox


def listing() -> list[tuple[str, Sandbox | None, list[int]]]:
    """Every sandbox started and not stopped since: (name, the sandbox while it runs, PIDs of
    its processes still running when it does not: left by one that crashed)."""
    base = base_dir()
    if not base.is_dir():
        return []
    out: list[tuple[str, Sandbox | None, list[int]]] = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()):
        if not dns1123_label(folder.name):
            continue
        record = _read(_private(folder))
        if record is None:
            continue  # stopped (or never started): nothing of it is left
        running = record.running()
        if record.sandbox and "sandbox" in running:
            out.append((folder.name, record.sandbox, []))
        else:
            out.append((folder.name, None, sorted(p.pid for p in running.values())))
    return out


def start(name: str, nodes: str, kueue: bool, prometheus: str | None) -> Sandbox:
    """Start the sandbox NAME in the background and wait until it serves; one of that name
    already running is an error that names it."""
    for module in ("kmock", "celpy", "jsonschema"):
        if not extras.installed(module):
            raise GpuctlError(
                "the sandbox needs the Kubernetes API emulator, which is not installed",
                hint=extras.install_hint(module),
            )
    from gpuctl.sim import cluster

    cluster.parse_nodes(nodes)  # a bad --gpu-nodes is refused here, not in the background
    folder = _private(base_dir() / check_name(name))
    with holding(str(folder / LOCK), f"sandbox {name}", wait=START_TIMEOUT_S):
        record = _read(folder)
        if record is not None and record.sandbox and "sandbox" in record.running():
            raise GpuctlError(
                f"sandbox {name} is already running (pid {record.sandbox.pid}, "
                f"API {record.sandbox.api})",
                hint=f"gpuctl sandbox stop --name {name}, or start another with --name",
            )
        if record is not None:
            _end(record)  # what a crashed one left running
        (folder / STATE).unlink(missing_ok=True)
        shutil.rmtree(folder / "prometheus", ignore_errors=True)  # no series of an earlier one
        return _spawn(folder, nodes, kueue, prometheus)


def _spawn(folder: Path, nodes: str, kueue: bool, prometheus: str | None) -> Sandbox:
    command = [sys.executable, "-m", "gpuctl.sim.sandbox", "--state-dir", str(folder)]
    command += ["--nodes", nodes, "--prometheus", prometheus or ""]
    command += ["--kueue"] if kueue else []
    log = folder / LOG
    with os.fdopen(open_new(log), "w") as out:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own session: outlives this command and its Ctrl-C
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        record = _read(folder)
        if record is not None and record.sandbox and record.sandbox.pid == proc.pid:
            return record.sandbox
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            if record is not None:
                _end(record)
            raise GpuctlError(
                f"the sandbox exited at start (code {proc.returncode}): "
                + (" / ".join(tail) or "no output"),
                hint=f"its log: {log}",
            )
        time.sleep(0.1)
    own = processes.identify_child(proc.pid)  # this command's child: its PID is not reused
    record = _read(folder)
    if own is not None:
        _end(Record({**(record.processes if record else {}), "sandbox": own}, None))
    proc.wait(STOP_TIMEOUT_S)
    raise GpuctlError(
        f"the sandbox did not start within {START_TIMEOUT_S:.0f} s", hint=f"its log: {log}"
    )


def stop(name: str = DEFAULT_NAME) -> dict[str, int]:
    """Stop the sandbox NAME and everything it started, also after it crashed or hung (its
    objects are gone with it); the PIDs stopped by role, none when nothing ran."""
    folder = base_dir() / check_name(name)
    parts = (folder.parent.parent, folder.parent, folder)
    if all(p.is_dir() and not p.is_symlink() for p in parts[:2]) and not os.path.lexists(folder):
        return {}  # never made: nothing to stop, and nothing to create
    if not any(os.path.lexists(p) for p in parts):
        return {}
    _private(folder)  # what is there must be this user's and no one else's
    with holding(str(folder / LOCK), f"sandbox {name}", wait=START_TIMEOUT_S):
        record = _read(folder)
        if record is None:
            return {}
        stopped = _end(record)
        (folder / STATE).unlink(missing_ok=True)
        # what only a running sandbox uses: its data, and a kubeconfig naming a closed port
        shutil.rmtree(folder / "prometheus", ignore_errors=True)
        (folder / KUBECONFIG).unlink(missing_ok=True)
        return stopped


def _end(record: Record) -> dict[str, int]:
    """Stop the recorded processes that still run: the sandbox first (it stops its
    Prometheus itself), then what is left; a hung sandbox and its session are killed."""
    running = record.running()
    sandbox = running.get("sandbox")
    if sandbox is not None and processes.send(sandbox, signal.SIGTERM):
        if processes.wait_gone(list(running.values()), STOP_TIMEOUT_S):
            for member in [*processes.session_of(sandbox), sandbox]:
                processes.send(member, signal.SIGKILL)
    rest = [p for p in running.values() if processes.is_running(p)]
    for p in rest:
        processes.send(p, signal.SIGTERM)
    for p in processes.wait_gone(rest, STOP_TIMEOUT_S / 2):
        processes.send(p, signal.SIGKILL)
    left = processes.wait_gone(list(running.values()), 5.0)
    if left:
        raise GpuctlError(
            "could not stop the sandbox's processes " + ", ".join(str(p.pid) for p in left)
        )
    return {role: p.pid for role, p in running.items()}
