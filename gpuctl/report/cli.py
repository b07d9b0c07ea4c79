"""`gpuctl report --prometheus URL`: per-team GPU showback over a window."""

from __future__ import annotations

import enum

import typer

from gpuctl.cli import options


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
HTML = typer.Option(
    None,
    "--html",
    metavar="FILE",
    help="Also write a self-contained HTML page to mail (under 1 MB; a new or regular file).",
)
THRESHOLD = options.percent(5.0, "--idle-threshold", help="A GPU under this busy signal is idle.")
TOP = typer.Option(10, "--top", min=1, max=1000, help="How many idle holders to list.")
TEAMS = typer.Option(
    20,
    "--teams",
    min=1,
    max=1000,
    help="How many teams to show one by one, those that held the most; the rest are summed "
    "as one row of others.",
)
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
    teams: int = TEAMS,
    output: ReportFormat = OUTPUT,
    exporter_container: list[str] = options.exporter_containers(),
    exporter_job: list[str] = options.exporter_jobs(),
) -> None:
    """Per team: GPU-hours held (MIG slices by their fraction, time-sliced shares split),
    busy GPU-hours by the busy signal, idle-held hours and their cost; the top idle
    holders; the cluster's allocation and busy fraction over time. The teams that held the
    most are shown one by one (--teams), the rest summed as others."""
    from gpuctl.cli.application import application
    from gpuctl.dcgm import holders
    from gpuctl.report import service
    from gpuctl.report.core import queries
    from gpuctl.runtime.config import setting_list

    request = service.Request(
        window,
        step,
        idle_threshold,
        queries.grouping(by, key),
        top,
        teams,
        end=None if end is None else service.end_time(end),
    )
    service.checked(request)  # every option, before any I/O
    if html:
        from gpuctl.runtime.extras import require
        from gpuctl.runtime.files import check_output

        check_output(html, "--html")
        require("--html", "matplotlib")
    exporter = holders.exporter(
        setting_list("exporter_containers", exporter_container),
        setting_list("exporter_jobs", exporter_job),
    )
    client = application().prometheus(prometheus)
    exporter = application().cluster_exporter(exporter)
    client.timeout = max(client.timeout, service.RANGE_TIMEOUT)
    _show(service.report(client, request, exporter, prices), output, html)


def _show(result, output: ReportFormat, html: str | None) -> None:
    from gpuctl.cli.output import dump, echo, out_console
    from gpuctl.report import views
    from gpuctl.report.core import showback

    if html:
        from gpuctl.report import page
        from gpuctl.runtime.files import write_output

        write_output(html, page.html_page(result), "--html")  # a page to mail: not secret
    if output is ReportFormat.csv:
        echo(views.csv_text(result).rstrip("\n"))
    elif output is not ReportFormat.table:
        echo(dump(showback.to_dict(result), output.value))
    else:
        console = out_console()
        console.print(views.table(result))
        if result.idle_holders:
            console.print(views.holders_table(result))
