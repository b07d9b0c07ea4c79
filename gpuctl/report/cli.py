"""`gpuctl report --prometheus URL`: per-team GPU showback over a window."""

from __future__ import annotations

import enum

import typer

from gpuctl.cli import options
from gpuctl.common.errors import UsageError


class ReportFormat(str, enum.Enum):
    table = "table"
    json = "json"
    yaml = "yaml"
    csv = "csv"


WINDOW = options.duration("7d", "--window", help="How far back the report goes, e.g. 7d or 30d.")
STEP = options.duration("5m", "--step", help="Resolution: a holding counts in whole steps.")
END = typer.Option(
    None,
    "--end",
    metavar="TIME",
    help="Where the window ends: Unix seconds or RFC 3339 (default: Prometheus's now).",
)
BY = typer.Option(
    "namespace", "--by", help="What a team is: namespace, queue (Kueue), or label KEY."
)
LABEL_KEY = typer.Argument(None, metavar="[KEY]", help="The pod label, with --by label.")
PRICES = typer.Option(
    None, "--prices", metavar="FILE", help="Price per GPU-hour by GPU model (YAML or JSON)."
)
HTML = typer.Option(None, "--html", metavar="FILE", help="Also write a self-contained HTML page.")
THRESHOLD = options.percent(5.0, "--idle-threshold", help="A GPU under this busy signal is idle.")
TOP = typer.Option(10, "--top", min=1, max=1000, help="How many idle holders to list.")
OUTPUT = typer.Option(ReportFormat.table, "-o", "--output", help="table, json, yaml or csv.")


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    key: str | None = LABEL_KEY,
    prometheus: str | None = options.prometheus(),
    window: str = WINDOW,
    step: str = STEP,
    end: str | None = END,
    by: str = BY,
    prices: str | None = PRICES,
    html: str | None = HTML,
    idle_threshold: float = THRESHOLD,
    top: int = TOP,
    output: ReportFormat = OUTPUT,
    exporter_container: list[str] = options.exporter_containers(),
    exporter_job: list[str] = options.exporter_jobs(),
) -> None:
    """Per team: GPU-hours held (MIG slices by their fraction, time-sliced shares split),
    busy GPU-hours by the busy signal, idle-held hours and cost; the top idle holders; the
    cluster's allocation and busy fraction over time."""
    from gpuctl.cli.application import application
    from gpuctl.cli.output import dump, echo, out_console
    from gpuctl.dcgm import holders
    from gpuctl.report import service, views
    from gpuctl.report.core import queries, showback
    from gpuctl.runtime.config import setting_list

    if not 0 <= idle_threshold <= 100:
        raise UsageError(f"--idle-threshold: {idle_threshold:g} is not a percentage (0 to 100)")
    if html:
        from gpuctl.runtime.extras import require

        require("--html", "matplotlib")
    client = application().prometheus(prometheus)
    exporter = holders.exporter(
        setting_list("exporter_containers", exporter_container),
        setting_list("exporter_jobs", exporter_job),
    )
    request = service.Request(
        window,
        step,
        idle_threshold,
        queries.grouping(by, key),
        top,
        end=None if end is None else service.end_time(end),
    )
    client.timeout = max(client.timeout, service.RANGE_TIMEOUT)
    result = service.report(client, request, exporter, prices)
    if html:
        from gpuctl.runtime.files import write_atomic

        write_atomic(html, views.html_page(result), 0o644)  # a page to mail: not secret
    if output is ReportFormat.csv:
        echo(views.csv_text(result).rstrip("\n"))
    elif output is not ReportFormat.table:
        echo(dump(showback.to_dict(result), output.value))
    else:
        console = out_console()
        console.print(views.table(result))
        if result.idle_holders:
            console.print(views.holders_table(result))
