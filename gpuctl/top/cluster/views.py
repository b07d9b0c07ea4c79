"""The cluster view's output: the terminal frame (rich), the same as plain text for a file
or a pipe, the live screen's layout, and the streamed `-o json` document."""

from __future__ import annotations

import functools
import json

from gpuctl.cli.output import finite
from gpuctl.gpus.identity import GpuCount
from gpuctl.top.cluster import service as cluster
from gpuctl.top.cluster.core import usage

BAR_WIDTH = 10
LIVE_NAMESPACES = 5
CHROME_LINES = 15  # lines besides GPU rows: summary, status, stale line, headers, captions, blanks


def live_rows(height: int, last: usage.ClusterFrame | None) -> int:
    """The GPU rows a live screen `height` lines tall has room for, below the namespaces
    the last frame showed (as many as can be, before the first)."""
    namespaces = LIVE_NAMESPACES if last is None else min(len(last.namespaces), LIVE_NAMESPACES)
    return max(5, height - CHROME_LINES - namespaces)


def live_render(screen: cluster.Screen, view, window: str, idle_threshold: float, delay: float):
    """A live screen in the view's state (gpuctl.common.keys.View: its help, or its sort
    and filter on a status line); the figures' age is said once over two refreshes old."""
    from rich.text import Text

    from gpuctl.top.cluster.core.keys import KEYS

    if view.help:
        return Text(KEYS.help().replace(" · ", "\n") + "\n")
    status = f"sort: {view.sort}"
    if view.typing or view.filter:
        status += f" · filter: {_safe(view.filter)}" + ("▏" if view.typing else "")
        if screen.frame.matched is not None and not view.typing:
            status += f" ({_count(screen.frame.matched, 'match')})"
    if screen.frame.others_left_out:
        status += " · NVIDIA GPUs only: other vendors' devices are in --once"
    return render(
        screen.frame,
        window,
        idle_threshold,
        max_rows=screen.rows,
        error=screen.error,
        age=screen.age if screen.age > 2 * delay else None,
        status=status + " · ? help · q quit",
    )


def snapshot_json(client, window: str, idle_threshold: float, exporter, sort: str, out) -> int:
    """`--once -o json`: the snapshot (cluster.snapshot) written to `out`; the GPUs written.
    The cyclic collector stays paused until the frame is gone: resumed with the frame's
    ~10^5 objects alive, its next pass would scan them all (a tenth of the command)."""
    with cluster.cyclic_gc_paused():
        frame = cluster.snapshot(client, window, idle_threshold, exporter, sort)
        write_json(frame, out)
        gpus = len(frame.rows)
        del frame
    return gpus


def write_json(frame: usage.ClusterFrame, out, batch: int = 500) -> None:
    """The `-o json` document, written a GPU per line, a batch of GPUs at a time rather than
    built whole: at 40,000 GPUs the text alone is tens of megabytes."""
    import msgspec

    doc = usage.frame_to_dict(usage.ClusterFrame([], frame.namespaces, frame.summary))
    out.write('{\n  "gpus": [')
    encode = msgspec.json.Encoder(enc_hook=str).encode  # C; a reading that overflowed: null
    gpu = _gpu_struct()
    for start in range(0, len(frame.rows), batch):
        rows = usage.gpus_out(frame.rows[start : start + batch], gpu)
        # One C-encoded list per batch, cut into lines where one GPU ends and the next
        # begins: `},{"node":` cannot occur inside a JSON string (its quote would be \").
        text = encode(rows).decode()[1:-1].replace('},{"node":', '},\n    {"node":')
        out.write(("\n    " if start == 0 else ",\n    ") + text)
    out.write("\n  ]," if frame.rows else "],")
    doc["mig_gpus"] = usage.mig_gpus_out(frame.rows)
    for key in ("mig_gpus", "namespaces", "summary"):
        text = _json(doc[key], indent=2).replace("\n", "\n  ")
        out.write(f'\n  "{key}": {text}' + ("," if key != "summary" else "\n}\n"))
    out.flush()


