"""Pure code is known by its path: mypy's strict override and the import-linter purity
contract name the same modules, with one wildcard for every capability's `core` package."""

from __future__ import annotations

import os
import pkgutil
import re

import pytest

import gpuctl
from tests import ROOT

tomllib = pytest.importorskip("tomllib")


def _config() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]


def _strict_patterns() -> list[str]:
    (override,) = [o for o in _config()["mypy"]["overrides"] if o.get("disallow_untyped_defs")]
    return override["module"]


def _pure_sources() -> list[str]:
    contracts = _config()["importlinter"]["contracts"]
    (pure,) = [c for c in contracts if c["name"].startswith("Pure modules")]
    return pure["source_modules"]


def _modules() -> list[str]:
    return [
        m.name
        for m in pkgutil.walk_packages(gpuctl.__path__, "gpuctl.")
        if ".sim.shim" not in m.name
    ]


def _mypy_matches(pattern: str, module: str) -> bool:
    """mypy's rule: each `.*` stands for zero or more further components."""
    regex = re.escape(pattern).replace(r"\.\*", r"(?:\.[^.]+)*")
    return re.fullmatch(regex, module) is not None


def _linter_matches(expression: str, module: str) -> bool:
    """import-linter's: `**` is one or more components; a source includes its descendants."""
    regex = re.escape(expression).replace(r"\*\*", r"[^.]+(?:\.[^.]+)*")
    return re.fullmatch(regex + r"(?:\.[^.]+)*", module) is not None


def test_strict_and_pure_name_the_same_modules() -> None:
    strict = {m for m in _modules() if any(_mypy_matches(p, m) for p in _strict_patterns())}
    pure = {m for m in _modules() if any(_linter_matches(e, m) for e in _pure_sources())}
    assert strict == pure
    assert {
        "gpuctl.jobs.core.spec",
        "gpuctl.top.cluster.core.usage",
        "gpuctl.common.errors",
    } <= pure
    assert not {"gpuctl.jobs.service", "gpuctl.jobs.cli", "gpuctl.adapters.kube"} & pure


def test_every_capability_core_is_pure() -> None:
    cores = {m for m in _modules() if ".core" in m}
    assert cores and all(any(_linter_matches(e, m) for e in _pure_sources()) for m in cores)
