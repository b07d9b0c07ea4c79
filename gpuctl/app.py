"""The `gpuctl` command: root options, command registration and error handling."""

from __future__ import annotations

import sys

import typer

from gpuctl.common.errors import EXIT_INTERRUPTED, GpuctlError

app = typer.Typer(
    name="gpuctl",
    help="Provision GPU capacity, put work on it, watch how it is used, partition and share it.",
    add_completion=False,
    # Plain click help: rich-formatted help costs ~50 ms of imports on every --help.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_debug = False


def _version(value: bool) -> None:
    if value:
        from gpuctl.common.output import Format
        from gpuctl.version.cli import version

        version(context=None, terraform_bin=None, output=Format.table)
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the versions of gpuctl and the engines it found (as `gpuctl version`).",
    ),
) -> None:
    global _debug
    _debug = debug


# Each command's module, in the order `--help` lists them. Only the module the invoked
# command needs is imported (none imports a heavy library at module level).
COMMANDS = {
    "render": "gpuctl.jobs.cli",
    "submit": "gpuctl.jobs.cli",
    "jobs": "gpuctl.jobs.cli",
    "top": "gpuctl.top.cli",
    "mig": "gpuctl.mig.cli",
    "alerts": "gpuctl.top.alerts_cli",
    "share": "gpuctl.sharing.cli",
    "quota": "gpuctl.quota.cli",
    "sched": "gpuctl.sched.cli",
    "advise": "gpuctl.advise.cli",
    "doctor": "gpuctl.doctor.cli",
    "provision": "gpuctl.provision.cli",
    "destroy": "gpuctl.provision.cli",
    "version": "gpuctl.version.cli",
}
_registered: set[str] = set()


def register(argv: list[str]) -> None:
    """Add the commands `argv` needs (all of them for --help or an unknown command)."""
    import importlib

    words = [a for a in argv if not a.startswith("-")]
    wanted = {COMMANDS[words[0]]} if words and words[0] in COMMANDS else set(COMMANDS.values())
    for name in dict.fromkeys(COMMANDS.values()):
        if name in wanted and name not in _registered:
            importlib.import_module(name).register(app)
            _registered.add(name)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    argv = argv or ["--help"]  # no arguments: the help, and success
    try:
        register(argv)
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
