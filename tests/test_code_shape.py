"""CLI modules only parse options, call a service and render: no function in a command-line
module is long enough to hold a workflow."""

from __future__ import annotations

import ast
import pathlib

from tests import ROOT

LONGEST = 60  # lines, signature included


def test_no_function_in_a_cli_module_is_longer_than_60_lines():
    long = []
    for path in sorted(pathlib.Path(ROOT, "gpuctl").rglob("cli.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert long == []
