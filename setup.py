"""The one thing pyproject.toml cannot say: the packages are found (a new one needs no entry)
and joined by those that pyproject.toml's package-dir maps into the package from the top of
the checkout (terraform/, examples/, templates/), which no search under gpuctl/ finds."""

from setuptools import find_namespace_packages, setup
from setuptools.config.pyprojecttoml import read_configuration

found = find_namespace_packages(include=["gpuctl", "gpuctl.*"], exclude=["*.__pycache__"])
mapped = read_configuration("pyproject.toml", expand=False)["tool"]["setuptools"]["package-dir"]
setup(packages=sorted({*found, *mapped}))
