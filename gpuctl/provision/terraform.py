"""Terraform: a per-cluster working directory and the init → plan → apply → output flow,
run by the engine it is given (gpuctl.adapters.terraform: embedded, or an executable) and
read through Terraform's machine-readable `-json` events.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuctl.adapters.terraform import Engine, Run, error_text
from gpuctl.common.errors import EXIT_INTERRUPTED, BackendError, GpuctlError
from gpuctl.provision.core.plan_summary import ApplyProgress, PlanSummary, summarize
from gpuctl.provision.core.tfvars import BACKEND_FILE, TFVARS_FILE
from gpuctl.runtime import shipped
from gpuctl.runtime.files import make_private_dir, write_atomic

PLAN_FILE = "gpuctl.tfplan"
MARKER_FILE = ".gpuctl-workdir"  # gpuctl replaces *.tf files only where it wrote them
MODULES_ENV = "GPUCTL_TERRAFORM_DIR"


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


class Terraform:
    def __init__(self, workdir: Path, engine: Engine, env: Mapping[str, str | None] | None = None):
        """ENV: variables to set (None: unset) for every Terraform command."""
        self.workdir = Path(workdir)
        self.env = dict(env or {})
        self._engine = engine
        engine.check()

    @property
    def engine(self) -> str:
        return self._engine.name

    def _run(self, args: list[str]) -> Run:
        return self._engine.run(self.workdir, args, self.env)

    def _events(self, run: Run) -> Iterator[dict]:
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
                f"terraform init failed in {self.workdir}: {error_text(text, run.stderr)}",
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
            detail = "; ".join(summary.errors[:3]) or error_text([], run.stderr)
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
            detail = "; ".join(progress.errors[:3]) or error_text([], run.stderr)
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
            raise BackendError(f"terraform output failed: {error_text([], run.stderr)}")
        return {name: o.get("value") for name, o in (json.loads(text or "{}")).items()}

    def resources(self) -> list[str]:
        """Addresses in the state (empty when nothing was created yet)."""
        with self._run(["state", "list"]) as run:
            lines = [ln for ln in run.lines() if ln.strip()]
        return lines if run.retcode == 0 else []


def _check_interrupted(run: Run, command: str) -> None:
    if run.interrupts or run.terraform_interrupted:
        raise Interrupted(f"interrupted: terraform {command} stopped; nothing was changed")


def _init_hint(lines: list[str], stderr: str) -> str:
    text = (stderr or "") + "\n".join(lines)
    if "registry.terraform.io" in text or "Failed to query available provider" in text:
        return (
            "Terraform could not download the AWS provider or a module: check network access "
            "to registry.terraform.io"
        )
    return "see the working directory's Terraform files"
