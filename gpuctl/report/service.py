"""`gpuctl report`: the window's range queries, chunk by chunk, folded into a showback
Report. The price table is the shipped one (gpuctl/data/gpu_hour_prices.json) or the
user's file."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from importlib import resources

from gpuctl.common.errors import BackendError, UsageError
from gpuctl.dcgm.holders import Exporter
from gpuctl.dcgm.promql import duration_seconds
from gpuctl.report.core import queries as q
from gpuctl.report.core import showback

PRICE_TABLE = "gpu_hour_prices.json"
RANGE_TIMEOUT = 120.0  # a week of a large cluster's series takes Prometheus seconds per chunk


@dataclass(frozen=True)
class Request:
    window: str = "7d"
    step: str = "5m"
    idle_threshold: float = 5.0
    by: q.Grouping = q.Grouping()
    top: int = 10
    end: float | None = None  # default: Prometheus's clock now
    sample_budget: int = q.SAMPLE_BUDGET  # points one range query may hold (queries.max_steps)


def prices(path: str | None) -> tuple[dict[str, float], str]:
    """The price per GPU-hour by model name, and the currency: the user's file (JSON or
    YAML: `{currency: USD, prices: {H100: 12.3, ...}}` or the mapping alone) or the table
    gpuctl ships."""
    if path is None:
        doc = json.loads(resources.files("gpuctl.data").joinpath(PRICE_TABLE).read_text("utf-8"))
    else:
        import yaml

        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except OSError as e:
            raise UsageError(f"--prices: cannot read {path}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise UsageError(f"--prices: {path} is not YAML or JSON: {e}") from None
    table = doc.get("prices", doc) if isinstance(doc, dict) else None
    currency = doc.get("currency", "USD") if isinstance(doc, dict) else "USD"
    if not isinstance(table, dict) or not table:
        raise UsageError(f"--prices: {path}: expected a mapping of GPU model to price per hour")
    out = {}
    for model, price in table.items():
        if model == "currency":
            continue
        number = isinstance(price, (int, float)) and not isinstance(price, bool)
        if not number or not math.isfinite(price) or price < 0:
            raise UsageError(f"--prices: {path}: {model!r}: {price!r} is not a price per hour")
        out[str(model)] = float(price)
    return out, str(currency)


def end_time(text: str) -> float:
    """--end: Unix seconds or an RFC 3339 time (UTC unless it says otherwise)."""
    from gpuctl.k8s.times import any_seconds

    when = float(text) if re.fullmatch(r"\d+(\.\d+)?", text) else any_seconds(text)
    if when is None:
        raise UsageError(
            f"--end: {text!r} is not a time (Unix seconds or RFC 3339, e.g. 2026-12-01T00:00:00Z)"
        )
    return when


def _now(client) -> float:
    found = client.query("vector(time())", list)
    return found[0][1] if found else 0.0


def report(
    client, request: Request, exporter: Exporter, prices_path: str | None = None
) -> showback.Report:
    """The showback over the window ending now (or at request.end)."""
    table, currency = prices(prices_path)
    window_s = duration_seconds(request.window, "--window")
    step_s = duration_seconds(request.step, "--step")
    if step_s > window_s:
        raise UsageError("--step must not be longer than --window")
    if window_s / step_s > 1_000_000:
        raise UsageError("--step is too short for this --window (over 1,000,000 steps)")
    found = q.queries(request.step, request.idle_threshold, exporter, request.by)
    series = client.query(found.series, list, at=request.end)
    if not series or not series[0][1]:
        when = "now" if request.end is None else "at --end"
        raise BackendError(
            f"no busy-signal series (DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_GR_ENGINE_ACTIVE, "
            f"DCGM_FI_DEV_GPU_UTIL) in Prometheus at {client.url} {when}",
            hint="deploy dcgm-exporter (the NVIDIA GPU Operator does) and make sure this "
            "Prometheus scrapes it",
        )
    end = request.end if request.end is not None else _now(client)
    end = math.floor(end / step_s) * step_s  # steps aligned: the same window gives the same figures
    start = end - window_s
    builder = showback.Builder(start, end, step_s, table)
    steps = q.max_steps(int(series[0][1]), request.sample_budget)
    folds = (
        (found.held, builder.add_held),
        (found.busy, builder.add_busy),
        (found.idle_held, builder.add_idle_held),
        (found.devices, builder.add_devices),
        (found.cluster_busy, builder.add_cluster_busy),
        (found.signals, builder.add_signals),
    )
    for first, last in q.chunks(start, end, step_s, steps):
        for expr, fold in folds:
            fold(client.query_range(expr, first, last, step_s))
        span = last - first + step_s
        holders_expr = q.idle_holders_query(
            request.step, span, request.idle_threshold, exporter, request.by, 3 * request.top
        )
        builder.add_idle_holders(client.query(holders_expr, list, at=last))
    return builder.report(request.top, currency)
