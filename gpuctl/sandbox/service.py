"""Start, find and stop the sandbox process (gpuctl.sim.sandbox), which runs in the
background with its state in one directory: sandbox.json (written once it serves), its
kubeconfig, its Prometheus data and its log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gpuctl.common.errors import GpuctlError
from gpuctl.runtime import extras

START_TIMEOUT_S = 60.0  # kmock, the CRDs and Prometheus on a loaded 2-core machine
STOP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Sandbox:
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


def state_dir() -> Path:
    """$XDG_STATE_HOME/gpuctl/sandbox, or ~/.local/state/gpuctl/sandbox."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "gpuctl" / "sandbox"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find(folder: Path | None = None) -> Sandbox | None:
    """The running sandbox, or None (a state file left by one that died is removed)."""
    folder = folder or state_dir()
    path = folder / "sandbox.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    keys = Sandbox.__dataclass_fields__
    sandbox = Sandbox(state_dir=str(folder), **{k: data.get(k) for k in keys if k != "state_dir"})
    if not isinstance(sandbox.pid, int) or not _alive(sandbox.pid):
        path.unlink(missing_ok=True)
        return None
    return sandbox


def start(nodes: str, kueue: bool, prometheus: str | None, folder: Path | None = None) -> Sandbox:
    """Start the sandbox in the background and wait until it serves; one already running
    is an error that names it."""
    for module in ("kmock", "celpy", "jsonschema"):
        if not extras.installed(module):
            raise GpuctlError(
                "the sandbox needs the Kubernetes API emulator, which is not installed",
                hint=extras.install_hint(module),
            )
    from gpuctl.sim import cluster

    cluster.parse_nodes(nodes)  # a bad --gpu-nodes is refused here, not in the background
    folder = folder or state_dir()
    running = find(folder)
    if running is not None:
        raise GpuctlError(
            f"a sandbox is already running (pid {running.pid}, API {running.api})",
            hint="gpuctl sandbox stop, then start again",
        )
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "gpuctl.sim.sandbox", "--state-dir", str(folder)]
    command += ["--nodes", nodes, "--prometheus", prometheus or ""]
    command += ["--kueue"] if kueue else []
    log = folder / "sandbox.log"
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this command and its terminal's Ctrl-C
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = find(folder)
        if found is not None and found.pid == proc.pid:
            return found
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise GpuctlError(
                f"the sandbox exited at start (code {proc.returncode}): "
                + (" / ".join(tail) or "no output"),
                hint=f"its log: {log}",
            )
        time.sleep(0.1)
    proc.terminate()
    raise GpuctlError(
        f"the sandbox did not start within {START_TIMEOUT_S:.0f} s", hint=f"its log: {log}"
    )


def stop(folder: Path | None = None) -> Sandbox | None:
    """Stop the running sandbox (its objects are gone with it); None when none runs."""
    sandbox = find(folder)
    if sandbox is None:
        return None
    os.kill(sandbox.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and _alive(sandbox.pid):
        time.sleep(0.1)
    if _alive(sandbox.pid):
        os.kill(sandbox.pid, signal.SIGKILL)
    Path(sandbox.state_dir, "sandbox.json").unlink(missing_ok=True)
    return sandbox
