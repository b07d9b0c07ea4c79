"""The layers contract names every package of gpuctl, so that the rules that follow from it
(arrows point down; capabilities do not import each other) cover a new one; its row of
capabilities is the one list a new capability is added to (CONTRIBUTING.md)."""

from __future__ import annotations

import os
import pkgutil
import re

import pytest

import gpuctl
from tests import ROOT

tomllib = pytest.importorskip("tomllib")

# Top-level names that hold no code the layers order: the entry point and the data tables
NOT_LAYERED = {"gpuctl.__main__": "runs gpuctl.app", "gpuctl.data": "JSON tables only"}


def _rows() -> list[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers"]
    return layers["layers"]


def _names(row: str) -> list[str]:
    return re.split(r"\s*[|:]\s*", row.strip())


def test_every_package_of_gpuctl_is_in_one_layer() -> None:
    named = [name for row in _rows() for name in _names(row)]
    top = {f"gpuctl.{m.name}" for m in pkgutil.iter_modules(gpuctl.__path__)}
    missing = top - set(NOT_LAYERED) - set(named)
    assert not missing, f"in no row of the layers contract (pyproject.toml): {sorted(missing)}"
    assert len(named) == len(set(named)) and set(named) <= top


def test_the_capabilities_are_independent_siblings() -> None:
    """import-linter's `|` between siblings, unlike `:`, forbids them to import each other."""
    (row,) = [r for r in _rows() if "gpuctl.jobs" in _names(r)]
    assert ":" not in row and {"gpuctl.jobs", "gpuctl.mig", "gpuctl.reclaim"} <= set(_names(row))
