"""`gpuctl report`: the window's range queries, chunk by chunk, folded into a showback
Report. The price table is the shipped one (gpuctl/data/gpu_hour_prices.json) or the
user's file."""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from importlib import resources

from gpuctl.adapters.prometheus import QueryTooLong
from gpuctl.common.errors import BackendError, UsageError
from gpuctl.common.specfile import Doc, load_yaml_file
from gpuctl.dcgm.holders import Exporter
from gpuctl.dcgm.promql import duration_seconds
from gpuctl.report.core import queries as q
from gpuctl.report.core import showback

PRICE_TABLE = "gpu_hour_prices.json"
TEAMS = 20  # teams shown one by one (--teams); the rest are summed as "others"
MAX_TEAMS = 1000  # keeps the HTML page under 1 MB (docs/report.md)
MAX_STEPS = 1_000_000
# What one query should take: the window's chunks are sized to it. A quarter of Prometheus's
# default --query.timeout and of RANGE_TIMEOUT; not less, as a query costs seconds however few
# its steps (10,000 teams on a busy server: 10 s for one step, 30 s for 25) and chunks sized
# to near that cost shrink to a step or two each, several times the work in all
CHUNK_S = 30.0
RANGE_TIMEOUT = 120.0  # a week of a large cluster's series takes Prometheus seconds per chunk


@dataclass(frozen=True)
class Request:
    window: str = "7d"
    step: str = "5m"
    idle_threshold: float = 5.0
    by: q.Grouping = q.Grouping()
    top: int = 10
    teams: int = TEAMS
    end: float | None = None  # default: Prometheus's clock now
    sample_budget: int = q.SAMPLE_BUDGET  # points one range query may hold (queries.max_steps)
    chunk_s: float = CHUNK_S  # what one range query should take


def prices(path: str | None) -> tuple[dict[str, float], str]:
    """The price per GPU-hour by model name, and the currency: the user's file (JSON or
    YAML, read as every gpuctl input is: `{currency: USD, prices: {H100: 12.3, ...}}` or
    the mapping alone) or the table gpuctl ships."""
    if path is None:
        text = resources.files("gpuctl.data").joinpath(PRICE_TABLE).read_text("utf-8")
        doc = Doc(json.loads(text), PRICE_TABLE)
    else:
        doc = load_yaml_file(path)
    data = doc.data
    nested = isinstance(data, dict) and isinstance(data.get("prices"), dict)
    where: tuple[str, ...] = ("prices",) if nested else ()
    table = data.get("prices") if nested else data
    currency = data.get("currency", "USD") if isinstance(data, dict) else "USD"
    if not isinstance(table, dict) or not table:
        raise doc.error(where, "expected a mapping of GPU model to price per GPU-hour")
    if not isinstance(currency, str) or not currency.isprintable() or len(currency) > 12:
        raise doc.error(("currency",), f"{currency!r} is not a currency, e.g. USD")
    out = {}
    for model, price in table.items():
        if model == "currency":
            continue
        number = isinstance(price, (int, float)) and not isinstance(price, bool)
        if not number or not math.isfinite(price) or price < 0:
            raise doc.error((*where, model), f"{price!r} is not a price per GPU-hour")
        out[str(model)] = float(price)
    return out, currency


# --end: from the epoch to the last second datetime can name (year 9999)
LATEST_END = 253402300799


def end_time(text: str) -> float:
    """--end: Unix seconds or an RFC 3339 time (UTC unless it says otherwise)."""
    from gpuctl.k8s.times import any_seconds

    when = float(text) if re.fullmatch(r"\d+(\.\d+)?", text) else any_seconds(text)
    if when is None:
        raise UsageError(
            f"--end: {text!r} is not a time (Unix seconds or RFC 3339, e.g. 2026-12-01T00:00:00Z)"
        )
    if not 0 <= when <= LATEST_END:
        raise UsageError(f"--end: {text!r} is not between 1970 and the year 9999")
    return when


def checked(request: Request) -> tuple[float, float]:
    """The window's and the step's seconds; a UsageError for any option out of bounds
    (before gpuctl asks Prometheus anything)."""
    window_s = duration_seconds(request.window, "--window")
    step_s = duration_seconds(request.step, "--step")
    if step_s > window_s:
        raise UsageError("--step must not be longer than --window")
    if step_s < 1:
        raise UsageError(f"--step: {request.step!r} is shorter than a second")
    if window_s / step_s > MAX_STEPS:
        raise UsageError(f"--step is too short for this --window (over {MAX_STEPS:,} steps)")
    threshold = request.idle_threshold
    if not (math.isfinite(threshold) and 0 <= threshold <= 100):
        raise UsageError(f"--idle-threshold: {threshold:g} is not a percentage (0 to 100)")
    if not (1 <= request.top <= 1000 and 1 <= request.teams <= MAX_TEAMS):
        raise UsageError(f"--top and --teams: from 1 to 1,000 (not {request.top}, {request.teams})")
    return window_s, step_s


