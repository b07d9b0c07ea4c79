"""`gpuctl top` on this node: NVML samples (real or simulated) shown as rich tables."""

from __future__ import annotations

import os
import socket
import sys
import time

from gpuctl.core import topframe

_STYLES = {topframe.IDLE: "blue", topframe.OK: "green", topframe.WARN: "yellow",
           topframe.CRIT: "bold red", topframe.NONE: "dim"}


def run(simulate: str | None, *, delay: float = 2.0, once: bool = False, output: str = "table",
        sort: str = "index") -> None:
    from gpuctl.adapters.nvml import Nvml
    from gpuctl.errors import UsageError

    if sort not in topframe.SORT_KEYS:
        raise UsageError(f"unknown --sort key {sort!r}", hint="use one of: " + ", ".join(topframe.SORT_KEYS))
    with Nvml(simulate) as nvml:
        if output != "table":
            from gpuctl.cli.output import dump, echo
            from gpuctl.core.gpusample import to_dict

            echo(dump(to_dict(nvml.sample()), output))
            return
        from rich.console import Console

        console = Console()
        if once or not console.is_terminal:
            console.print(render(nvml.sample(), sort=sort, width=console.width))
            return
        _live(console, nvml, delay, sort)


def render(sample, *, sort: str = "index", width: int = 80):
    """The rich renderable of one frame; a terminal of 110+ columns also gets fan and clocks."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    wide = width >= 110
    bar_width = 10 if wide else 6
    frame = topframe.build_frame(sample, sort=sort, bar_width=bar_width, host=socket.gethostname(),
                                 time_text=time.strftime("%Y-%m-%d %H:%M:%S"))

    def cell(c: topframe.Cell) -> Text:
        return Text(c.text, style=_STYLES[c.level])

    def bar_cell(b: topframe.Cell, c: topframe.Cell) -> Text:
        return Text.assemble((b.text, _STYLES[b.level]), " ", (c.text, _STYLES[c.level]))

    def table(*columns, **kw) -> Table:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1), **kw)
        for name, justify in columns:
            t.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis")
        return t

    columns = [("GPU", "right"), ("NAME", "left"), ("MIG", "left"), ("UTIL", "left"),
               ("MEMORY", "left"), ("TEMP", "right"), ("POWER W", "right")]
    if wide:
        columns += [("FAN", "right"), ("CLOCK SM/MEM", "right")]
    gpus = table(*columns, title=frame.header, title_justify="left", caption=frame.summary,
                 caption_justify="left")
    for r in frame.gpus:
        row = [str(r.index), cell(r.name), cell(r.mig), bar_cell(r.util_bar, r.util),
               bar_cell(r.memory_bar, r.memory), cell(r.temp), cell(r.power)]
        if wide:
            row += [cell(r.fan), cell(r.clocks)]
        gpus.add_row(*row)
        for m in r.mig_rows:
            row = ["", Text.assemble(("└ ", "dim"), (m.label, "cyan"), " ", (m.profile.text, "cyan")),
                   Text(f"@{m.placement.text}", style=_STYLES[m.placement.level]),
                   Text(f"{m.processes} proc" if m.processes else "idle",
                        style="green" if m.processes else "blue"),
                   bar_cell(m.memory_bar, m.memory), "", ""]
            gpus.add_row(*row + ([""] * 2 if wide else []))
    procs = table(("GPU", "right"), ("PID", "right"), ("USER", "left"), ("GPU MEM", "right"),
                  ("PROCESS", "left"))
    for p in frame.processes:
        procs.add_row(p.gpu, str(p.pid), p.user, cell(p.memory), p.name)
    if not frame.processes:
        procs.add_row("", "", Text("no processes on any GPU", style="dim"), "", "")
    return Group(gpus, Text(""), procs)


def _live(console, nvml, delay: float, sort: str) -> None:
    from rich.live import Live

    keys = _Keys()
    try:
        with keys, Live(render(nvml.sample(), sort=sort, width=console.width), console=console, screen=True,
                        auto_refresh=False) as live:
            while not keys.quit_within(delay):
                live.update(render(nvml.sample(), sort=sort, width=console.width), refresh=True)
    except KeyboardInterrupt:
        pass


class _Keys:
    """Watches stdin for `q` while waiting between frames (terminal in cbreak mode)."""

    def __init__(self):
        self._fd = sys.stdin.fileno() if sys.stdin.isatty() else None
        self._saved = None

    def __enter__(self):
        if self._fd is not None:
            import termios
            import tty

            self._saved = termios.tcgetattr(self._fd)
            tty.setcbreak(self._fd)
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)

    def quit_within(self, seconds: float) -> bool:
        if self._fd is None:
            time.sleep(seconds)
            return False
        import select

        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._fd], [], [], left)
            if ready and os.read(self._fd, 1) in (b"q", b"Q"):
                return True
        return False
