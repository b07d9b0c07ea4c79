"""The `gpuctl` command: root options, command registration and error handling."""

from __future__ import annotations

import inspect
import os
import sys

import typer

from gpuctl.cli import application
from gpuctl.common.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    Aborted,
    GpuctlError,
    UsageError,
)

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


def _version(value: bool) -> None:
    if value:
        from gpuctl.cli.output import Format
        from gpuctl.version.cli import version

        version(terraform_bin=None, output=Format.table)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the versions of gpuctl and the engines it found (as `gpuctl version`).",
    ),
) -> None:
    """--context, --kubeconfig and --debug given here hold for the command after them, as
    if given after it."""


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
    "alerts": "gpuctl.alerts.cli",
    "share": "gpuctl.sharing.cli",
    "quota": "gpuctl.quota.cli",
    "sched": "gpuctl.sched.cli",
    "advise": "gpuctl.advise.cli",
    "report": "gpuctl.report.cli",
    "doctor": "gpuctl.doctor.cli",
    "provision": "gpuctl.provision.cli",
    "destroy": "gpuctl.provision.cli",
    "whatif": "gpuctl.whatif.cli",
    "reclaim": "gpuctl.reclaim.cli",
    "make-room": "gpuctl.reclaim.cli",
    "sandbox": "gpuctl.sandbox.cli",
    "version": "gpuctl.version.cli",
}
_registered: set[str] = set()


def _job_gpu_request(path: str):
    """The GPU request of the job spec in PATH, loaded as submit loads it: `doctor --spec`
    checks it (the job capability's loader, handed over from here, above both)."""
    from gpuctl.jobs.sources import load_job

    return load_job(path)[0].gpu_request


# What a command module's register() is given besides the app
_HANDED = {"gpuctl.doctor.cli": {"load_job": _job_gpu_request}}


def _nvml_driver(simulate: str | None):
    """What NVML runs on, chosen here at the top, the one place that imports the simulator:
    the simulated node of --simulate (or GPUCTL_SIMULATE), else this machine's driver."""
    if not simulate:
        return application.nvidia_driver(None)
    import gpuctl.sim

    return gpuctl.sim.driver(simulate)


def register(argv: list[str]) -> None:
    """Add the commands `argv` needs (all of them for --help or an unknown command)."""
    import importlib

    word = _command_word(argv)
    wanted = {COMMANDS[word]} if word in COMMANDS else set(COMMANDS.values())
    for name in dict.fromkeys(COMMANDS.values()):
        if name in wanted and name not in _registered:
            importlib.import_module(name).register(app, **_HANDED.get(name, {}))
            _registered.add(name)


def command(argv: list[str] | None = None):
    """The click command tree of the registered commands. The root and every command take
    --debug; the root and the commands that talk to Kubernetes take --context and
    --kubeconfig. All three fill the run's Application (gpuctl.cli.application).
    For the root's help (ARGV asks for nothing else) the commands are only names and help
    texts: building every command's options costs more than the rest of `gpuctl --help`."""
    root = _root_help_tree() if _root_help(argv) else _invoked_tree(argv)
    root.params[0:0] = [application.debug_option(), *application.run_options()]
    if _root_help(argv):
        return root

    def add(cmd) -> None:
        for sub in getattr(cmd, "commands", {}).values():
            add(sub)
        if any(p.name == "debug" for p in cmd.params):
            return
        if hasattr(cmd, "commands"):  # a group that runs something itself (`reclaim`) too
            if cmd is not root and application.takes_cluster_options(cmd.callback):
                cmd.params += [application.debug_option(), *application.run_options()]
            return
        cmd.params.append(application.debug_option())
        if application.takes_cluster_options(cmd.callback):
            cmd.params.extend(application.run_options())

    add(root)
    return root


def _invoked_tree(argv: list[str] | None):
    """The click tree of only the command ARGV names, and of only its subcommand where it
    names one by its exact name: building every command's options costs more than a short
    command's work. Anything else (no command, a word that names none, shell completion)
    gets the whole tree, whose errors and suggestions name every command."""
    argv = argv or []
    word = _command_word(argv)
    commands, groups = app.registered_commands, app.registered_groups
    mine = [c for c in commands if _name(c) == word]
    group = next((g for g in groups if typer.main.solve_typer_info_defaults(g).name == word), None)
    if "_GPUCTL_COMPLETE" in os.environ or not (mine or group):
        return typer.main.get_command(app)
    sub = group.typer_instance if group else None
    if sub is None or sub.registered_callback is not None:  # a group that runs itself too
        return _built(mine, [group] if group else [])
    after = argv[argv.index(str(word)) + 1 :]
    whole = sub.registered_commands
    sub.registered_commands = [c for c in whole if after and _name(c) == after[0]] or whole
    try:
        return _built([], [group] if group else [])
    finally:
        sub.registered_commands = whole


