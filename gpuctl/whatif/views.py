"""How `gpuctl whatif --gang-csv` shows what the gang replays measured."""

from __future__ import annotations

from typing import Any

from gpuctl.cli.output import new_table, out_console

MOST_DOMAINS = 20  # rows of the domain table; -o json lists them all


def gang_tables(result: dict[str, Any]) -> None:
    """One row per seed, then the free GPUs per block and spine after the first seed's
    replay: the spines, and the blocks with the most free first."""
    runs = result["runs"]
    table = new_table(box=None, header_style="bold", pad_edge=False)
    for heading in ("SEED", "GANGS", "PLACED", "NEVER", "NO DOMAIN", "NO ROOM", "GPUS USED"):
        table.add_column(heading, justify="right")
    for r in runs:
        used = f"{r['gpus_allocated']:,} of {r['gpus']:,}"
        table.add_row(*(f"{r[k]:,}" for k in ("seed", "gangs_arrived", "gangs_placed", "refused_never", "refused_for_domain", "refused_for_room")), used)  # fmt: skip
    out_console().print(table)
    first = runs[0]
    domains = [d for d in first["domains"] if d["level"] != "cluster"]
    domains.sort(key=lambda d: (d["level"] != "spine", -d["free"], d["domain"]))
    shown = domains[:MOST_DOMAINS]
    per = new_table(
        box=None,
        header_style="bold",
        pad_edge=False,
        title=f"Free GPUs per domain after seed {first['seed']}",
        title_justify="left",
        caption=f"{len(domains) - len(shown):,} more (-o json lists them all)"
        if len(domains) > len(shown)
        else None,
        caption_justify="left",
    )
    for heading in ("LEVEL", "DOMAIN", "NODES", "GPUS", "FREE", "WHOLE NODES FREE"):
        per.add_column(heading, justify="left" if heading in ("LEVEL", "DOMAIN") else "right")
    for d in shown:
        per.add_row(d["level"], d["domain"], *(f"{d[k]:,}" for k in ("nodes", "gpus", "free", "whole_nodes_free")))  # fmt: skip
    out_console().print(per)
    out_console().print(result["reading"], soft_wrap=True, markup=False)
