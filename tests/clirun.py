"""Run `gpuctl ARGS…` in-process as a user would, and capture what it printed."""

import json
import os
import subprocess
import sys

from gpuctl.app import main


def run_gpuctl(capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one invocation; output printed before it is dropped."""
    capsys.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def top_snapshot(capsys, url: str, *args) -> dict:
    """The `gpuctl top --prometheus URL --once -o json` document; the run must succeed."""
    code, out, err = run_gpuctl(capsys, "top", "--prometheus", url, "--once", "-o", "json", *args)
    assert code == 0, err
    return json.loads(out)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A background job (`make test &`, some CI runners) starts its children with SIGINT ignored,
# and a Python started so never raises KeyboardInterrupt: the child sets Python's own
# handler first, explicitly, then runs gpuctl as `python -m gpuctl` would.
_INTERRUPTIBLE = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'gpuctl'; runpy.run_module('gpuctl', run_name='__main__', alter_sys=True)"
)


def gpuctl_process(*args: str) -> subprocess.Popen:
    """`gpuctl ARGS…` in a process of its own that Ctrl-C (SIGINT) interrupts, whatever the
    test runner's own SIGINT disposition; stdout and stderr piped, as text."""
    return subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTIBLE, *args],
        cwd=ROOT,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
