"""The `gpuctl` command: root options, command registration and error handling."""

from __future__ import annotations

import os
import sys

import typer

from gpuctl.common.errors import EXIT_FAILURE, EXIT_INTERRUPTED, Aborted, GpuctlError

app = typer.Typer(
    name="gpuctl",
    help="Provision GPU capacity, put work on it, watch how it is used, partition and share it.",
    # --install-completion / --show-completion; values complete through gpuctl.completion
    add_completion=True,
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
    "init": "gpuctl.specs.cli",
    "schema": "gpuctl.specs.cli",
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
    "whatif": "gpuctl.whatif.cli",
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
    """Run one command. Whatever happens, the user sees at most a few lines on stderr and an
    exit code from the README's contract, never a traceback (unless --debug)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    argv = argv or ["--help"]  # no arguments: the help, and success
    try:
        code = _run(argv)
    except GpuctlError as e:
        _debug_traceback()
        # an interrupt is not an error: "gpuctl: interrupted; …" (what was undone or is left)
        prefix = "gpuctl: " if e.exit_code == EXIT_INTERRUPTED else "gpuctl: error: "
        _fail(e.message, e.hint, e.details, prefix)
        code = e.exit_code
    except KeyboardInterrupt:
        _fail("interrupted", prefix="gpuctl: ")
        code = EXIT_INTERRUPTED
    except Exception as e:  # a bug in gpuctl or a library's surprise: still one line
        _debug_traceback()
        _fail(
            f"unexpected {type(e).__name__}: {_first_line(e)}",
            "this is a bug in gpuctl; rerun with --debug for the traceback and report it",
        )
        code = EXIT_FAILURE
    sys.exit(code)


def entry() -> None:
    """The `gpuctl` program (console script, python -m gpuctl): main, then the process ends.
    A request that ran out of time may still hold a thread; finishing the interpreter around
    it can abort the process (SIGABRT) after the error was printed, so it then ends without
    the interpreter's teardown, keeping main's exit code."""
    from gpuctl.common import deadline

    try:
        main()
    except SystemExit as e:
        if not deadline.abandoned():
            raise
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(e.code if isinstance(e.code, int) else 1)


def _run(argv: list[str]) -> int:
    """The command's exit code; gpuctl's own errors and Ctrl-C propagate to main."""
    try:  # typer ≥ 0.26 carries its own copy of click
        from typer._click import exceptions as click
    except ImportError:  # pragma: no cover - older typer on click
        from click import exceptions as click  # type: ignore[no-redef]

    register(argv)
    command = typer.main.get_command(app)
    if "_GPUCTL_COMPLETE" in os.environ:  # a shell asks (argv is empty: all registered)
        from gpuctl import completion

        completion.run(command)
    no_args_help = getattr(click, "NoArgsIsHelpError", ())
    try:
        # standalone_mode=False: click's usage errors come back here instead of being printed
        # as several lines, and its Exit carries the code
        result = command.main(args=argv, prog_name="gpuctl", standalone_mode=False)
    except no_args_help as e:  # `gpuctl mig`: the group's help
        e.show()
        return e.exit_code
    except click.UsageError as e:
        _fail(e.format_message(), _usage_hint(e.ctx))
        return e.exit_code
    except click.ClickException as e:
        _fail(e.format_message())
        return e.exit_code
    except typer.Abort:  # end of input at a prompt
        raise Aborted("aborted; nothing was changed") from None
    if result == EXIT_INTERRUPTED:  # typer turns a KeyboardInterrupt into Exit(130)
        raise KeyboardInterrupt
    return result if isinstance(result, int) else 0


def _usage_hint(ctx) -> str | None:
    if ctx is None:
        return None
    usage = ctx.get_usage().replace("\n", " ").strip()
    usage = usage[0].lower() + usage[1:] if usage else usage
    return f"{usage}; see '{ctx.command_path} {ctx.help_option_names[0]}'"


def _fail(
    message: str, hint: str | None = None, details: list[str] | tuple = (), prefix="gpuctl: error: "
) -> None:
    # through GpuctlError again: click's messages quote the command line, an unexpected
    # error anything; none may carry a control character or a password to the terminal
    clean = GpuctlError(message, hint, details)
    lines = [prefix + clean.message, *(f"  {d}" for d in clean.details)]
    if clean.hint:
        lines.append(f"  hint: {clean.hint}")
    sys.stderr.write("".join(line + "\n" for line in lines))
    sys.stderr.flush()


def _debug_traceback() -> None:
    if _debug:
        import traceback

        traceback.print_exc()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else "no detail"
