"""What the wheel carries: every package under gpuctl/, and the top-level templates/ as
gpuctl/templates/ (pyproject lists the packages instead of finding them, so that it can
map templates/ into the package)."""

import os

import pytest

from tests import ROOT

tomllib = pytest.importorskip("tomllib")


def _setuptools() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_package_is_listed():
    found = {
        os.path.relpath(d, ROOT).replace(os.sep, ".")
        for d, _, files in os.walk(os.path.join(ROOT, "gpuctl"))
        if "__init__.py" in files
    }
    assert set(_setuptools()["packages"]) == found | {"gpuctl.templates"}


def test_the_top_level_templates_ship_inside_the_package():
    config = _setuptools()
    assert config["package-dir"] == {"gpuctl.templates": "templates"}
    assert config["package-data"]["gpuctl.templates"] == ["*.yaml"]
    shipped = [n for n in os.listdir(os.path.join(ROOT, "templates")) if not n.startswith(".")]
    assert shipped and all(n.endswith(".yaml") for n in shipped)