@functools.cache
def _gpu_struct():
    """One GPU of the document as a msgspec Struct: made and encoded (in C, its keys
    encoded once) at a third of the cost of a dict; fields in usage.GPU_FIELDS' order."""
    import msgspec

    return msgspec.defstruct("Gpu", usage.GPU_FIELDS, gc=False)  # acyclic


def _json(data, indent=None) -> str:
    try:
        return json.dumps(data, indent=indent, default=str, allow_nan=False)
    except ValueError:  # a reading overflowed: null, as in every -o json
        return json.dumps(finite(data), indent=indent, default=str, allow_nan=False)


def _pct(value) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _bar(fraction, label: str, style: str) -> tuple:
    if fraction is None:
        return ((label, "dim"),)
    filled = round(max(0.0, min(1.0, fraction)) * BAR_WIDTH)
    return (("█" * filled, style), ("░" * (BAR_WIDTH - filled), "dim"), (" " + label, ""))


def _util_style(pct) -> str:
    return "red" if pct >= 90 else "yellow" if pct >= 50 else "green"


def _gib(mib) -> str:
    return f"{mib / 1024:.1f}"


def _safe(text: str) -> str:
    # Label values come from whatever the exporters sent: no terminal control sequences.
    return text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)


_VENDOR = {"amd": "AMD", "aws": "AWS", "google": "Google", "intel": "Intel"}


def _model(name, vendor: str = "nvidia") -> str:
    """The model column: NVIDIA's model as DCGM names it; another vendor's prefixed by it."""
    if vendor in _VENDOR:
        return _safe(f"{_VENDOR[vendor]} {name or '-'}")
    return "-" if not name else _safe(name.removeprefix("NVIDIA "))


def _holders(row: usage.ClusterGpuRow) -> str:
    if not row.holders:
        return "-"
    return _safe(", ".join(f"{h.namespace or '-'}/{h.pod}" for h in row.holders))


def _state(row: usage.ClusterGpuRow) -> tuple:
    if row.idle is None:
        return ("?", "dim")
    if row.idle_allocated:
        return ("IDLE, held", "bold red")
    return ("idle", "yellow") if row.idle else ("", "")


def gpu_columns(window: str) -> tuple:
    return (
        ("NODE", "left"),
        ("GPU", "right"),
        ("MODEL", "left"),
        ("UTIL", "left"),
        (f"MEAN {window}", "right"),
        ("MEMORY GiB", "left"),
        ("TEMP", "right"),
        ("POWER", "right"),
        ("NAMESPACE/POD", "left"),
        ("STATE", "left"),
    )


def with_boards(rows: list) -> list:
    """The rows with each GPU split into MIG devices (usage.MigGpu) before its first device:
    its temperature and power are shown there, once, not on its devices."""
    out: list = []
    seen: set[int] = set()
    for r in rows:
        if r.board is not None and id(r.board) not in seen:
            seen.add(id(r.board))
            out.append(r.board)
        out.append(r)
    return out


def fit(rows: list, lines: int) -> list:
    """The first rows that fit in `lines` with the lines of their MIG-split GPUs."""
    shown, boards = 0, set()
    for r in rows:
        new = r.board is not None and id(r.board) not in boards
        if shown + 1 + new > lines:
            break
        shown += 1 + new
        if new:
            boards.add(id(r.board))
    return rows[: shown - len(boards)]


def _readings(item) -> tuple:
    """TEMP and POWER cells: a GPU's; none on a MIG device (they are its GPU's)."""
    temp, power = item.temperature_c, item.power_w
    if isinstance(item, usage.ClusterGpuRow) and item.board is not None:
        return (("", ""),), (("", ""),)
    return (
        (("-" if temp is None else f"{temp:.0f}C", ""),),
        (("-" if power is None else f"{power:.0f}W", ""),),
    )


