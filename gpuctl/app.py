"""The `gpuctl` command: root options, the table of commands and error handling."""

from __future__ import annotations

import os
import sys

import typer
from typer.core import TyperCommand, TyperGroup

from gpuctl.cli import application
from gpuctl.common.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    Aborted,
    GpuctlError,
    UsageError,
    redact,
)
from gpuctl.runtime import workflow

# Every command, in the order `gpuctl --help` lists them: the module whose register() makes
# it, and its help as that page shows it (its help's first sentence; tests/test_cli_startup.py
# checks it is the command's own). A command's module is imported only when the command
# runs, is completed or shows its own help; none imports a heavy library at module level.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("gpuctl.specs.cli", "Write a commented starter spec that renders as it is: a single-node job, a multi-node job, a job on one MIG slice, an autoscaled inference service, or a cluster."),
    "schema": ("gpuctl.specs.cli", "Print the JSON Schema (draft 2020-12) of the job, service or cluster spec, made from the field table gpuctl's own parser reads."),
    "render": ("gpuctl.jobs.cli", "Print the Kubernetes manifests for job specs (a service's: its Deployment, Service and autoscaler)."),
    "submit": ("gpuctl.jobs.cli", "Check that a job fits the cluster and that the volumes and secrets it uses exist, then create it (all objects, or none)."),
    "top": ("gpuctl.top.cli", "Show GPU utilization, memory, temperature, power and processes."),
    "nodes": ("gpuctl.nodes.cli", "List each node's accelerators: vendor, model, count, allocated and free, through which source (device plugin or DRA) and resource or DeviceClass."),
    "advise": ("gpuctl.advise.cli", "Rightsizing advice per workload: keep its GPUs, move it to a MIG profile or a time-sliced share, or release them; and how many GPUs the cluster would free."),
    "report": ("gpuctl.report.cli", "Per team: GPU-hours held (MIG slices by their fraction, time-sliced shares split), busy GPU-hours by the busy signal, idle-held hours and their cost; the top idle holders; the cluster's allocation and busy fraction over time."),
    "doctor": ("gpuctl.doctor.cli", "Check the cluster's GPU stack: GPU nodes, feature discovery labels, the device plugin, MIG, sharing configs, DCGM exporter; Kueue and JobSet (versions), Kueue's all-or-nothing admission (waitForPodsReady), GPU resources covered by ClusterQueues; with a Prometheus, the busy signal its DCGM series give; with --spec, whether each job spec's GPUs select a node."),
    "provision": ("gpuctl.provision.cli", "Create or update what a cluster spec describes: a new EKS cluster in a new VPC (or GPU nodes for an existing cluster, in its own network), the GPU node groups (Auto Scaling groups or Karpenter NodePools), EFA and the GPU stack."),
    "destroy": ("gpuctl.provision.cli", "Destroy everything `gpuctl provision` created for a cluster spec (plan, confirm, apply)."),
    "whatif": ("gpuctl.whatif.cli", "Replay pods onto nodes one at a time, as the FGD paper's simulator does, under each policy, and report the GPU allocation at 50/90/100/130 % demand, when the first GPU pod fails, and how fragmented the unallocated GPUs end up."),
    "make-room": ("gpuctl.reclaim.cli", "The fewest evictions that make room for a waiting job: every evicted pod fits elsewhere; PDBs, gangs and pods that must not move are respected."),
    "version": ("gpuctl.version.cli", "Print gpuctl's version and the versions of the engines it found: the NVIDIA driver (NVML; a simulated node's with GPUCTL_SIMULATE), the Kubernetes API server of the kubeconfig context, Terraform and the AWS SDK."),
    "jobs": ("gpuctl.jobs.cli", "List, inspect, follow and delete jobs that gpuctl submitted."),
    "mig": ("gpuctl.mig.cli", "Partition GPUs with MIG: plan, configure, show, assert, export."),
    "alerts": ("gpuctl.alerts.cli", "Prometheus alert rules for GPUs (DCGM-exporter metrics)."),
    "share": ("gpuctl.sharing.cli", "Share GPUs between pods: time-slicing or MPS via the NVIDIA device plugin."),
    "quota": ("gpuctl.quota.cli", "Per-team GPU quotas: Kueue queues that lend and borrow within a cohort, or a namespace's ResourceQuota on requests.nvidia.com/gpu and MIG resources."),
    "sched": ("gpuctl.sched.cli", "A kube-scheduler profile that packs GPU pods onto the fewest nodes."),
    "reclaim": ("gpuctl.reclaim.cli", "Give idle-held GPUs back by policy: report, suspend (Kueue-aware), scale to zero or evict the workloads whose every GPU has been idle; dry run unless --yes."),
    "sandbox": ("gpuctl.sandbox.cli", "A local simulated GPU cluster to try every command on (a simulator)."),
    "completion": ("gpuctl.completion", "Print the shell completion script for bash, zsh or fish: commands, options and values (MIG profiles, GPU models, AWS profiles, and from the cluster namespaces and job names)."),
}  # fmt: skip


