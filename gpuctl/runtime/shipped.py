"""The directories gpuctl ships beside its code: the Terraform modules (`terraform`), the
example specs (`examples`) and the site job templates (`templates`).

In a source checkout they live at the repository's top; the wheel maps them into the package
(pyproject.toml's package-dir), so an installed gpuctl finds them as gpuctl/NAME/ whatever
the current directory. An editable install imports gpuctl from the checkout, so it finds the
top-level directories too.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # …/gpuctl


def directory(name: str) -> Path:
    """gpuctl/NAME in an installed package, else NAME/ at the top of the checkout."""
    inside = PACKAGE / name
    return inside if inside.is_dir() else PACKAGE.parent / name
