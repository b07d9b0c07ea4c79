"""Every outside system a command talks to is handed out by the run's Application
(gpuctl.cli.application), resolved there from options, environment and settings: no
capability, service or CLI module builds an adapter itself. The simulator is chosen once, at
the top (gpuctl.app), and nothing below it imports gpuctl.sim (the layers contract)."""

from __future__ import annotations

import ast
import os
import pathlib

import pytest

from tests import ROOT

tomllib = pytest.importorskip("tomllib")

# The adapters' classes: constructing one is choosing an outside system to talk to.
ADAPTERS = {
    "gpuctl.adapters.aws.Aws",
    "gpuctl.adapters.kube.Kube",
    "gpuctl.adapters.nvml.Nvml",
    "gpuctl.adapters.prometheus.Prometheus",
    "gpuctl.adapters.terraform.Engine",
}
# Where they may be constructed: the adapters themselves, and the Application.
BUILDERS = ("gpuctl/adapters/", "gpuctl/cli/application.py")


def _constructed(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, class) of every call in PATH of a class of ADAPTERS, however it was imported
    (`from gpuctl.adapters.kube import Kube`, `from gpuctl.adapters import kube`, ...)."""
    tree = ast.parse(path.read_text())
    names: dict[str, str] = {}  # local name -> what it is, fully qualified
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):  # `import a.b` binds `a`, which names itself
            names.update((a.asname, a.name) for a in node.names if a.asname)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            head, _, rest = ast.unparse(node.func).partition(".")
            called = names.get(head, head) + (f".{rest}" if rest else "")
            if called in ADAPTERS:
                found.append((node.lineno, called))
    return found


def test_only_the_application_builds_an_adapter():
    elsewhere, application = [], set()
    for path in sorted(pathlib.Path(ROOT, "gpuctl").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        calls = _constructed(path)
        if rel == "gpuctl/cli/application.py":
            application |= {name for _, name in calls}
        elif not rel.startswith(BUILDERS):
            elsewhere += [f"{rel}:{line} {name}(...)" for line, name in calls]
    assert elsewhere == []
    assert application == ADAPTERS  # each is handed out there (and the check sees calls)


def _layers() -> list[set[str]]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers"]
    return [{m.strip() for m in row.replace("|", ":").split(":")} for row in layers["layers"]]


def test_the_simulator_sits_at_the_top_under_only_the_app_and_the_sandbox():
    layers = _layers()
    row = {module: i for i, modules in enumerate(layers) for module in modules}
    sim = row["gpuctl.sim"]
    assert layers[sim] == {"gpuctl.sim"}  # a layer of its own, which nothing below imports
    assert row["gpuctl.app"] < row["gpuctl.sandbox"] < sim
    below = {"gpuctl.jobs", "gpuctl.mig", "gpuctl.top", "gpuctl.cli", "gpuctl.adapters"}
    below |= {"gpuctl.runtime", "gpuctl.common"}
    assert all(row[module] > sim for module in below)


def test_a_simulated_node_comes_only_from_the_top(monkeypatch):
    """The Application by itself runs the NVIDIA driver; gpuctl.app hands it the choice that
    runs gpuctl.sim's simulated node for --simulate."""
    from gpuctl import app
    from gpuctl.cli.application import Application
    from gpuctl.common.errors import UsageError

    monkeypatch.delenv("GPUCTL_SIMULATE", raising=False)
    with pytest.raises(UsageError, match="runs no simulated node"):
        Application().nvml("1xA30")
    assert Application().nvml().driver.simulation is None
    top = Application(nvml_driver=app._nvml_driver)
    assert top.nvml().driver.simulation is None
    simulated = top.nvml("1xA30").driver
    assert simulated.simulation == "1xA30"
    assert simulated.nvidia_smi[1:3] == ("-m", "gpuctl.sim.nvidia_smi")
    with top.nvml("1xA30") as nvml:
        assert nvml.gpu_name(0) == "NVIDIA A30"