def gpu_cells(items: list) -> list:
    """Each row's cells as (text, style) segments, for a rich table or plain text alike;
    items: rows and the MIG-split GPUs (with_boards)."""
    out = []
    plain = lambda text: ((text, ""),)  # noqa: E731
    for i, r in enumerate(items):
        node = plain(_safe(r.node) if i == 0 or items[i - 1].node != r.node else "")
        temp, power = _readings(r)
        if isinstance(r, usage.MigGpu):
            model = f"{_model(r.model)} (MIG, {r.slices} slice{'s' * (r.slices != 1)})"
            out.append((node, plain(_safe(r.gpu)), plain(model), *[plain("")] * 3, temp, power,
                        plain(""), plain("")))  # fmt: skip
            continue
        util = r.utilization_gpu
        mem = (
            None
            if r.memory_used_mib is None or not r.memory_total_mib
            else r.memory_used_mib / r.memory_total_mib
        )
        mem_label = (
            "-"
            if r.memory_used_mib is None
            else f"{_gib(r.memory_used_mib)}/{_gib(r.memory_total_mib)}"
            if r.memory_total_mib
            else _gib(r.memory_used_mib)
        )
        out.append(
            (
                node,
                plain(_safe(r.gpu)),
                plain(_model(r.model, r.vendor)),
                _bar(
                    None if util is None else util / 100,
                    _pct(util).rjust(4),
                    _util_style(util or 0),
                ),
                plain(_pct(r.mean_utilization)),
                _bar(mem, mem_label, "cyan"),
                temp,
                power,
                plain(_holders(r)),
                (_state(r),),
            )
        )
    return out


def gpu_table(rows: list, window: str, total: int):
    from rich.text import Text

    from gpuctl.cli.output import new_table as Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for name, justify in gpu_columns(window):
        table.add_column(name, justify=justify, no_wrap=name != "NAMESPACE/POD", overflow="fold")
    items = with_boards(rows)
    for i, cells in enumerate(gpu_cells(items)):
        last = i == len(items) - 1 or items[i + 1].node != items[i].node
        table.add_row(*(Text.assemble(*c) for c in cells), end_section=last)
    if total > len(rows):
        table.caption = (
            f"… {total - len(rows)} more GPUs or MIG slices not shown (widen the terminal, or "
            "use --once)"
        )
    return table


def plain_table(columns, cells) -> str:
    """Aligned text with the rich table's layout: a file or a pipe gets the whole cluster
    without rich's per-cell cost (seconds for thousands of GPUs)."""
    texts = [["".join(t for t, _ in cell) for cell in row] for row in cells]
    widths = [
        max([len(name)] + [len(row[c]) for row in texts]) for c, (name, _) in enumerate(columns)
    ]

    def line(values) -> str:
        return "  ".join(
            v.rjust(w) if justify == "right" else v.ljust(w)
            for v, w, (_, justify) in zip(values, widths, columns)
        ).rstrip()

    return "\n".join([line([name for name, _ in columns])] + [line(t) for t in texts]) + "\n"


def namespace_columns(namespaces: list) -> tuple:
    """NAMESPACE, GPUS HELD, MEAN UTIL, IDLE; MIG slices apart where a namespace holds any."""
    names: tuple[str, ...] = ("NAMESPACE", "GPUS HELD", "MEAN UTIL", "IDLE")
    if any(n.mig_slices for n in namespaces):
        names = ("NAMESPACE", "GPUS HELD", "MIG SLICES HELD", "MEAN UTIL", "IDLE GPUS",
                 "IDLE MIG SLICES")  # fmt: skip
    return tuple((name, "left" if name == "NAMESPACE" else "right") for name in names)


def namespace_cells(namespaces: list, mig: bool) -> list:
    out = []
    for n in namespaces:
        idle = ((str(n.idle_gpus), "bold red" if n.idle_gpus else ""),)
        cells = [((_safe(n.namespace), ""),), ((str(n.gpus), ""),)]
        if mig:
            cells.append(((str(n.mig_slices), ""),))
        cells += [((_pct(n.mean_utilization), ""),), idle]
        if mig:
            cells.append(((str(n.idle_mig_slices), "bold red" if n.idle_mig_slices else ""),))
        out.append(cells)
    return out


