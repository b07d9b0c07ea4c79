"""One frame of `gpuctl top` on a node: a NodeSample turned into sorted display rows with
text, bars and a level per cell (the CLI maps levels to colours). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpuctl.gpus.sample import GpuSample, NodeSample

NA = "N/A"
SORT_KEYS = ("index", "util", "memory", "temp", "power")

# Levels, mapped to colours by the CLI.
IDLE, OK, WARN, CRIT, NONE = "idle", "ok", "warn", "crit", "na"

IDLE_UTIL = 5  # % below which a GPU (or MIG device with no processes) counts as sleeping
WARN_MEMORY, CRIT_MEMORY = 70, 90  # % of memory used
WARN_TEMP, CRIT_TEMP = 75, 85  # degrees C
WARN_POWER = 90  # % of the power limit


@dataclass(frozen=True)
class Cell:
    text: str
    level: str = OK


@dataclass(frozen=True)
class MigRow:
    label: str  # "1/0": GPU instance 1, compute instance 0
    profile: Cell
    placement: Cell
    memory: Cell
    memory_bar: Cell
    processes: int


@dataclass(frozen=True)
class NodeGpuRow:
    index: int
    name: Cell
    mig: Cell
    util: Cell
    util_bar: Cell
    memory: Cell
    memory_bar: Cell
    temp: Cell
    power: Cell
    fan: Cell
    clocks: Cell
    mig_rows: list[MigRow] = field(default_factory=list)


@dataclass(frozen=True)
class ProcessRow:
    gpu: str  # "0", or "0:1/0" for GPU 0, GI 1, CI 0
    pid: int
    user: str
    memory: Cell
    name: str


@dataclass(frozen=True)
class NodeFrame:
    header: str
    gpus: list[NodeGpuRow]
    processes: list[ProcessRow]
    summary: str


def bar(fraction: float | None, width: int) -> str:
    """A text bar: eighths of a block give a smooth edge; None gives an empty track."""
    if fraction is None:
        return "·" * width
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (" ▏▎▍▌▋▊▉"[part] if part and full < width else "")
    return text + " " * (width - len(text))


def _pct(used: float | None, total: float | None) -> float | None:
    if used is None or not total:
        return None
    return 100.0 * used / total


def _mem_text(used: float | None, total: float | None) -> str:
    if used is None or total is None:
        return NA
    return f"{used / 1024:.1f}/{total / 1024:.1f}G"


def short_name(name: str | None) -> str:
    """`NVIDIA H100 80GB HBM3` -> `H100 80GB HBM3`: the vendor says nothing in this table."""
    if not name:
        return NA
    return name[7:] if name.startswith("NVIDIA ") else name


def _mem_level(pct: float | None) -> str:
    if pct is None:
        return NONE
    return CRIT if pct >= CRIT_MEMORY else WARN if pct >= WARN_MEMORY else OK


def _util_level(util: int | None) -> str:
    if util is None:
        return NONE
    return IDLE if util < IDLE_UTIL else OK


def _gpu_row(g: GpuSample, bar_width: int) -> NodeGpuRow:
    mem_pct = _pct(g.memory_used_mib, g.memory_total_mib)
    if g.mig_mode is None:
        mig = Cell(NA, NONE)
    else:
        mig = Cell("On" if g.mig_mode else "Off")
        if g.mig_mode_pending is not None and g.mig_mode_pending != g.mig_mode:
            mig = Cell(mig.text + ("→On" if g.mig_mode_pending else "→Off") + "*", WARN)
    if g.temperature_c is None:
        temp = Cell(NA, NONE)
    else:
        t = g.temperature_c
        temp = Cell(f"{t}C", CRIT if t >= CRIT_TEMP else WARN if t >= WARN_TEMP else OK)
    if g.power_w is None:
        power = Cell(NA, NONE)
    else:
        limit = f"{g.power_limit_w:.0f}W" if g.power_limit_w is not None else NA
        level = WARN if g.power_limit_w and 100 * g.power_w / g.power_limit_w >= WARN_POWER else OK
        power = Cell(f"{g.power_w:.0f}/{limit}", level)
    util_text = f"{g.utilization_gpu}%" if g.utilization_gpu is not None else NA
    clocks = (
        f"{g.clock_sm_mhz}/{g.clock_mem_mhz} MHz"
        if g.clock_sm_mhz is not None and g.clock_mem_mhz is not None
        else NA
    )
    mig_rows = []
    for m in g.mig_devices:
        m_pct = _pct(m.memory_used_mib, m.memory_total_mib)
        n_procs = sum(1 for p in g.processes if p.gi_id == m.gi_id and p.ci_id == m.ci_id)
        placement = (
            f"{m.placement_start}:{m.placement_size}"
            if m.placement_start is not None and m.placement_size is not None
            else NA
        )
        mig_rows.append(
            MigRow(
                label=f"{m.gi_id}/{m.ci_id}",
                profile=Cell(m.profile or NA, OK if m.profile else NONE),
                placement=Cell(placement, OK if placement != NA else NONE),
                memory=Cell(_mem_text(m.memory_used_mib, m.memory_total_mib), _mem_level(m_pct)),
                memory_bar=Cell(
                    bar(None if m_pct is None else m_pct / 100, bar_width), _mem_level(m_pct)
                ),
                processes=n_procs,
            )
        )
    return NodeGpuRow(
        index=g.index,
        name=Cell(short_name(g.name), OK if g.name else NONE),
        mig=mig,
        util=Cell(util_text, _util_level(g.utilization_gpu)),
        util_bar=Cell(
            bar(None if g.utilization_gpu is None else g.utilization_gpu / 100, bar_width),
            _util_level(g.utilization_gpu),
        ),
        memory=Cell(_mem_text(g.memory_used_mib, g.memory_total_mib), _mem_level(mem_pct)),
        memory_bar=Cell(
            bar(None if mem_pct is None else mem_pct / 100, bar_width), _mem_level(mem_pct)
        ),
        temp=temp,
        power=power,
        fan=Cell(
            f"{g.fan_percent}%" if g.fan_percent is not None else NA,
            OK if g.fan_percent is not None else NONE,
        ),
        clocks=Cell(clocks, OK if clocks != NA else NONE),
        mig_rows=mig_rows,
    )


def _sort_key(sort: str) -> Callable[[GpuSample], tuple[float, ...]]:
    def value(g: GpuSample) -> float | None:
        v: float | None = {
            "index": g.index,
            "util": g.utilization_gpu,
            "memory": _pct(g.memory_used_mib, g.memory_total_mib),
            "temp": g.temperature_c,
            "power": g.power_w,
        }[sort]
        return v

    def highest_first(g: GpuSample) -> tuple[float, ...]:
        v = value(g)  # GPUs without the reading last, then by index
        return (1, 0, g.index) if v is None else (0, -v, g.index)

    if sort == "index":
        return lambda g: (0, g.index)
    return highest_first


def build_frame(
    sample: NodeSample,
    *,
    sort: str = "index",
    bar_width: int = 12,
    host: str = "",
    time_text: str = "",
) -> NodeFrame:
    if sort not in SORT_KEYS:
        raise ValueError(f"unknown sort key {sort!r}")
    gpus = sorted(sample.gpus, key=_sort_key(sort))
    rows = [_gpu_row(g, bar_width) for g in gpus]
    procs = []
    for g in gpus:
        for p in sorted(g.processes, key=lambda p: (-(p.used_memory_mib or 0), p.pid)):
            where = str(g.index) if p.gi_id is None else f"{g.index}:{p.gi_id}/{p.ci_id}"
            procs.append(
                ProcessRow(
                    gpu=where,
                    pid=p.pid,
                    user=p.user or NA,
                    memory=Cell(
                        f"{p.used_memory_mib:,} MiB" if p.used_memory_mib is not None else NA,
                        OK if p.used_memory_mib is not None else NONE,
                    ),
                    name=p.name or NA,
                )
            )
    busy = sum(1 for g in sample.gpus if g.processes)
    idle = sum(1 for g in sample.gpus if not g.processes and (g.utilization_gpu or 0) < IDLE_UTIL)
    parts = [
        host,
        "simulated node" if sample.simulated else "",
        f"driver {sample.driver_version}" if sample.driver_version else "",
        time_text,
    ]
    header = "  ".join(p for p in parts if p)
    summary = (
        f"{len(sample.gpus)} GPUs: {busy} busy, {idle} idle; {len(procs)} processes.  "
        "* MIG mode change pending a GPU reset"
    )
    if not any(r.mig.level == WARN for r in rows):
        summary = summary.partition(".  *")[0]
    return NodeFrame(header=header, gpus=rows, processes=procs, summary=summary)
