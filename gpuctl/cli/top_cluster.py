"""`gpuctl top --prometheus URL`: the cluster-wide GPU view from DCGM-exporter metrics."""

from __future__ import annotations

import os
import time

from gpuctl.cli.output import dump, echo, out_console
from gpuctl.core import cluster_usage as usage
from gpuctl.errors import BackendError, UsageError

BAR_WIDTH = 10
LIVE_NAMESPACES = 5
PIPE_WIDTH = 200


def run(url: str, *, delay: float, once: bool, output: str, window: str,
        idle_threshold: float) -> None:
    if not 0 <= idle_threshold <= 100:
        raise UsageError(f"--idle-threshold: {idle_threshold:g} is not a percentage (0 to 100)")
    queries = usage.queries(window)  # checks --window before anything is sent
    from gpuctl.adapters.prometheus import Prometheus

    client = Prometheus(url)
    frame = fetch(client, queries, idle_threshold)
    if output != "table":  # a document is one snapshot: json/yaml imply --once
        echo(dump(usage.frame_to_dict(frame), output))
        return
    console = out_console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = PIPE_WIDTH  # a pipe or a file gets whole rows, not 80-column folds
    if once:
        console.print(render(frame, window, idle_threshold))
        return
    _live(console, client, queries, frame, delay, window, idle_threshold)


def fetch(client, queries: usage.Queries, idle_threshold: float) -> usage.Frame:
    """One frame: three queries evaluated at the same instant, then pure aggregation."""
    current, attributes, means = client.query_all(
        [queries.current, queries.attributes, queries.window_util], at=time.time())
    if not current:
        raise BackendError(f"no DCGM-exporter metrics in Prometheus at {client.url} "
                           f"(no {usage.UTIL} or other DCGM_FI_* series in the last 5 minutes)",
                           hint="deploy dcgm-exporter (the NVIDIA GPU Operator does) and make "
                                "sure this Prometheus scrapes it")
    return usage.build_frame(current, attributes, means, idle_threshold)


def _live(console, client, queries, frame, delay, window, idle_threshold) -> None:
    from rich.live import Live

    error = None
    try:
        with Live(console=console, screen=True, auto_refresh=False) as live:
            while True:
                rows = max(5, console.size.height - 14 - min(len(frame.namespaces), LIVE_NAMESPACES))
                live.update(render(frame, window, idle_threshold, max_rows=rows, error=error),
                            refresh=True)
                time.sleep(delay)
                try:
                    frame, error = fetch(client, queries, idle_threshold), None
                except BackendError as e:  # keep the last frame and say why it is stale
                    error = e.message
    except KeyboardInterrupt:
        pass


def _pct(value) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _bar(fraction, label: str, style: str):
    from rich.text import Text

    if fraction is None:
        return Text(label, style="dim")
    filled = round(max(0.0, min(1.0, fraction)) * BAR_WIDTH)
    return Text.assemble(("█" * filled, style), ("░" * (BAR_WIDTH - filled), "dim"), " " + label)


def _util_style(pct) -> str:
    return "red" if pct >= 90 else "yellow" if pct >= 50 else "green"


def _gib(mib) -> str:
    return f"{mib / 1024:.1f}"


def _model(name) -> str:
    return "-" if not name else name.removeprefix("NVIDIA ")


def _state(row: usage.GpuRow):
    from rich.text import Text

    if row.idle is None:
        return Text("?", "dim")
    if row.idle_allocated:
        return Text("IDLE, held", "bold red")
    return Text("idle", "yellow") if row.idle else Text("")


def gpu_table(rows: list, window: str, total: int):
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False, expand=False,
                  title_justify="left")
    for name, kw in (("NODE", {}), ("GPU", {"justify": "right"}), ("MODEL", {}),
                     ("UTIL", {}), (f"MEAN {window}", {"justify": "right"}),
                     ("MEMORY GiB", {}), ("TEMP", {"justify": "right"}),
                     ("POWER", {"justify": "right"}), ("NAMESPACE/POD", {"overflow": "fold"}),
                     ("STATE", {})):
        table.add_column(name, no_wrap=name != "NAMESPACE/POD", **kw)
    for i, r in enumerate(rows):
        first = i == 0 or rows[i - 1].node != r.node
        last = i == len(rows) - 1 or rows[i + 1].node != r.node
        util = r.utilization_gpu
        mem = (None if r.memory_used_mib is None or not r.memory_total_mib
               else r.memory_used_mib / r.memory_total_mib)
        mem_label = ("-" if r.memory_used_mib is None else
                     f"{_gib(r.memory_used_mib)}/{_gib(r.memory_total_mib)}"
                     if r.memory_total_mib else _gib(r.memory_used_mib))
        holder = "-" if not r.allocated else f"{r.namespace or '-'}/{r.pod}"
        table.add_row(
            r.node if first else "", r.gpu, _model(r.model),
            _bar(None if util is None else util / 100, _pct(util).rjust(4),
                 _util_style(util or 0)),
            _pct(r.mean_utilization),
            _bar(mem, mem_label, "cyan"),
            "-" if r.temperature_c is None else f"{r.temperature_c:.0f}C",
            "-" if r.power_w is None else f"{r.power_w:.0f}W",
            holder, _state(r), end_section=last)
    if total > len(rows):
        table.caption = f"… {total - len(rows)} more GPUs not shown (widen the terminal, or use --once)"
    return table


def namespace_table(namespaces: list, limit=None):
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("NAMESPACE", "GPUS HELD", "MEAN UTIL", "IDLE"):
        table.add_column(name, justify="left" if name == "NAMESPACE" else "right")
    shown = namespaces if limit is None else namespaces[:limit]
    for n in shown:
        table.add_row(n.namespace, str(n.gpus), _pct(n.mean_utilization),
                      Text(str(n.idle_gpus), "bold red" if n.idle_gpus else ""))
    if len(shown) < len(namespaces):
        table.caption = f"… {len(namespaces) - len(shown)} more namespaces"
    return table


def summary_text(s: usage.ClusterSummary, window: str, idle_threshold: float):
    from rich.text import Text

    text = Text.assemble(
        ("Cluster ", "bold"), f"{s.gpus} GPUs · mean utilization {_pct(s.mean_utilization)} over {window} · ",
        (f"{s.idle_gpus} idle", "yellow" if s.idle_gpus else ""), f" (< {idle_threshold:g}%) · ",
        (f"{s.idle_allocated_gpus} idle but held by a pod", "bold red" if s.idle_allocated_gpus else ""))
    if s.busiest is not None:
        text.append(f"\nBusiest node {s.busiest.node} ({_pct(s.busiest.mean_utilization)}) · "
                    f"idlest node {s.idlest.node} ({_pct(s.idlest.mean_utilization)})")
    return text


def render(frame: usage.Frame, window: str, idle_threshold: float, max_rows=None, error=None):
    from rich.console import Group
    from rich.text import Text

    parts = []
    if error:
        parts.append(Text(f"stale: {error}", style="bold red"))
    parts.append(summary_text(frame.summary, window, idle_threshold))
    rows = frame.rows if max_rows is None else frame.rows[:max_rows]
    parts += [Text(""), gpu_table(rows, window, len(frame.rows))]
    if frame.namespaces:
        limit = None if max_rows is None else LIVE_NAMESPACES
        parts += [Text(""), namespace_table(frame.namespaces, limit)]
    return Group(*parts)
