"""Shared output helpers: machine-readable dumps, the stderr console, confirmations."""

from __future__ import annotations

import enum
import json
import sys
from typing import Any

import typer

from gpuctl.common.errors import Aborted, UsageError


class Format(str, enum.Enum):
    table = "table"
    yaml = "yaml"
    json = "json"


class DataFormat(str, enum.Enum):
    """For commands whose output is data only (manifests, configs): no table."""

    yaml = "yaml"
    json = "json"


def dump(data: Any, fmt: str) -> str:
    """YAML or JSON text (several manifests: dump_documents)."""
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
    if fmt == "yaml":
        import yaml

        return yaml.dump(data, Dumper=_dumper(), sort_keys=False, default_flow_style=False)
    raise UsageError(f"unknown output format {fmt!r} (use yaml or json)")


def dump_documents(docs: list[dict], fmt: str) -> str:
    """Several manifests: a YAML stream, or a JSON list (kubectl's `kind: List` shape)."""
    if fmt == "json":
        return dump({"apiVersion": "v1", "kind": "List", "items": docs}, "json")
    import yaml

    return yaml.dump_all(docs, Dumper=_dumper(), sort_keys=False, default_flow_style=False)


def _dumper():
    """A safe YAML dumper that writes multi-line strings (embedded configs) as | blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data) -> bool:
            # a value used twice (the same valueFrom on several env entries) is written out
            # each time, not as an &anchor / *alias a reader of a manifest has to resolve
            return True

    def text(dumper, value: str):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def echo(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def err_console():
    from rich.console import Console

    return Console(stderr=True)


def out_console():
    from rich.console import Console

    return Console()


def confirm(question: str, yes: bool) -> None:
    """Proceed if --yes was given or the user agrees; otherwise abort (exit 3)."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise Aborted("not confirmed: pass --yes to proceed without a prompt")
    if not typer.confirm(question, default=False):
        raise Aborted("aborted; nothing was changed")