def namespace_table(namespaces: list, limit=None):
    from rich.text import Text

    from gpuctl.cli.output import new_table as Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    columns = namespace_columns(namespaces)
    for name, justify in columns:
        table.add_column(name, justify=justify)
    shown = namespaces if limit is None else namespaces[:limit]
    for cells in namespace_cells(shown, len(columns) > 4):
        table.add_row(*(Text.assemble(*c) for c in cells))
    if len(shown) < len(namespaces):
        table.caption = f"… {len(namespaces) - len(shown)} more namespaces"
    return table


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("es" if what.endswith("ch") else "s") * (n != 1)


def _kinds(gpus: int, slices: int, s: usage.ClusterSummary) -> str:
    """`4` on a cluster without MIG (or for none), else `4 (3 GPUs, 1 MIG slice)`."""
    if not s.mig_slices or not gpus + slices:
        return str(gpus + slices)
    return f"{gpus + slices} ({_count(gpus, 'GPU')}, {_count(slices, 'MIG slice')})"


def summary_text(s: usage.ClusterSummary, window: str, idle_threshold: float, age=None):
    from rich.text import Text

    idle = s.idle_gpus + s.idle_mig_slices
    held = s.idle_allocated_gpus + s.idle_allocated_mig_slices
    text = Text.assemble(
        ("Cluster ", "bold"),
        f"{GpuCount(s.gpus, s.mig_gpus, s.mig_slices).text()} · mean utilization {_pct(s.mean_utilization)} over {window} "
        f"({_safe(s.signal)}) · ",
        (f"{_kinds(s.idle_gpus, s.idle_mig_slices, s)} idle", "yellow" if idle else ""),
        f" (< {idle_threshold:g}%) · ",
        (
            f"{_kinds(s.idle_allocated_gpus, s.idle_allocated_mig_slices, s)} idle but held by "
            "a pod",
            "bold red" if held else "",
        ),
    )
    if s.stranded_gpus is not None:
        text.append(
            f" · {s.stranded_gpus} stranded (free GPUs on nodes with fewer than "
            f"{s.request_shape} free; most pods hold {s.request_shape})",
            "bold red" if s.stranded_gpus else "",
        )
    if s.busiest is not None and s.idlest is not None:
        text.append(
            f"\nBusiest node {_safe(s.busiest.node)} ({_pct(s.busiest.mean_utilization)}) · "
            f"idlest node {_safe(s.idlest.node)} ({_pct(s.idlest.mean_utilization)})"
        )
    if age is not None:
        text.append(f" · cluster figures from {age:.0f} s ago", "dim")
    return text


def render_plain(frame: usage.ClusterFrame, window: str, idle_threshold: float) -> str:
    out = summary_text(frame.summary, window, idle_threshold).plain + "\n\n"
    out += plain_table(gpu_columns(window), gpu_cells(with_boards(frame.rows)))
    if frame.namespaces:
        columns = namespace_columns(frame.namespaces)
        cells = namespace_cells(frame.namespaces, len(columns) > 4)
        out += "\n" + plain_table(columns, cells)
    return out


def render(
    frame: usage.ClusterFrame,
    window: str,
    idle_threshold: float,
    max_rows=None,
    error=None,
    age=None,
    status=None,
):
    """A frame for the terminal; `age`: how old its cluster figures are, if worth saying;
    `status`: the live view's line (sort, filter, keys)."""
    from rich.console import Group
    from rich.text import Text

    parts = []
    if error:
        parts.append(Text(f"stale: {error}", style="bold red"))
    parts.append(summary_text(frame.summary, window, idle_threshold, age))
    if status:
        parts.append(Text(status, style="dim"))
    rows = frame.rows if max_rows is None else fit(frame.rows, max_rows)
    total = frame.summary.devices if frame.matched is None else frame.matched
    parts += [Text(""), gpu_table(rows, window, max(total, len(frame.rows)))]
    if frame.namespaces:
        limit = None if max_rows is None else LIVE_NAMESPACES
        parts += [Text(""), namespace_table(frame.namespaces, limit)]
    return Group(*parts)
