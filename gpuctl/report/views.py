"""How `gpuctl report` shows a Report: a table, CSV, and one self-contained HTML page
(plots as inline SVG drawn by matplotlib, the `report` extra, imported only for --html;
no script and no network needed to open it, so it can be mailed)."""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from datetime import datetime, timezone

from gpuctl.report.core import showback
from gpuctl.report.core.showback import Report

_COLUMNS = ("team", "GPU-h held", "GPU-h busy", "busy", "GPU-h idle-held", "cost", "idle cost")


def _money(value: float | None, currency: str) -> str:
    return "unpriced" if value is None else f"{value:,.2f} {currency}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _safe(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def rows(r: Report) -> list[tuple[str, ...]]:
    return [
        (
            _safe(t.team),
            f"{t.held_gpu_hours:,.1f}",
            f"{t.busy_gpu_hours:,.1f}",
            _pct(t.busy_fraction),
            f"{t.idle_held_gpu_hours:,.1f}",
            _money(t.cost, r.currency),
            _money(t.idle_cost, r.currency),
        )
        for t in r.teams
    ]


def heading(r: Report) -> str:
    doc = showback.to_dict(r)["cluster"]
    line = (
        f"GPU showback {_when(r.start)} to {_when(r.end)}: {doc['gpu_hours'] or 0:,.0f} GPU-hours, "
        f"{_pct(doc['allocation_fraction'])} held, {_pct(doc['busy_fraction'])} busy "
        f"(busy signal: {_safe(r.signal)})"
    )
    if r.duty_cycle_only:
        line += (
            "\nNote: only a duty cycle (GPU_UTIL or GR_ENGINE_ACTIVE) was available: it reads "
            "100 % for a kernel on one SM; enable DCGM_FI_PROF_SM_ACTIVE for a busy signal "
            "that measures work (see docs/report.md)"
        )
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
        out.add_row(_safe(h.team), _safe(h.namespace), _safe(h.pod), f"{h.idle_gpu_hours:,.1f}")
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


def _svg(figure) -> str:
    buf = io.StringIO()
    figure.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]  # inline: no XML prologue or DOCTYPE


def _plots(r: Report) -> list[str]:
    import matplotlib

    matplotlib.use("svg")
    from matplotlib import dates
    from matplotlib.figure import Figure

    when = dates.date2num([datetime.fromtimestamp(t, timezone.utc) for t in r.times])
    svgs = []
    fig = Figure(figsize=(10, 3.2))
    ax = fig.subplots()
    ax.plot(when, r.cluster_gpus, label="GPUs", color="#555555")
    ax.plot(when, r.cluster_held, label="held", color="#1f77b4")
    ax.plot(when, r.cluster_busy, label="busy", color="#2ca02c")
    ax.set_title("Cluster: GPUs, held and busy")
    ax.set_ylabel("GPUs")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left")
    ax.xaxis.set_major_formatter(dates.DateFormatter("%m-%d %H:%M"))
    svgs.append(_svg(fig))
    for team in r.teams:
        fig = Figure(figsize=(10, 2.4))
        ax = fig.subplots()
        held, busy = r.team_held.get(team.team, []), r.team_busy.get(team.team, [])
        ax.fill_between(when, held, color="#1f77b4", alpha=0.3, label="held", step="pre")
        ax.plot(when, busy or [0.0] * len(when), color="#2ca02c", label="busy", drawstyle="steps")
        ax.set_title(f"{_safe(team.team)}: GPUs held vs busy")
        ax.set_ylabel("GPUs")
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left")
        ax.xaxis.set_major_formatter(dates.DateFormatter("%m-%d %H:%M"))
        svgs.append(_svg(fig))
    return svgs


_STYLE = (
    "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;"
    "margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px}td.n{text-align:right}"
    "th{background:#f0f0f0}figure{margin:1em 0}.note{color:#a40}"
)


def _html_table(head: Sequence[str], body: Sequence[Sequence[str]], cls: str) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    lines = [f'<table class="{cls}"><thead><tr>{cells}</tr></thead><tbody>']
    for row in body:
        tds = "".join(
            f"<td{'' if i == 0 else ' class=n'}>{html.escape(c)}</td>" for i, c in enumerate(row)
        )
        lines.append(f"<tr>{tds}</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def html_page(r: Report) -> str:
    """One self-contained page: summary, the ranked waste table, the plots."""
    first, _, note = heading(r).partition("\n")
    waste = sorted(r.teams, key=lambda t: (-t.idle_held_gpu_hours, t.team))
    ranked = [
        (
            _safe(t.team),
            f"{t.idle_held_gpu_hours:,.1f}",
            f"{t.held_gpu_hours:,.1f}",
            _pct(t.busy_fraction),
            _money(t.idle_cost, r.currency),
        )
        for t in waste
    ]
    idle = [
        (_safe(h.team), _safe(h.namespace), _safe(h.pod), f"{h.idle_gpu_hours:,.1f}")
        for h in r.idle_holders
    ]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>GPU showback</title>',
        f"<style>{_STYLE}</style></head><body>",
        "<h1>GPU showback</h1>",
        f"<p>{html.escape(first)}</p>",
        f'<p class="note">{html.escape(note)}</p>' if note else "",
        "<h2>Waste, ranked</h2>",
        _html_table(
            ("team", "idle-held GPU-h", "held GPU-h", "busy", "idle cost"), ranked, "waste"
        ),
        "<h2>Per team</h2>",
        _html_table(_COLUMNS, rows(r), "teams"),
        "<h2>Top idle holders</h2>",
        _html_table(("team", "namespace", "pod", "idle GPU-h"), idle, "holders"),
        "<h2>Held vs busy over time</h2>",
        *(f'<figure class="plot">{svg}</figure>' for svg in _plots(r)),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
