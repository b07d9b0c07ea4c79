"""Shell completion: `gpuctl completion SHELL` prints the script (as kubectl and helm do;
typer's `--install-completion` and `--show-completion` remain), and the values it completes.

A shell asks `gpuctl` for completions by running it with `_GPUCTL_COMPLETE` set; only then
are the completers below attached to the commands' options and arguments, so an ordinary
run pays nothing for them. A completer never prints an error nor keeps the shell waiting:
what it cannot get from the cluster within COMPLETION_SECONDS a request (a cluster that
does not answer, no kubeconfig) it leaves out.
"""

from __future__ import annotations

import enum
import logging
import os
import sys
from collections.abc import Callable, Iterable
from typing import NoReturn

COMPLETION_SECONDS = 2.0
COMPLETE_VAR = "_GPUCTL_COMPLETE"  # what the scripts set when they ask gpuctl


class Shell(str, enum.Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def register(app) -> None:
    import typer

    @app.command("completion")
    def completion(
        shell: Shell = typer.Argument(..., metavar="SHELL", help="bash, zsh or fish."),
    ) -> None:
        """Print the shell completion script for bash, zsh or fish: commands, options and
        values (MIG profiles, GPU models, AWS profiles, and from the cluster namespaces and
        job names). Load it in the running shell (bash: `source <(gpuctl completion bash)`)
        or save it where the shell looks (docs/install.md)."""
        from gpuctl.cli.output import echo

        echo(script(shell.value) + "\n")


def script(shell: str) -> str:
    """The completion script for SHELL: what `_GPUCTL_COMPLETE=source_SHELL gpuctl` and
    typer's `--show-completion` print."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="gpuctl", complete_var=COMPLETE_VAR, shell=shell)


Values = Iterable[tuple[str, str]]  # (value, what it is)


def run(command) -> NoReturn:
    """Answer the shell (click reads what it asks from the environment) and end the run
    with click's exit code (gpuctl.app.entry ends the process without the interpreter's
    teardown when a request that ran out of time still holds a thread)."""
    attach(command)
    # The shell's terminal is not gpuctl's to use while it completes: a credential plugin
    # that asks the person there when it can (interactiveMode IfAvailable) must not, in the
    # middle of the prompt (client-go's StdinUnavailable).
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        command.main(args=[], prog_name="gpuctl", standalone_mode=False)
        code = 0
    except SystemExit as e:  # click ends a completion with sys.exit
        code = e.code if isinstance(e.code, int) else 0
    except Exception:  # a completion offers nothing rather than an error in the prompt
        code = 1
    sys.exit(code)


def attach(command, path: tuple[str, ...] = ()) -> None:
    """Give the options and arguments of COMMAND (the root click command, or the command at
    PATH under it, as gpuctl.app builds it) and of its subcommands the completers that fit
    them."""
    logging.disable(logging.CRITICAL)  # a library's warning would land in the prompt
    _attach(command, path)


def _attach(command, path: tuple[str, ...]) -> None:
    for param in command.params:
        values = _completer(path, param)
        if values is not None and param._custom_shell_complete is None:
            # click's hook for the `shell_complete=` a parameter is made with
            param._custom_shell_complete = _quietly(values)
    for name, sub in getattr(command, "commands", {}).items():
        _attach(sub, path + (name,))


def _completer(path: tuple[str, ...], param) -> Callable[..., Values] | None:
    flags = set(param.opts)
    if "--namespace" in flags:
        return namespaces
    if path[:1] == ("mig",) and flags & {"--demand", "--layout"}:
        return mig_profile_list
    if "--gpu" in flags:
        return gpu_models
    if "--profile" in flags and path[:1] in (("provision",), ("destroy",)):
        return aws_profiles
    if path[:1] == ("jobs",) and param.name == "name" and param.param_type_name == "argument":
        return job_names
    return None


def _quietly(values: Callable[..., Values]):
    def complete(ctx, param, incomplete: str) -> list:
        from gpuctl.common.text import completion_safe, printable

        try:  # typer ≥ 0.26 carries its own copy of click
            from typer._click.shell_completion import CompletionItem
        except ImportError:  # pragma: no cover - older typer on click
            from click.shell_completion import CompletionItem  # type: ignore[assignment]

        try:
            found = list(values(ctx, incomplete))
        except Exception:  # nothing to offer is better than an error in the prompt
            return []
        # values from a cluster are outside text: only what the shell protocol can carry
        return [
            CompletionItem(v, help=printable(h))
            for v, h in found
            if completion_safe(v) and v.startswith(incomplete)
        ]

    return complete


def gpu_models(ctx, incomplete: str) -> Values:
    from gpuctl.gpus import geometry

    return [(m.short_name, m.nvml_name) for m in geometry.models()]


def mig_profile_list(ctx, incomplete: str) -> Values:
    """`1g.10gb=2,3g` → every profile of that name's start, after what is written already
    (PROFILE=N,… lists)."""
    from gpuctl.gpus import geometry

    done, _, last = incomplete.rpartition(",")
    head = done + "," if done else ""
    if "=" in last:
        return []  # a count comes next
    return [(f"{head}{p}=", "MIG profile") for p in sorted(geometry.all_profile_names())]


def aws_profiles(ctx, incomplete: str) -> Values:
    """The profiles of the AWS config and credentials files, as boto3 reads them (nothing
    without the `aws` extra)."""
    import botocore.session

    return [(p, "AWS profile") for p in sorted(botocore.session.Session().available_profiles)]


def namespaces(ctx, incomplete: str) -> Values:
    return _from_cluster(
        ctx,
        lambda kube: [(n["metadata"]["name"], "namespace") for n in kube.list_objects("Namespace")],
    )


def job_names(ctx, incomplete: str) -> Values:
    from gpuctl.jobs.service import list_jobs

    def names(kube) -> Values:
        namespace = ctx.params.get("namespace") or kube.namespace
        jobs = list_jobs(kube, namespace, at_once=True)  # one budget for the four lists
        return [(j["metadata"]["name"], j["kind"]) for j in jobs]

    return _from_cluster(ctx, names)


def _from_cluster(ctx, ask: Callable) -> Values:
    from gpuctl.cli.application import application

    # Each request has COMPLETION_SECONDS (the adapter's deadline, not only a socket
    # timeout): a cluster that does not answer fails the first one. The client's modules
    # load on first use, outside that clock. --context/--kubeconfig, on the root or the
    # command, were read into the application while the command line was parsed.
    with application().connect(COMPLETION_SECONDS) as kube:
        return ask(kube)
