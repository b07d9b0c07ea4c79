"""How `gpuctl report` shows a Report on a terminal and as CSV (the HTML page: page.py)."""

from __future__ import annotations

import io

from gpuctl.report.core import showback
from gpuctl.report.core.showback import Report
from gpuctl.report.core.text import dra_note, money, pct, safe, when

_COLUMNS = ("team", "GPU-h held", "GPU-h busy", "busy", "GPU-h idle-held", "cost", "idle cost")


def rows(r: Report) -> list[tuple[str, ...]]:
    return [
        (
            safe(t.team),
            f"{t.held_gpu_hours:,.1f}",
            f"{t.busy_gpu_hours:,.1f}",
            pct(t.busy_fraction),
            f"{t.idle_held_gpu_hours:,.1f}",
            money(t.cost, r.currency),
            money(t.idle_cost, r.currency),
        )
        for t in r.every_team
    ]


def heading(r: Report) -> str:
    gpus = r.gpu_hours
    held = r.held_gpu_hours / gpus if gpus else None
    busy = sum(r.cluster_busy) * r.step_s / 3600 / gpus if gpus else None
    line = (
        f"GPU showback {when(r.start)} to {when(r.end)}: {gpus:,.0f} GPU-hours, "
        f"{pct(held)} held, {pct(busy)} busy (busy signal: {safe(r.signal)})"
    )
    if r.duty_cycle_only:
        line += (
            "\nNote: only a duty cycle (GPU_UTIL or GR_ENGINE_ACTIVE) was available: it reads "
            "100 % for a kernel on one SM; enable DCGM_FI_PROF_SM_ACTIVE for a busy signal "
            "that measures work (see docs/report.md)"
        )
    if r.dra_unlabelled:
        line += f"\nNote: {dra_note(r.dra_unlabelled)}"
    return line


def table(r: Report):
    from rich.table import Table

    out = Table(title=heading(r), title_justify="left")
    for name in _COLUMNS:
        out.add_column(name, justify="left" if name == "team" else "right")
    for row in rows(r):
        out.add_row(*row)
    return out


def holders_table(r: Report):
    from rich.table import Table

    out = Table(title="Top idle holders", title_justify="left")
    for name in ("team", "namespace", "pod", "idle GPU-h"):
        out.add_column(name, justify="right" if name == "idle GPU-h" else "left")
    for h in r.idle_holders:
        out.add_row(safe(h.team), safe(h.namespace), safe(h.pod), f"{h.idle_gpu_hours:,.1f}")
    return out


def csv_text(r: Report) -> str:
    import csv

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(showback.CSV_COLUMNS)
    for row in showback.csv_rows(r):
        # a spreadsheet runs a cell that starts with = + - @ as a formula: not a team's name
        writer.writerow(["'" + c if isinstance(c, str) and c[:1] in "=+-@\t\r" else c for c in row])
    return buf.getvalue()
