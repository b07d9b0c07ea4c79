"""How `gpuctl mig` shows its answers: the tables of profiles, plans and node state, the
text of a layout's fit, where a plan's text goes, and the progress of a configuration."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gpuctl.cli.output import Format, dump, echo, err_console
from gpuctl.cli.workflow import StepPrinter
from gpuctl.gpus.mig_layout import slice_range


def text_writer(output: Format) -> Callable[[str], None]:
    """Where a plan's text goes: stdout, or stderr when stdout carries -o json|yaml."""
    if output == Format.table:
        return echo

    def to_stderr(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()

    return to_stderr


def print_data(data: Any, output: Format) -> bool:
    """With -o json|yaml, print DATA and say so (True); with a table, print nothing."""
    if output == Format.table:
        return False
    echo(dump(data, output.value))
    return True


class MigProgress(StepPrinter):
    """The executor's progress, and what is done beside the steps (a GPU reset)."""

    def note(self, text: str) -> None:
        err_console().print(f"  {text}", markup=False, highlight=False)


def rebalance_question(plan: Any) -> str:
    """What `mig rebalance` asks before it changes nodes."""
    question = f"Reconfigure {plan.gpus_changed} GPU(s) on {len(plan.changes)} node(s)"
    if plan.finishing:
        question += f" and finish {len(plan.finishing)} left by an earlier run"
    if plan.evictions:
        question += f", evicting {plan.evictions} pod(s)"
    return question + "?"


def rebalanced(nodes: list[str], evictions: Any) -> str | None:
    """What a `mig rebalance` that went through says last: the nodes, the pods evicted."""
    if not nodes:
        return None
    said = f"rebalanced: {', '.join(nodes)}"
    return said + (f"; {evictions.account()}" if evictions.done else "")


def print_state(node: str, state: str, seconds: float) -> None:
    err_console().print(f"  {node}: {state} ({seconds:.0f}s)", markup=False, highlight=False)


def _table(columns: tuple[str, ...], no_wrap: tuple[str, ...] = ()):
    from gpuctl.cli.output import new_table as Table

    table = Table(box=None)
    for col in columns:
        table.add_column(col, no_wrap=col in no_wrap)
    return table


def _print(table) -> None:
    from gpuctl.cli.output import out_console

    out_console().print(table)


def _s(v: object) -> str:
    return "?" if v is None else str(v)


def profiles(rows: list[dict[str, Any]]) -> None:
    columns = ("GPU", "PROFILE", "ID", "SM SLICES", "MEM SLICES", "MEMORY", "SMs", "MAX", "STARTS")
    table = _table(columns, no_wrap=("PROFILE", "STARTS"))
    for r in rows:
        table.add_row(
            r["gpu"],
            r["profile"],
            _s(r["profile_id"]),
            str(r["compute_slices"]),
            str(r["memory_slices"]),
            f"{r['memory_mib']} MiB" if r["memory_mib"] else "?",
            _s(r["sm_count"]),
            str(r["max_instances"]),
            ",".join(p.split(":")[0] for p in r["placements"]),
        )
    _print(table)


def _placed(placements: list[dict[str, Any]], sep: str, form: str) -> str:
    return sep.join(
        form.format(profile=p["profile"], slices=slice_range(p["start"], p["size"]))
        for p in placements
    )


def demand_plan(data: dict[str, Any]) -> None:
    table = _table(("GPUS", "MODEL", "LAYOUT", "PLACEMENT (slices)", "FREE SLICES"))
    for g in data["layouts"]:
        table.add_row(
            str(g["count"]),
            g["gpu"],
            ", ".join(f"{k}×{v}" for k, v in g["layout"].items()),
            _placed(g["placements"], " ", "{profile}@{slices}"),
            str(g["free_memory_slices"]),
        )
    _print(table)
    proof = "optimal" if data["optimal"] else f"best found (at least {data['lower_bound']} needed)"
    demand = ", ".join(f"{k}×{v}" for k, v in data["demand"].items())
    from gpuctl.cli.output import out_console

    out_console().print(f"{data['gpus']} GPUs ({proof}) for {demand}")


def layout_fits(fits: list[dict[str, Any]]) -> None:
    for f in fits:
        placed = _placed(f["placements"], ", ", "{profile} at slices {slices}")
        echo(f"{f['gpu']}: fits: {placed}\n")


def _mig_mode(mig: dict[str, bool] | None) -> str:
    if mig is None:
        return "n/a"
    mode = "on" if mig["current"] else "off"
    if mig["current"] != mig["pending"]:
        mode += f" (pending {'on' if mig['pending'] else 'off'}: reset needed)"
    return mode


def node_state(gpus: list[dict[str, Any]]) -> None:
    columns = ("GPU", "MODEL", "MIG", "GI", "PROFILE", "SLICES", "MEMORY", "CI", "PROCESSES")
    table = _table(columns)
    for d in gpus:
        procs = ", ".join(f"{p['pid']} {p['name']}" for p in d["processes"])
        mode = _mig_mode(d["mig"])
        table.add_row(str(d["index"]), d["model"] or d["name"], mode, "", "", "", "", "", procs)
        for i in d["instances"]:
            table.add_row(
                "",
                "",
                "",
                str(i["gi_id"]),
                i["profile"] or f"id {i['profile_id']}",
                slice_range(i["start"], i["size"]),
                f"{i['memory_mib']} MiB" if i["memory_mib"] else "?",
                ",".join(str(c["ci_id"]) for c in i["compute_instances"]) or "none",
                ", ".join(
                    f"{p['pid']} {p['name']} ({p['user']}, {p['used_memory_mib']} MiB)"
                    for p in i["processes"]
                ),
            )
    _print(table)
