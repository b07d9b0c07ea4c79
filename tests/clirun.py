"""Run `gpuctl ARGS…` in-process as a user would, and capture what it printed."""

import json

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
