"""How `gpuctl sandbox list` shows the sandboxes. CLI side (rich)."""

from __future__ import annotations

from typing import Any

from gpuctl.cli.output import new_table, out_console


def listing(rows: list[tuple[str, Any, list[int]]]) -> None:
    """One line per sandbox: name, state, API, Prometheus, nodes."""
    if not rows:
        out_console().print("no sandboxes (gpuctl sandbox start)", highlight=False)
        return
    table = new_table()
    for col in ("NAME", "STATE", "API", "PROMETHEUS", "NODES"):
        table.add_column(col)
    for name, sandbox, left in rows:
        if sandbox is not None:
            prometheus = sandbox.prometheus or "-"
            table.add_row(name, "running", sandbox.api, prometheus, sandbox.nodes)
        elif left:
            state = "crashed: left pids " + " ".join(map(str, left)) + " (sandbox stop)"
            table.add_row(name, state, "-", "-", "-")
        else:
            table.add_row(name, "crashed (sandbox stop clears it)", "-", "-", "-")
    out_console().print(table)
