"""`gpuctl sandbox` signals only the processes it started, as the records say who they are
(PID with start time and command line, in the session it created), keeps its state where
no one else can plant anything, takes turns between concurrent starts, and stops what a
crashed sandbox left running. gpuctl runs as a subprocess in a session of its own, so that
a gpuctl that signalled a process group could not hit the test; every process a test
starts is killed at its deadline and at the end."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from gpuctl.runtime import processes
from tests.standins.prometheus import need

pytestmark = pytest.mark.integration
pytest.importorskip("kmock")

DEADLINE_S = 90


@pytest.fixture
def env(tmp_path):
    """gpuctl's environment: its state under tmp_path; at the end every process started
    with that state directory is killed."""
    state = tmp_path / "state"
    yield {**os.environ, "XDG_STATE_HOME": str(state), "COLUMNS": "200"}
    for pid in _started_under(state):
        os.kill(pid, signal.SIGKILL)


def _started_under(state: Path) -> list[int]:
    """PIDs of processes whose command line names the state directory (sandboxes and their
    Prometheus)."""
    out = []
    for entry in os.listdir("/proc"):
        found = processes.identify(int(entry)) if entry.isdigit() else None
        if found is not None and any(str(state) in a for a in found.cmdline):
            out.append(found.pid)
    return out


def gpuctl(env: dict, *args: str, timeout: float = DEADLINE_S) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuctl", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        raise AssertionError(f"gpuctl {' '.join(args)} ran past {timeout} s") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture
def victim():
    """A process that is not the sandbox's, in a process group of its own."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait(10)


def _folder(env: dict, name: str = "gpuctl") -> Path:
    return Path(env["XDG_STATE_HOME"], "gpuctl", "sandbox", name)


def _plant_state(env: dict, record: dict, name: str = "gpuctl") -> Path:
    folder = _folder(env, name)
    folder.mkdir(parents=True, mode=0o700)
    folder.parent.chmod(0o700)
    (folder / "sandbox.json").write_text(json.dumps(record))
    return folder


def _sandbox_record(pid: int, start: int, group: int, session: int) -> dict:
    cmdline = [sys.executable, "-m", "gpuctl.sim.sandbox", "--state-dir", "x"]
    process = {"pid": pid, "start": start, "cmdline": cmdline, "group": group, "session": session}
    reach = {"api": "http://127.0.0.1:1", "kubeconfig": "k", "prometheus": None, "nodes": "n"}
    return {
        "ready": True,
        "processes": {"sandbox": process},
        **reach,
        "kueue": False,
        "started": "",
    }


def test_a_stale_state_whose_pid_was_reused_signals_nothing(env, victim):
    """The state of a sandbox long gone names a PID another process has since: stop leaves
    that process alone (its start time is not the one recorded) and clears the state."""
    now = processes.identify_child(victim.pid)
    assert now is not None
    record = _sandbox_record(victim.pid, now.start - 1, now.group, now.session)
    record["processes"]["sandbox"]["cmdline"] = list(now.cmdline)
    folder = _plant_state(env, record)
    r = gpuctl(env, "sandbox", "status")
    assert r.returncode == 1 and "no sandbox gpuctl is running" in r.stderr
    r = gpuctl(env, "sandbox", "stop")
    assert r.returncode == 0, r.stderr
    assert "no sandbox gpuctl was running" in r.stdout
    time.sleep(0.3)
    assert victim.poll() is None, "stop signalled a process that was not the sandbox's"
    assert not (folder / "sandbox.json").exists()


@pytest.mark.parametrize("pid", [0, -1, 1, "group"])
def test_pids_that_name_groups_or_init_are_refused(env, victim, pid):
    """kill(2) reads 0 as the caller's own group and -N as group N: a state naming them is
    not trusted; nothing is signalled and the error names the file."""
    if pid == "group":
        pid = -victim.pid  # the victim leads a group of its own
    record = _sandbox_record(pid, 1, pid, pid)
    folder = _plant_state(env, record)
    for command in ("stop", "status", "start"):
        r = gpuctl(env, "sandbox", command)
        assert r.returncode == 1, (command, r.returncode, r.stderr)
        assert f"{folder / 'sandbox.json'}: not a sandbox's state" in r.stderr
        assert "nothing was signalled" in r.stderr and "Traceback" not in r.stderr
    assert victim.poll() is None


