"""The `gpuctl` command: root options, command registration and error handling."""

from __future__ import annotations

import sys

import typer

from gpuctl import __version__
from gpuctl.errors import EXIT_INTERRUPTED, GpuctlError

app = typer.Typer(
    name="gpuctl",
    help="Provision GPU capacity, put work on it, watch how it is used, partition and share it.",
    no_args_is_help=True,
    add_completion=False,
    # Plain click help: rich-formatted help costs ~50 ms of imports on every --help.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_debug = False


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    global _debug
    _debug = debug


def _register() -> None:
    # Each module adds its commands; none imports a heavy library at module level.
    from gpuctl.cli import alerts, doctor, jobs, mig, provision, quota, share, top

    for module in (jobs, top, mig, alerts, share, quota, doctor, provision):
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, prog_name="gpuctl")
    except GpuctlError as e:
        if _debug:
            import traceback

            traceback.print_exc()
        print(f"gpuctl: error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"  hint: {e.hint}", file=sys.stderr)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        print("gpuctl: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
