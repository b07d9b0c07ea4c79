"""`gpuctl report --html`: one self-contained page a manager forwards. The headline totals
first (GPU-hours held, busy and idle, and what the idle ones cost), then the same per team,
two charts at full width, the pods that held GPUs idle longest, and footnotes that name
the signal and the metrics behind the plain words of the body. Charts are inline SVG drawn
by matplotlib (the `report` extra, imported only for --html); no script, nothing fetched,
so the page opens offline.

Bounded whatever the cluster (docs/report.md: under 1 MB): at most --teams rows (1,000),
PAGE_HOLDERS pods, names cut at NAME_CHARS characters, CHART_TEAMS bars and CHART_POINTS
points a line; label text is drawn as text (no mathtext, no TeX), so a `$` in a name is a
dollar sign."""

from __future__ import annotations

import html
import io
import math
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from gpuctl.dcgm import busy
from gpuctl.report.core.showback import Report, TeamUsage
from gpuctl.report.core.text import dra_note, money, pct, safe

NAME_CHARS = 48
PAGE_HOLDERS = 100
CHART_TEAMS = 12
CHART_POINTS = 600
HELD, BUSY, IDLE, GPUS = "#9ecae1", "#2ca02c", "#e6550d", "#555555"
# how the footnote names each busy signal
SIGNAL_WORDS = {
    "sm_active": "SM activity",
    "gr_engine_active": "graphics-engine activity",
    "gpu_util": "GPU utilization",
}
_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 color:#1d2530;margin:0;background:#fff}
main{max-width:1320px;margin:0 auto;padding:28px 32px 48px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 8px}
.when{color:#5b6676;margin:0 0 18px}
#headline{background:#eef3f8;border-radius:10px;padding:20px 22px}
.tiles{display:grid;grid-template-columns:repeat(4,1fr);gap:16px}
.tile{background:#fff;border-radius:8px;padding:14px 18px;border-top:5px solid #9ecae1}
.tile.busy{border-top-color:#2ca02c}.tile.idle,.tile.cost{border-top-color:#e6550d}
.tile .label{font-size:14px;color:#5b6676}.tile .value{font-size:32px;font-weight:650;
 margin:4px 0;white-space:nowrap}.tile .sub{font-size:14px;color:#5b6676}
.lead{font-size:17px;line-height:1.5;margin:16px 2px 0}
table{border-collapse:collapse;width:100%;margin:8px 0;font-size:15px}
th,td{padding:7px 10px;border-bottom:1px solid #e3e7ec;text-align:right}
th.t,td.t{text-align:left}th{background:#f6f7f9;font-weight:600}
tr.others td{color:#5b6676;font-style:italic}tfoot td{font-weight:650;border-top:2px solid #ccd3db}
figure{margin:8px 0 0}figure svg{width:100%;height:auto}
footer{margin-top:40px;font-size:13px;color:#5b6676;line-height:1.5}
.note{color:#a33b00}
"""


def html_page(r: Report) -> str:
    """The page: headline, per team, charts, idle pods, footnotes."""
    cluster, teams = _charts(r)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>GPU showback, {_day(r.start)} to {_day(r.end)}</title>",
        f"<style>{_STYLE}</style></head><body><main>",
        "<h1>GPU showback</h1>",
        f'<p class="when">{html.escape(_span(r))}</p>',
        _headline(r),
        "<h2>By team</h2>",
        _team_table(r),
        "<h2>GPUs over the window</h2>",
        f"<figure>{cluster}</figure>",
        "<h2>Where each team's GPU-hours went</h2>",
        _chart_note(r),
        f"<figure>{teams}</figure>",
        "<h2>Pods that held GPUs idle the longest</h2>",
        _holders_table(r),
        _footnotes(r),
        "</main></body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _day(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%-d %b %Y")


def _span(r: Report) -> str:
    fmt = "%a %-d %b %Y %H:%M"
    start, end = (datetime.fromtimestamp(t, timezone.utc).strftime(fmt) for t in (r.start, r.end))
    days, hours = (r.end - r.start) / 86400, (r.end - r.start) / 3600
    length = (
        f"{days:g} day{'s' * (days != 1)}" if days >= 1 else f"{hours:g} hour{'s' * (hours != 1)}"
    )
    return f"{start} to {end} UTC ({length})"


def _hours(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _share(part: float, whole: float) -> str:
    return pct(part / whole) if whole else "-"


def _headline(r: Report) -> str:
    held, busy_h, idle = r.held_gpu_hours, r.busy_gpu_hours, r.idle_held_gpu_hours
    costs = [t.cost for t in r.every_team]
    cost = None if None in costs else sum(c or 0.0 for c in costs)
    tiles = [
        (
            "held",
            "GPU-hours held",
            _hours(held),
            f"{_share(held, r.gpu_hours)} of the cluster's GPU-hours",
        ),
        ("busy", "GPU-hours busy", _hours(busy_h), f"{_share(busy_h, held)} of the hours held"),
        (
            "idle",
            "GPU-hours held while idle",
            _hours(idle),
            f"{_share(idle, held)} of the hours held",
        ),
        ("cost", "Cost of the idle hours", money(r.idle_cost, r.currency), _of_cost(cost, r)),
    ]
    cells = "".join(
        f'<div class="tile {cls}"><div class="label">{html.escape(label)}</div>'
        f'<div class="value">{html.escape(value)}</div>'
        f'<div class="sub">{html.escape(sub)}</div></div>'
        for cls, label, value, sub in tiles
    )
    teams = f"{r.team_count:,} team{'s' if r.team_count != 1 else ''}"
    lead = (
        f"{teams} held {_hours(held)} GPU-hours of the {_hours(r.gpu_hours)} the cluster's "
        f"GPUs offered; {_hours(busy_h)} of them did work. GPUs sat idle while held for "
        f"{_hours(idle)} GPU-hours"
        + ("." if r.idle_cost is None else f", which cost {money(r.idle_cost, r.currency)}.")
    )
    note = (
        '<p class="lead note">These figures count a GPU as busy whenever a kernel ran, '
        "however little of the GPU it used: they overstate the work done (note 1).</p>"
        if r.duty_cycle_only
        else ""
    )
    if r.dra_unlabelled:
        note += f'<p class="lead note">{html.escape(dra_note(r.dra_unlabelled))}.</p>'
    return (
        f'<section id="headline"><div class="tiles">{cells}</div>'
        f'<p class="lead">{html.escape(lead)}</p>{note}</section>'
    )


def _chart_note(r: Report) -> str:
    """What the teams' chart leaves to the table (the others' sum would dwarf every bar)."""
    left = len(r.teams) - min(len(r.teams), CHART_TEAMS) + (r.others.teams if r.others else 0)
    if not left:
        return ""
    shown = min(len(r.teams), CHART_TEAMS)
    return (
        f'<p class="when">The {shown} teams with the most idle cost; the other {left:,} are '
        "in the table above.</p>"
    )


def _of_cost(cost: float | None, r: Report) -> str:
    return "some GPU models have no price" if cost is None else f"of {money(cost, r.currency)}"


def _table(
    head: Sequence[str], body: Sequence[Sequence[str]], foot: Sequence[str] = (), text: int = 1
) -> str:
    """A table whose first TEXT columns are text (left), the others numbers (right); each
    body row's first cell is its class."""

    def row(cells: Sequence[str], tag: str = "td", cls: str = "") -> str:
        inner = "".join(
            f"<{tag}{' class=t' if i < text else ''}>{html.escape(c)}</{tag}>"
            for i, c in enumerate(cells)
        )
        return f'<tr class="{cls}">{inner}</tr>' if cls else f"<tr>{inner}</tr>"

    lines = [f"<table><thead>{row(head, 'th')}</thead><tbody>"]
    lines += [row(cells[1:], cls=cells[0]) for cells in body]
    lines.append("</tbody>" + (f"<tfoot>{row(foot)}</tfoot>" if foot else "") + "</table>")
    return "\n".join(lines)


def _team_row(t: TeamUsage, r: Report, cls: str = "") -> list[str]:
    return [
        cls,
        safe(t.team, NAME_CHARS),
        _hours(t.held_gpu_hours),
        _hours(t.busy_gpu_hours),
        pct(t.busy_fraction),
        _hours(t.idle_held_gpu_hours),
        money(t.idle_cost, r.currency),
        money(t.cost, r.currency),
    ]


def _team_table(r: Report) -> str:
    head = (
        "Team",
        "GPU-hours held",
        "GPU-hours busy",
        "busy share",
        "held while idle",
        "cost of idle hours",
        "cost of hours held",
    )
    ranked = sorted(r.teams, key=_by_idle)
    body = [_team_row(t, r) for t in ranked]
    if r.others:
        body.append(_team_row(r.others, r, "others"))
    total = TeamUsage("All teams", r.held_gpu_hours, r.busy_gpu_hours, r.idle_held_gpu_hours)
    total.cost = None if any(t.cost is None for t in r.every_team) else _sum_cost(r)
    total.idle_cost = r.idle_cost
    return _table(head, body, _team_row(total, r)[1:])


def _sum_cost(r: Report) -> float:
    return sum(t.cost or 0.0 for t in r.every_team)


def _by_idle(t: TeamUsage) -> tuple[float, float, str]:
    """Most idle cost first (unpriced by idle hours), then most idle hours."""
    return (-(t.idle_cost or 0.0), -t.idle_held_gpu_hours, t.team)


def _holders_table(r: Report) -> str:
    if not r.idle_holders:
        return "<p>No pod held a GPU while it was idle.</p>"
    shown = r.idle_holders[:PAGE_HOLDERS]
    body = [
        ["", safe(h.team, NAME_CHARS), safe(h.namespace, NAME_CHARS), safe(h.pod, NAME_CHARS)]
        + [_hours(h.idle_gpu_hours)]
        for h in shown
    ]
    return _table(("Team", "Namespace", "Pod", "GPU-hours held while idle"), body, text=3)


def _footnotes(r: Report) -> str:
    steps = r.device_steps
    used = [
        f"{SIGNAL_WORDS[name]} ({metric}) for {steps[name]:,} device-steps"
        for metric, name in busy.SIGNALS.items()
        if steps.get(name)
    ]
    signal = "; ".join(used) or "no busy signal was found"
    step = f"{r.step_s / 60:g}-minute" if r.step_s >= 60 else f"{r.step_s:g}-second"
    notes = [
        f"Busy: each GPU's busy share is the mean of its busy signal over each {step} step, "
        f"from dcgm-exporter through Prometheus: {signal}. A GPU counts as idle in a step "
        f"when that share is under {r.idle_threshold:g}%. GPU-hours busy are the hours held "
        "times the busy share."
        + (
            " Only a duty cycle was available (graphics-engine activity or GPU utilization): "
            "it reads 100% for a kernel on a single SM; enable DCGM_FI_PROF_SM_ACTIVE in "
            "dcgm-exporter's counters for a signal that measures work."
            if r.duty_cycle_only
            else ""
        ),
        "Held: a pod holds a GPU in a step when dcgm-exporter reports that GPU with the pod. "
        "A MIG slice counts as its share of the GPU (a 1g slice of 7 is 1/7); a GPU shared "
        "by several pods at once is split among them.",
        "Cost: GPU-hours held times the GPU model's price per hour (--prices, else gpuctl's "
        "table of EC2 on-demand prices per GPU); idle cost: the idle hours so priced."
        + _unpriced(r),
        f"Teams: the {len(r.teams):,} that held the most GPU-hours are shown one by one"
        + (f"; the other {r.others.teams:,} are summed." if r.others else ".")
        + (
            f" The page lists {PAGE_HOLDERS} of the {len(r.idle_holders):,} idle pods."
            if len(r.idle_holders) > PAGE_HOLDERS
            else ""
        ),
        "Only the window's data is counted: each step looks at the step before it, inside "
        "the window. Made by gpuctl report.",
    ]
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return f"<footer><ol>{items}</ol></footer>"


def _unpriced(r: Report) -> str:
    models = sorted({m for t in r.every_team for m in t.unpriced})
    if not models:
        return ""
    shown = ", ".join(safe(m, NAME_CHARS) for m in models[:10])
    more = f" and {len(models) - 10} more" if len(models) > 10 else ""
    return f" No price for {shown}{more}: their teams' cost is shown as unpriced."


# ---------- charts ----------


def _charts(r: Report) -> tuple[str, str]:
    import matplotlib

    with matplotlib.rc_context(
        {
            "text.parse_math": False,  # "$x$" in a team's name is text, not mathtext
            "text.usetex": False,
            "svg.fonttype": "none",  # text as <text>, in the page's font, not as paths
            "svg.hashsalt": "gpuctl-report",  # the same report gives the same page
            "font.family": "sans-serif",
            "font.size": 12,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    ):
        return _cluster_chart(r), _teams_chart(r)


def _svg(figure: Any) -> str:
    buf = io.StringIO()
    figure.savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.index("<svg") :]  # inline: no XML prologue or DOCTYPE


def downsampled(values: Sequence[float], points: int = CHART_POINTS) -> list[float]:
    """VALUES as at most POINTS means of consecutive runs (a line drawn 1,300 px wide needs
    no more)."""
    if len(values) <= points:
        return list(values)
    size = math.ceil(len(values) / points)
    return [
        sum(values[i : i + size]) / len(values[i : i + size]) for i in range(0, len(values), size)
    ]


def _cluster_chart(r: Report) -> str:
    from matplotlib import dates
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 3.8), layout="constrained")
    ax = fig.subplots()
    when = [dates.date2num(datetime.fromtimestamp(t, timezone.utc)) for t in r.times]
    x = downsampled(when)
    gpus, held, busy_ = (downsampled(v) for v in (r.cluster_gpus, r.cluster_held, r.cluster_busy))
    if x:
        ax.fill_between(x, held, color=HELD, linewidth=0, label="held by teams")
        ax.fill_between(x, busy_, color=BUSY, linewidth=0, label="busy")
        ax.plot(x, gpus, color=GPUS, linewidth=1.6, label="GPUs in the cluster")
    start, end = (datetime.fromtimestamp(t, timezone.utc) for t in (r.start, r.end))
    ax.set_xlim(dates.date2num(start), dates.date2num(end))  # the window, nothing before
    ax.set_ylim(bottom=0, top=max(gpus, default=0) * 1.15 or 1)
    ax.set_ylabel("GPUs")
    locator = dates.AutoDateLocator(maxticks=12)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator))
    ax.grid(axis="y", color="#e3e7ec")
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1), ncols=3, frameon=False)
    return _svg(fig)


def _teams_chart(r: Report) -> str:
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    shown = sorted(r.teams, key=_by_idle)[:CHART_TEAMS]
    fig = Figure(figsize=(14, 1.2 + 0.42 * max(1, len(shown))), layout="constrained")
    ax = fig.subplots()
    y = list(range(len(shown)))
    held = [t.held_gpu_hours for t in shown]
    idle = [min(t.idle_held_gpu_hours, t.held_gpu_hours) for t in shown]
    ax.barh(y, held, color=HELD, height=0.7)
    ax.barh(y, [t.busy_gpu_hours for t in shown], color=BUSY, height=0.7)
    # the idle hours at the end of each bar: busy and idle hours apart, however long each
    ax.barh(y, idle, left=[h - i for h, i in zip(held, idle)], color=IDLE, height=0.7)
    ax.set_yticks(y, [safe(t.team, NAME_CHARS) for t in shown])
    ax.invert_yaxis()
    top = max(held, default=0) or 1
    for yi, t in zip(y, shown):
        idle_h = _hours(t.idle_held_gpu_hours)
        label = (
            "no idle hours"
            if idle_h == "0.0"
            else f"{idle_h} h idle · {money(t.idle_cost, r.currency)}"
        )
        ax.text(t.held_gpu_hours + top * 0.01, yi, label, va="center", fontsize=11)
    ax.set_xlim(0, top * 1.3)
    ax.set_xlabel("GPU-hours")
    ax.grid(axis="x", color="#e3e7ec")
    handles = [Patch(color=BUSY), Patch(color=HELD), Patch(color=IDLE)]
    labels = ["busy (work done)", "held, not busy", "held while idle"]
    ax.legend(handles, labels, loc="lower left", bbox_to_anchor=(0, 1), ncols=3, frameon=False)
    return _svg(fig)
