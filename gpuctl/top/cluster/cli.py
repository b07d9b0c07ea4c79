"""`gpuctl top --prometheus URL`: the cluster-wide GPU view from DCGM-exporter metrics."""

from __future__ import annotations

import sys

from gpuctl.cli.application import application
from gpuctl.cli.output import console as screen_console
from gpuctl.cli.output import dump, echo, out_console
from gpuctl.common.errors import UsageError
from gpuctl.dcgm.holders import Exporter
from gpuctl.top.cluster import service as cluster
from gpuctl.top.cluster import views
from gpuctl.top.cluster.core import live, usage


def run(
    prometheus: str | None,
    *,
    delay: float,
    once: bool,
    output: str,
    window: str,
    idle_threshold: float,
    exporter: Exporter,
    sort: str = "index",
) -> None:
    if not 0 <= idle_threshold <= 100:
        raise UsageError(f"--idle-threshold: {idle_threshold:g} is not a percentage (0 to 100)")
    usage.queries(window)  # checks --window before anything is sent
    live.check_sort(sort)
    client = application().prometheus(prometheus)
    exporter = application().cluster_exporter(exporter)
    console = out_console()
    if output == "json":  # a document is one snapshot: json/yaml imply --once
        views.snapshot_json(client, window, idle_threshold, exporter, sort, sys.stdout)
        return
    if output != "table" or once or not console.is_terminal:
        frame = cluster.snapshot(client, window, idle_threshold, exporter, sort)
        if output != "table":
            echo(dump(usage.frame_to_dict(frame), output))
        elif console.is_terminal:
            console.print(views.render(frame, window, idle_threshold))
        else:
            echo(views.render_plain(frame, window, idle_threshold))
        return
    _live(cluster.LiveFrames(client, window, idle_threshold, exporter, sort, delay))


def _live(frames: cluster.LiveFrames) -> None:
    from rich.live import Live

    # out_console() drops the spaces that end a line, which a full-screen frame writes
    # over the last one with: the live screen has a console of its own, as the node view's
    console = screen_console()

    def show(screen: cluster.Screen, keys) -> None:
        shown = views.live_render(screen, keys, frames.window, frames.threshold, frames.delay)
        view.update(shown, refresh=True)

    with Live(console=console, screen=True, auto_refresh=False) as view:
        cluster.watch(frames, lambda last: views.live_rows(console.size.height, last), show)
