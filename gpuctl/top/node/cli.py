"""`gpuctl top` on this node: NVML samples (real or simulated), or AMD SMI's on a node of AMD
GPUs, shown as aligned rich text."""

from __future__ import annotations

from gpuctl.top.node.core import frame as topframe


def run(
    simulate: str | None,
    *,
    delay: float = 2.0,
    once: bool = False,
    output: str = "table",
    sort: str = "index",
) -> None:
    from gpuctl.cli.application import application
    from gpuctl.common.errors import UsageError

    if sort not in topframe.SORT_KEYS:
        raise UsageError(
            f"unknown --sort key {sort!r}", hint="use one of: " + ", ".join(topframe.SORT_KEYS)
        )
    with application().local_gpus(simulate) as nvml:
        if output != "table":
            from gpuctl.cli.output import dump, echo
            from gpuctl.gpus.sample import to_dict

            echo(dump(to_dict(nvml.sample()), output))
            return
        from gpuctl.cli.output import console as safe_console
        from gpuctl.top.node import views

        console = safe_console()
        if once or not console.is_terminal:
            console.print(views.render(nvml.sample(), sort=sort, width=console.width))
            return
        _live(console, nvml, delay, sort)


def _live(console, nvml, delay: float, sort: str) -> None:
    from rich.live import Live

    from gpuctl.common.keys import View
    from gpuctl.top.node import service, views

    with Live(console=console, screen=True, auto_refresh=False) as live:
        service.watch(
            nvml,
            delay,
            lambda sample, view: live.update(
                views.render(
                    sample, sort=view.sort, width=console.width, view=view, height=console.height
                ),
                refresh=True,
            ),
            View(sort=sort),
        )