def _built(commands: list, groups: list):
    """The root's click group with only COMMANDS and GROUPS registered."""
    registered = app.registered_commands, app.registered_groups
    app.registered_commands, app.registered_groups = commands, groups
    try:
        return typer.main.get_command(app)
    finally:
        app.registered_commands, app.registered_groups = registered


def _name(info) -> str:
    return info.name or typer.main.get_command_name(info.callback.__name__)


def _root_help(argv: list[str] | None) -> bool:
    return (
        argv is not None
        and _command_word(argv) is None
        and any(word in ("-h", "--help") for word in argv)
        and "_GPUCTL_COMPLETE" not in os.environ
    )


def _root_help_tree():
    """The root group with each command as its name and help alone (as typer reads them)."""
    from typer.core import TyperCommand, TyperGroup

    commands, groups = app.registered_commands, app.registered_groups
    app.registered_commands, app.registered_groups = [], []
    try:
        root = typer.main.get_command(app)
    finally:
        app.registered_commands, app.registered_groups = commands, groups
    for info in commands:
        name = _name(info)
        doc = inspect.getdoc(info.callback) if info.help is None else inspect.cleandoc(info.help)
        root.commands[name] = TyperCommand(
            name=name,
            help=doc,
            short_help=info.short_help,
            hidden=info.hidden,
            deprecated=info.deprecated,
        )
    for group in groups:
        solved = typer.main.solve_typer_info_defaults(group)
        root.commands[solved.name] = TyperGroup(
            name=solved.name,
            help=solved.help,
            short_help=solved.short_help,
            hidden=solved.hidden,
            deprecated=solved.deprecated,
        )
    return root


# The root options that take a value (the word after them is not the command).
_ROOT_VALUE_OPTIONS = ("--context", "--kubeconfig")


def _command_word(argv: list[str]) -> str | None:
    """The command's name in ARGV: its first word that is not a root option or its value."""
    words = iter(argv)
    for word in words:
        if word in _ROOT_VALUE_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _server_dry_run(argv: list[str]) -> list[str]:
    """`submit --dry-run=server` (kubectl's spelling) as the hidden flag submit reads it by.
    click can only give an option an optional value by taking the next word as it, which
    would swallow `submit --dry-run job.yaml`'s file; so the one spelling that carries a
    value is rewritten here. The old `--dry-run client|server` still works, with a warning."""
    if _command_word(argv) != "submit":
        return argv
    from gpuctl.jobs.cli import SERVER_DRY_RUN

    out: list[str] = []
    for i, word in enumerate(argv):
        if word == "--":
            return out + argv[i:]
        if word in ("client", "server") and argv[i - 1 : i] == ["--dry-run"]:
            right = "--dry-run" if word == "client" else "--dry-run=server"
            sys.stderr.write(f"gpuctl: warning: `--dry-run {word}` is deprecated: use {right}\n")
        elif not word.startswith("--dry-run="):
            out.append(word)
            continue
        mode = word.removeprefix("--dry-run=")
        if mode not in ("client", "server"):
            raise UsageError(f"--dry-run={mode}: use --dry-run or --dry-run=server")
        if argv[i - 1 : i] != ["--dry-run"]:
            out.append("--dry-run")
        if mode == "server":
            out.append(SERVER_DRY_RUN)
    return out


def main(argv: list[str] | None = None) -> None:
    """Run one command. Whatever happens, the user sees at most a few lines on stderr and an
    exit code from the error contract (docs/errors.md), never a traceback (unless --debug)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    argv = argv or ["--help"]  # no arguments: the help, and success
    application.reset(nvml_driver=_nvml_driver)
    try:
        try:
            code = _run(argv)
        finally:
            application.application().close()
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
    from gpuctl.runtime import deadline

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
    argv = _server_dry_run(argv)
    root = command(argv)
    if "_GPUCTL_COMPLETE" in os.environ:  # a shell asks (argv is empty: all registered)
        from gpuctl import completion

        completion.run(root)
    no_args_help = getattr(click, "NoArgsIsHelpError", ())
    try:
        # standalone_mode=False: click's usage errors come back here instead of being printed
        # as several lines, and its Exit carries the code
        result = root.main(args=argv, prog_name="gpuctl", standalone_mode=False)
    except no_args_help as e:  # `gpuctl mig`: the group's help
        e.show()
        return e.exit_code
    except click.UsageError as e:
        # one line: click lists a missing choice argument's values on tab-indented lines
        _fail(" ".join(e.format_message().split()), _usage_hint(e.ctx))
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
    if application.application().debug:
        import traceback

        traceback.print_exc()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else "no detail"
