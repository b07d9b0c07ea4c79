"""The application object one command runs with: the root's and the command's options that
hold for the whole run (--context, --kubeconfig, --debug), and every outside system a
command talks to, each resolved here from its options, the environment and the settings:
the Kubernetes connection (built once, on first use, and closed when the command ends),
Prometheus, NVML, the Terraform engine, AWS. hatch's `Application` is the model: a command asks `application()`
instead of declaring and building these itself, and hands what it gets to its service. It
is the run's one object (gpuctl.app resets it for each command) rather than click's
ctx.obj, so that option callbacks and shell completion reach it too."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from gpuctl.adapters.amdsmi import AmdDriver, AmdSmi
    from gpuctl.adapters.aws import Aws
    from gpuctl.adapters.kube import Kube
    from gpuctl.adapters.nvml import Driver, Nvml
    from gpuctl.adapters.prometheus import Prometheus
    from gpuctl.adapters.terraform import Engine
    from gpuctl.dcgm.holders import Exporter

F = TypeVar("F")


def nvidia_driver(simulate: str | None) -> Driver:
    """This machine's NVIDIA driver; it runs no simulated node."""
    from gpuctl.adapters.nvml import Driver
    from gpuctl.common.errors import UsageError

    if simulate:
        raise UsageError(f"--simulate {simulate}: this program runs no simulated node")
    return Driver()


def amd_driver(simulate: str | None) -> AmdDriver:
    """This machine's AMD SMI library; it runs no simulated node."""
    from gpuctl.adapters.amdsmi import AmdDriver
    from gpuctl.common.errors import UsageError

    if simulate:
        raise UsageError(f"--simulate {simulate}: this program runs no simulated node")
    return AmdDriver()


@dataclass
class Application:
    context: str | None = None
    kubeconfig: str | None = None
    debug: bool = False
    # The NVML driver for --simulate (None: none asked for); gpuctl.app, at the top, hands
    # in the one that runs gpuctl.sim's simulated nodes too.
    nvml_driver: Callable[[str | None], Driver] = field(default=nvidia_driver, repr=False)
    amd_driver: Callable[[str | None], AmdDriver] = field(default=amd_driver, repr=False)
    _kube: Any = field(default=None, repr=False)
    _said_note: bool = field(default=False, repr=False)
    _offline: str | None = field(default=None, repr=False)  # why cluster_if_any found none

    def kube(self) -> Kube:
        """The Kubernetes connection of --context and --kubeconfig (made on first use)."""
        if self._kube is None or self._kube.closed:
            from gpuctl.adapters.kube import Kube

            self._kube = self.noted(Kube(self.context, kubeconfig=self.kubeconfig))
        return self._kube

    def connect(self, timeout: float) -> Kube:
        """A connection of its own, whose every request has TIMEOUT (a short probe: version,
        completion); the caller closes it."""
        from gpuctl.adapters.kube import Kube

        return self.noted(Kube(self.context, timeout=timeout, kubeconfig=self.kubeconfig))

    def noted(self, kube: Kube) -> Kube:
        """KUBE, once its transport's note (the official client serves an auth-provider) is
        said under --debug, once a run."""
        if self.debug and kube.note and not self._said_note:
            from gpuctl.cli.output import inform

            inform(kube.note)
            self._said_note = True
        return kube

    def nvml(self, simulate: str | None = None) -> Nvml:
        """This node's NVML session, not yet open: on the simulated node SIMULATE (--simulate,
        else GPUCTL_SIMULATE) when one is named, else on the NVIDIA driver."""
        from gpuctl.adapters.nvml import Nvml

        return Nvml(self.nvml_driver(simulate or os.environ.get("GPUCTL_SIMULATE") or None))

    def local_gpus(self, simulate: str | None = None) -> Nvml | AmdSmi:
        """This node's GPUs, not yet open: AMD SMI on a simulated node of AMD GPUs
        (`8xMI300X`) or on a node whose GPUs are AMD's, else NVML (as `nvml`)."""
        from gpuctl.adapters import amdsmi
        from gpuctl.gpus.vendor_models import spec_vendors

        spec = simulate or os.environ.get("GPUCTL_SIMULATE") or None
        if (spec and "amd" in spec_vendors(spec)) or (not spec and amdsmi.present()):
            return amdsmi.AmdSmi(self.amd_driver(spec))
        return self.nvml(simulate)

    def prometheus(self, option: str | None) -> Prometheus:
        """The Prometheus of --prometheus (or GPUCTL_PROMETHEUS_URL), else of prometheus_url
        in the config file; a usage error when none is named."""
        from gpuctl.adapters.prometheus import Prometheus
        from gpuctl.cli.options import prometheus_url

        return Prometheus(prometheus_url(option))

    def names_prometheus(self, option: str | None) -> bool:
        """Whether a Prometheus is named (as `prometheus` finds it): the cluster views of
        `top` and `doctor` ask it only then."""
        from gpuctl.runtime.config import setting

        return bool(setting("prometheus_url", option))

    def terraform(self, option: str | None) -> Engine:
        """The Terraform engine: the executable of --terraform-bin (or GPUCTL_TERRAFORM_BIN),
        else of terraform_binary in the config file, else the embedded one."""
        from gpuctl.adapters.terraform import Engine
        from gpuctl.runtime.config import setting

        return Engine(setting("terraform_binary", option))

    def aws(self, profile: str | None) -> Aws:
        """The AWS account of --profile (None: AWS_PROFILE, else the default credentials)."""
        from gpuctl.adapters.aws import Aws

        return Aws(profile)

    def offline_ok(self, dry_run: bool) -> bool:
        """Whether a command may render without a cluster: a dry run (as kubectl's client
        dry run) for which no cluster was named with --context or --kubeconfig."""
        return dry_run and self.context is None and self.kubeconfig is None

    def kube_or_offline(
        self, offline_ok: bool, probe: Callable[[Kube], object] | None = None
    ) -> tuple[Kube | None, str | None]:
        """(the connection, None) once it answered PROBE (the server's version by default);
        with OFFLINE_OK, (None, why not) when there is no cluster to ask
        (gpuctl.adapters.kube.connect_or_offline)."""
        from gpuctl.adapters.kube import Kube, connect_or_offline

        kube, why = connect_or_offline(
            self.context, self.kubeconfig, offline_ok, probe or Kube.server_version
        )
        if kube is not None:
            self.close()
            self._kube = self.noted(kube)
        return kube, why

    def cluster_if_any(self) -> Kube | None:
        """The connection of --context/--kubeconfig where there is a cluster to ask, else None
        (kube_or_offline): tried once per run, so that the views reading a few objects
        beside Prometheus wait for an unreachable cluster once."""
        if self._kube is not None and not self._kube.closed:
            return self._kube
        if self._offline is not None:
            return None
        kube, why = self.kube_or_offline(offline_ok=True)
        if kube is None:
            self._offline = why or "no cluster"
        return kube

    def dra_holders(self) -> dict[str, Any]:
        """The holders of DRA-allocated devices, as Exporter fields: `claimed`, each device's
        UUID → the (namespace, pod) its claim is reserved for, and `claimed_mig`, (parent
        UUID, MIG profile) → the pod holding all of them (gpuctl.gpus.dra.DraView.holders,
        mig_holders), from the cluster of --context/--kubeconfig; empty where there is no
        cluster to ask, or it serves no DRA, or RBAC hides the claims: the views that join
        them to DCGM's series read Prometheus first and the cluster only for this."""
        kube = self.cluster_if_any()
        view = kube.dra() if kube is not None else None
        if view is None:
            return {"claimed": {}, "claimed_mig": {}}
        return {"claimed": view.holders(), "claimed_mig": view.mig_holders()}

    def cluster_exporter(self, exporter: Exporter) -> Exporter:
        """EXPORTER with what the cluster of --context/--kubeconfig tells of the devices the
        per-vendor views (`top --prometheus`, `advise`, `report`) read from Prometheus: the
        holders of DRA-allocated devices (dra_holders), which DCGM's series may not name, and
        each node's accelerator models (node_models), which other vendors' series label
        poorly; the cluster is asked once per run (cluster_if_any)."""
        return replace(exporter, **self.dra_holders(), models=self.node_models())

    def node_models(self) -> dict[str, dict[str, str]]:
        """Each node's other vendors' accelerator model as its labels name it
        (gpuctl.k8s.nodes.models_by_node), from the cluster of --context/--kubeconfig; {}
        where there is no cluster to ask or RBAC hides the Nodes: the views then show the
        model the exporter's series label."""
        from gpuctl.adapters.kube import Forbidden
        from gpuctl.k8s.nodes import models_by_node

        kube = self.cluster_if_any()
        try:
            return models_by_node(kube.list_objects("Node")) if kube is not None else {}
        except Forbidden:
            return {}

    def close(self) -> None:
        if self._kube is not None:
            self._kube.close()
            self._kube = None