def _now(client) -> float:
    found = client.query("vector(time())", list)
    return found[0][1] if found else 0.0


def report(
    client, request: Request, exporter: Exporter, prices_path: str | None = None
) -> showback.Report:
    """The showback over the window ending now (or at request.end)."""
    window_s, step_s = checked(request)
    table, currency = prices(prices_path)
    found = q.queries(request.step, request.idle_threshold, exporter, request.by)
    series = client.query(found.series, list, at=request.end)
    if not series or not series[0][1]:
        when = "now" if request.end is None else "at --end"
        raise BackendError(
            f"no busy-signal series (DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_GR_ENGINE_ACTIVE, "
            f"DCGM_FI_DEV_GPU_UTIL, nor another vendor's) in Prometheus at {client.url} {when}",
            hint="deploy dcgm-exporter (the NVIDIA GPU Operator does), or your accelerators' "
            "exporter (docs/cluster-top.md lists them), and make sure this Prometheus scrapes it",
        )
    end = request.end if request.end is not None else _now(client)
    end = math.floor(end / step_s) * step_s  # steps aligned: the same window gives the same figures
    start = end - window_s
    builder = showback.Builder(start, end, step_s, table)
    most = q.max_steps(int(series[0][1]), request.sample_budget)
    for answers, idle in _chunks(client, request, found, exporter, (start, end, step_s), most):
        folds = (
            builder.add_held,
            builder.add_busy,
            builder.add_idle_held,
            builder.add_devices,
            builder.add_cluster_busy,
            builder.add_signals,
        )
        for fold, answer in zip(folds, answers):
            fold(answer)
        builder.add_idle_holders(idle)
    result = builder.report(request.top, currency, request.teams, request.idle_threshold)
    result.dra_unlabelled = _dra_unlabelled(client, exporter, request.end)
    return result


def _dra_unlabelled(client, exporter: Exporter, at: float | None) -> int:
    """How many of the devices the cluster's claims allocate (exporter.claimed, by UUID) no
    series names a holder for: the report, which reads holders from the labels alone,
    counts them unheld."""
    if not exporter.claimed:
        return 0
    named = {labels.get("UUID") for labels, _ in client.query(q.named_devices(exporter), at=at)}
    return sum(1 for uuid in exporter.claimed if uuid not in named)


def _chunks(client, request: Request, found: q.Queries, exporter: Exporter, window, most: int):
    """The answers of each chunk of the window, in order: the range queries' and the idle
    holders'. A chunk spans at most MOST steps, and as many as keep its slowest query near
    request.chunk_s seconds; one Prometheus could not answer in time is asked again in halves."""
    start, end, step_s = window
    exprs = (
        found.held,
        found.busy,
        found.idle_held,
        found.devices,
        found.cluster_busy,
        found.signals,
    )
    steps, first = most, start + step_s
    while first <= end + 1e-6:
        last = min(end, first + (steps - 1) * step_s)
        holders = q.idle_holders_query(
            request.step,
            last - first + step_s,
            request.idle_threshold,
            exporter,
            request.by,
            3 * request.top,
        )
        took: list[float] = []  # each query's seconds (the holders' subquery spans the chunk too)
        try:
            answers = [_timed(took, client.query_range, x, first, last, step_s) for x in exprs]
            idle = _timed(took, client.query, holders, list, at=last)
        except QueryTooLong as e:
            if last == first:  # one step: nothing shorter to ask
                raise BackendError(
                    f"{e.message} (one {request.step} step of the report's queries)",
                    hint="give Prometheus a longer --query.timeout, or gpuctl a longer "
                    "GPUCTL_REQUEST_TIMEOUT; or a shorter --step",
                ) from None
            steps = max(1, round((last - first) / step_s + 1) // 2)
            continue
        yield answers, idle
        first = last + step_s
        # the next chunk sized by this one's time: at most twice as long, never over MOST
        slowest = max(took)
        fit = int(steps * request.chunk_s / slowest) if slowest > 0 else most
        steps = max(1, min(most, 2 * steps, fit))


def _timed(took: list[float], ask, *args, **kwargs):
    """ASK's answer; its seconds appended to TOOK."""
    began = time.monotonic()
    answer = ask(*args, **kwargs)
    took.append(time.monotonic() - began)
    return answer