def _planted(folder: Path, name: str, elsewhere: Path) -> Path:
    """A symlink at FOLDER/NAME to a file of someone else's."""
    precious = elsewhere / f"{name.replace('/', '-')}.precious"
    precious.write_text("not gpuctl's\n")
    (folder / name).symlink_to(precious)
    return precious


def test_symlinks_planted_in_the_state_are_not_followed(env, tmp_path):
    folder = _folder(env)
    (folder / "prometheus").mkdir(parents=True, mode=0o700)
    folder.parent.chmod(0o700)
    folder.chmod(0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    start = ("sandbox", "start", "--gpu-nodes", "1xH100-80GB", "--prometheus-bin", "")
    written = [_planted(folder, n, elsewhere) for n in ("kubeconfig", "sandbox.log")]
    r = gpuctl(env, *start)
    assert r.returncode == 0, r.stderr
    try:
        for name in ("kubeconfig", "sandbox.log", "sandbox.json"):
            assert (folder / name).is_file() and not (folder / name).is_symlink(), name
    finally:
        assert gpuctl(env, "sandbox", "stop").returncode == 0
    state = _planted(folder, "sandbox.json", elsewhere)
    for command in (start, ("sandbox", "status"), ("sandbox", "stop")):
        r = gpuctl(env, *command)
        assert r.returncode == 1 and "a symbolic link, not a state gpuctl wrote" in r.stderr
    (folder / "sandbox.json").unlink()
    lock = _planted(folder, "lock", elsewhere) if not (folder / "lock").unlink() else None
    r = gpuctl(env, *start)
    assert r.returncode == 1 and "cannot open the lock" in r.stderr, r.stderr
    for precious in [*written, state, lock]:
        assert precious is not None and precious.read_text() == "not gpuctl's\n", precious


def test_a_state_directory_others_control_is_refused(env, tmp_path):
    folder = _folder(env)
    start = ("sandbox", "start", "--gpu-nodes", "1xH100-80GB", "--prometheus-bin", "")
    Path(env["XDG_STATE_HOME"], "gpuctl").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder.parent.symlink_to(elsewhere)
    r = gpuctl(env, *start)
    assert r.returncode == 1 and "is a symbolic link" in r.stderr, r.stderr
    folder.parent.unlink()
    folder.parent.mkdir(mode=0o777)
    folder.parent.chmod(0o777)
    r = gpuctl(env, *start)
    assert r.returncode == 1 and "may be written by others (mode 0777" in r.stderr, r.stderr
    folder.parent.chmod(0o700)
    folder.mkdir(mode=0o700)
    if os.getuid() == 0:  # only root can give a directory away
        os.chown(folder, 65534, 65534)
        r = gpuctl(env, *start)
        assert r.returncode == 1 and "belongs to another user (uid 65534)" in r.stderr
    assert list(folder.iterdir()) == [] and _started_under(Path(env["XDG_STATE_HOME"])) == []


@pytest.mark.parametrize("where", ["gpuctl", "gpuctl/sandbox", "gpuctl/sandbox/gpuctl"])
def test_a_state_path_that_is_a_file_is_a_clear_error(env, where):
    path = Path(env["XDG_STATE_HOME"], where)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("a file\n")
    for command in ("start", "stop"):
        r = gpuctl(env, "sandbox", command)
        assert r.returncode == 1, r.stderr
        assert "cannot keep the sandbox's state in" in r.stderr and "a bug" not in r.stderr
        assert "file, not a directory" in r.stderr and len(r.stderr.splitlines()) == 2


def test_concurrent_starts_take_turns(env):
    """Two starts at once: one starts the sandbox, the other finds it running; one sandbox
    process exists, and stop leaves none."""
    command = [sys.executable, "-m", "gpuctl", "sandbox", "start", "--name", "race"]
    command += ["--gpu-nodes", "1xH100-80GB", "--prometheus-bin", ""]
    procs = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )
        for _ in range(2)
    ]  # fmt: skip
    results = []
    for proc in procs:
        try:
            results.append((proc.wait(DEADLINE_S), proc.stderr.read() if proc.stderr else ""))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("a start ran past its deadline") from None
    assert sorted(code for code, _ in results) == [0, 1], results
    assert any("sandbox race is already running" in err for _, err in results)
    state = Path(env["XDG_STATE_HOME"])
    sandboxes = [
        p for p in _started_under(state) if "gpuctl.sim.sandbox" in str(processes.identify(p))
    ]
    assert len(sandboxes) == 1
    assert gpuctl(env, "sandbox", "stop", "--name", "race").returncode == 0
    assert processes.wait_gone([p for p in map(processes.identify, sandboxes) if p], 10) == []
    assert _started_under(state) == []