_current = Application()


def application() -> Application:
    return _current


def reset(**systems: Any) -> Application:
    """A fresh Application for the next command; SYSTEMS: how it makes its outside systems
    (gpuctl.app's nvml_driver)."""
    global _current
    _current.close()
    _current = Application(**systems)
    return _current


def uses_cluster(command: F) -> F:
    """Mark a command that talks to Kubernetes: gpuctl.app gives it --context and
    --kubeconfig (also accepted before the command's name, on the root)."""
    command.gpuctl_uses_cluster = True  # type: ignore[attr-defined]
    return command


def takes_cluster_options(callback: Any) -> bool:
    return bool(getattr(callback, "gpuctl_uses_cluster", False))


def _store(_ctx: Any, param: Any, value: Any) -> None:
    """A value given later on the command line (after the command's name) wins; one not
    given leaves the earlier one (the root's) standing."""
    if value is None or value is False:
        return
    setattr(_current, param.name, value)


def run_options() -> list[Any]:
    """--context, --kubeconfig: click options that fill the application instead of
    reaching the command function (expose_value=False)."""
    from typer.core import TyperOption

    from gpuctl.cli.options import CONTEXT_HELP, KUBECONFIG_HELP

    return [
        TyperOption(
            param_decls=[flag], metavar=metavar, expose_value=False, callback=_store, help=help
        )
        for flag, metavar, help in (
            ("--context", "NAME", CONTEXT_HELP),
            ("--kubeconfig", "FILE", KUBECONFIG_HELP),
        )
    ]


def debug_option() -> Any:
    from typer.core import TyperOption

    from gpuctl.cli.options import DEBUG_HELP

    return TyperOption(
        param_decls=["--debug"],
        is_flag=True,
        default=False,
        expose_value=False,
        callback=_store,
        help=DEBUG_HELP,
    )