class LazyGroup(TyperGroup):
    """The root group, after click's documented pattern for lazily loaded subcommands: it
    lists COMMANDS and builds a command from its module when asked for it by name. Its own
    help lists the commands from the table alone: building every command's options costs
    more than the rest of `gpuctl --help`."""

    def list_commands(self, ctx) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx, cmd_name: str):
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            self.commands[cmd_name] = _built(cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx, args: list[str]):
        if args[0] in COMMANDS or args[0].startswith("-"):  # `-- --version`: the root's
            return super().resolve_command(ctx, args)
        # no such command: the listing's answer suggests the nearest of all their names
        return _listing().resolve_command(ctx, args)

    def format_commands(self, ctx, formatter) -> None:
        _listing().format_commands(ctx, formatter)


def _listing() -> TyperGroup:
    """A group of each command as its name and help alone."""
    return TyperGroup(commands=[TyperCommand(name=n, help=h) for n, (_, h) in COMMANDS.items()])


app = typer.Typer(
    name="gpuctl",
    help="Provision GPU capacity, put work on it, watch how it is used, partition and share it.",
    cls=LazyGroup,
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


def _amd_driver(simulate: str | None):
    """What AMD SMI runs on, chosen here too: the simulated node of --simulate (8xMI300X),
    else this machine's amdsmi."""
    if not simulate:
        return application.amd_driver(None)
    from gpuctl.sim.amdsmi import driver

    return driver(simulate)


def command(built: bool = False) -> LazyGroup:
    """The root click command. It and every command take --debug; it and the commands that
    talk to Kubernetes take --context and --kubeconfig; all three fill the run's Application
    (gpuctl.cli.application). BUILT: with every command built already, for what walks the
    tree (tests, docs/commands.py); a run builds only the command it names."""
    root = typer.main.get_command(app)
    assert isinstance(root, LazyGroup)
    root.params[0:0] = [application.debug_option(), *application.run_options()]
    for name in COMMANDS if built else ():
        root.get_command(None, name)
    return root


def _built(name: str):
    """The click command NAME, made by its module's register() on an app of its own (the
    module's other commands are built with it: a few milliseconds)."""
    import importlib

    module = COMMANDS[name][0]
    made = typer.Typer(rich_markup_mode=app.rich_markup_mode)
    importlib.import_module(module).register(made, **_HANDED.get(module, {}))
    cmd = typer.main.get_group(made).commands[name]
    _add_run_options(cmd)
    if "_GPUCTL_COMPLETE" in os.environ:  # a shell asks: the values its options complete
        from gpuctl import completion

        completion.attach(cmd, (name,))
    return cmd


def _add_run_options(cmd) -> None:
    """--debug on CMD and on each command under it; --context and --kubeconfig on those
    marked @uses_cluster (a group that runs something itself, `reclaim`, as well)."""
    for sub in getattr(cmd, "commands", {}).values():
        _add_run_options(sub)
    if hasattr(cmd, "commands"):
        if application.takes_cluster_options(cmd.callback):
            cmd.params += [application.debug_option(), *application.run_options()]
        return
    cmd.params.append(application.debug_option())
    if application.takes_cluster_options(cmd.callback):
        cmd.params.extend(application.run_options())


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
    application.reset(nvml_driver=_nvml_driver, amd_driver=_amd_driver)
    try:
        try:
            with workflow.command_run():  # nothing changes until gpuctl.cli.workflow.go_ahead
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

    argv = _server_dry_run(argv)
    root = command()
    if "_GPUCTL_COMPLETE" in os.environ:  # a shell asks (what, click reads from the environment)
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

        sys.stderr.write(redact(traceback.format_exc()))  # no URL's credentials, here either


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else "no detail"
