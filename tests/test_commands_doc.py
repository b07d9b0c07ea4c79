"""docs/commands.md is generated from the CLI itself (docs/commands.py, `make docs`): every
command's help page, as the command prints it. A change to a command, its options or their
help leaves the committed file stale until it is made again."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import zip_longest
from pathlib import Path

import pytest

from gpuctl.app import COMMANDS
from tests import ROOT


@pytest.mark.integration
def test_docs_commands_md_is_what_make_docs_makes_now():
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCTL_")}
    made = subprocess.run(
        [sys.executable, os.path.join("docs", "commands.py")],
        cwd=ROOT, env={**env, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=120,
        check=True,
    ).stdout  # fmt: skip
    committed = Path(ROOT, "docs", "commands.md").read_text()
    pairs = zip_longest(made.splitlines(), committed.splitlines())
    stale = next((n for n, (new, old) in enumerate(pairs, 1) if new != old), None)
    assert stale is None, f"docs/commands.md differs from line {stale} on: run `make docs`"
    for name in COMMANDS:
        assert f"\n## gpuctl {name}\n\n```text\nUsage: gpuctl {name} " in committed, name