def _started_with_prometheus(env: dict) -> tuple[processes.Identity, processes.Identity]:
    """A sandbox started with its Prometheus: the two processes as its record names them."""
    r = gpuctl(
        env,
        "sandbox",
        "start",
        "--gpu-nodes",
        "1xH100-80GB",
        "--prometheus-bin",
        need("prometheus"),
    )
    assert r.returncode == 0, r.stderr
    record = json.loads((_folder(env) / "sandbox.json").read_text())["processes"]
    return (
        processes.Identity.from_dict(record["sandbox"]),
        processes.Identity.from_dict(record["prometheus"]),
    )


def test_stop_after_the_sandbox_was_killed_stops_its_prometheus(env):
    sandbox, prom = _started_with_prometheus(env)
    assert processes.is_running(prom) and prom.session == sandbox.pid
    os.kill(sandbox.pid, signal.SIGKILL)
    assert processes.wait_gone([sandbox], 10) == []
    assert processes.is_running(prom), "the test needs its Prometheus left behind"
    listed = gpuctl(env, "sandbox", "list")
    assert f"crashed: left pids {prom.pid}" in listed.stdout
    r = gpuctl(env, "sandbox", "stop")
    assert r.returncode == 0, r.stderr
    assert f"prometheus pid {prom.pid}" in r.stdout
    assert processes.wait_gone([prom], 10) == []


def test_a_port_taken_meanwhile_is_retried_then_reported(tmp_path):
    """The sandbox picks Prometheus's port before Prometheus binds it: when another process
    takes it in between, the next port is tried; when every try fails, it says so (never a
    URL nothing answers on)."""
    from gpuctl.sim.sandbox import SandboxError, free_port, start_prometheus

    binary = need("prometheus")
    scrape = [{"job_name": "none", "static_configs": [{"targets": ["127.0.0.1:9"]}]}]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc, url = start_prometheus(binary, tmp_path / "one", scrape, [port, free_port()])
        try:
            assert url != f"http://127.0.0.1:{port}"
            with urllib.request.urlopen(url + "/-/ready", timeout=10) as answer:
                assert answer.status == 200
        finally:
            proc.terminate()
            proc.wait(10)
        with pytest.raises(SandboxError, match=f"taken meanwhile: {port}, {port}$"):
            start_prometheus(binary, tmp_path / "two", scrape, [port, port])


def test_stop_kills_a_hung_sandbox_and_its_prometheus(env):
    """A sandbox that no longer answers (stopped by SIGSTOP: SIGTERM stays pending) is
    killed after stop's wait, and its Prometheus with it."""
    sandbox, prom = _started_with_prometheus(env)
    os.kill(sandbox.pid, signal.SIGSTOP)
    r = gpuctl(env, "sandbox", "stop")
    assert r.returncode == 0, r.stderr
    assert f"prometheus pid {prom.pid}" in r.stdout
    assert processes.wait_gone([sandbox, prom], 10) == []
