"""The node view's frame: one NVML sample (real or simulated) as aligned rich text."""

from __future__ import annotations

import socket
import time

from gpuctl.top.node.core import frame as topframe

_STYLES = {
    topframe.IDLE: "blue",
    topframe.OK: "green",
    topframe.WARN: "yellow",
    topframe.CRIT: "bold red",
    topframe.NONE: "dim",
}


def render(sample, *, sort: str = "index", width: int = 80, view=None, height=None):
    """The rich renderable of one frame; a terminal of 110+ columns also gets fan and clocks.
    Columns give way in this order as the terminal narrows: fan and clocks (under 110),
    then the bars (under 80); figures are never cut. The live view passes its VIEW (keys:
    help, filter) and the terminal's HEIGHT: the process table that does not fit is
    replaced by a line that says so.

    Columns are aligned here and the frame is one styled Text: rich's Table layout costs
    several times the NVML sampling per refresh."""
    from rich.text import Text

    from gpuctl.common.keys import matches
    from gpuctl.top.node.core.keys import KEYS

    wide = width >= 110
    frame = topframe.build_frame(
        sample,
        sort=sort,
        bar_width=10 if wide else 6 if width >= 80 else 0,
        host=socket.gethostname(),
        time_text=time.strftime("%Y-%m-%d %H:%M:%S"),
    )
    if view is not None and view.help:
        help_text = Text(no_wrap=True, overflow="ellipsis", end="")
        help_text.append(frame.header + "\n\n", style="bold")
        help_text.append(KEYS.help().replace(" · ", "\n") + "\n")
        return help_text
    wanted = view.filter if view is not None else ""
    gpus = [r for r in frame.gpus if matches(f"{r.index} {r.name.text}", wanted)]
    processes = [p for p in frame.processes if matches(f"{p.gpu} {p.user} {p.name}", wanted)]

    def cell(c: topframe.Cell):
        return (c.text, _STYLES[c.level])

    def bar(b: topframe.Cell, c: topframe.Cell):
        text = f"{b.text} {c.text}" if b.text else c.text
        return (text, _STYLES[c.level]), len(b.text) + 1

    gpu_head = ["GPU", "NAME", "MIG", "UTIL", "MEMORY", "TEMP", "POWER W"] + (
        ["FAN", "CLOCK SM/MEM"] if wide else []
    )
    gpu_right = {0, 5, 6, 7, 8}
    rows = []
    for r in gpus:
        row = [
            (str(r.index), ""),
            cell(r.name),
            cell(r.mig),
            bar(r.util_bar, r.util)[0],
            bar(r.memory_bar, r.memory)[0],
            cell(r.temp),
            cell(r.power),
        ]
        rows.append(row + ([cell(r.fan), cell(r.clocks)] if wide else []))
        for m in r.mig_rows:
            row = [
                ("", ""),
                (f"└ {m.label} {m.profile.text}", "cyan"),
                (f"@{m.placement.text}", _STYLES[m.placement.level]),
                (
                    f"{m.processes} proc" if m.processes else "idle",
                    "green" if m.processes else "blue",
                ),
                bar(m.memory_bar, m.memory)[0],
                ("", ""),
                ("", ""),
            ]
            rows.append(row + ([("", ""), ("", "")] if wide else []))
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append(frame.header + "\n", style="bold")
    if view is not None:
        status = f"sort: {view.sort}"
        if view.typing or view.filter:
            status += f" · filter: {view.filter}" + ("▏" if view.typing else "")
        text.append(status + " · ? help · q quit\n", style="dim")
    _table(text, gpu_head, gpu_right, rows)
    text.append(frame.summary + "\n\n", style="dim")
    procs = [
        [(p.gpu, ""), (str(p.pid), ""), (p.user, ""), cell(p.memory), (p.name, "")]
        for p in processes
    ]
    if not procs:
        procs = [[("", ""), ("", ""), ("no processes on any GPU", "dim"), ("", ""), ("", "")]]
    need = text.plain.count("\n") + 2 + len(procs)
    if height is not None and need > height:
        text.append(
            f"processes hidden: the terminal has {height} rows, they need {need}\n", style="yellow"
        )
        return text
    _table(text, ["GPU", "PID", "USER", "GPU MEM", "PROCESS"], {0, 1, 3}, procs)
    return text


def _table(text, head: list[str], right: set[int], rows: list[list[tuple[str, str]]]) -> None:
    """Append aligned columns (two spaces apart) under a bold header and a rule."""
    widths = [max([len(h)] + [len(r[i][0]) for r in rows]) for i, h in enumerate(head)]

    def line(cells):
        for i, (value, style) in enumerate(cells):
            pad = " " * (widths[i] - len(value))
            if i:
                text.append("  ")
            text.append(pad + value if i in right else value + pad, style=style or None)
        text.append("\n")

    line([(h, "bold") for h in head])
    text.append("─" * (sum(widths) + 2 * (len(widths) - 1)) + "\n", style="dim")
    for r in rows:
        line(r)
