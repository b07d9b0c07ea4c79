"""`gpuctl sandbox start|status|stop`: a simulated GPU cluster on this machine."""

from __future__ import annotations

import typer

from gpuctl.cli import options
from gpuctl.cli.output import Format, dump, echo

SIMULATOR = "a simulator for trying gpuctl, not a Kubernetes cluster"


def register(app: typer.Typer) -> None:
    sandbox = typer.Typer(
        help="A local simulated GPU cluster to try every command on (a simulator).",
        no_args_is_help=True,
    )
    sandbox.command("start")(start)
    sandbox.command("status")(status)
    sandbox.command("stop")(stop)
    app.add_typer(sandbox, name="sandbox")


def start(
    nodes: str = typer.Option(
        None,
        "--gpu-nodes",
        metavar="SPEC",
        help="GPU nodes, COUNTxMODEL[:mig=PROFILE|:dra],… (8 GPUs each; :dra: published "
        "by a simulated DRA driver) "
        "[default: 2xH100-80GB,1xA100-80GB,1xA100-80GB:mig=1g.10gb].",
    ),
    kueue: bool = typer.Option(
        False, "--kueue", help="Serve Kueue's CRDs too (its controller is not simulated)."
    ),
    prometheus: str = typer.Option(
        "prometheus",
        "--prometheus-bin",
        metavar="PATH",
        help="The Prometheus executable that scrapes the simulated dcgm-exporters; "
        "none found: no Prometheus.",
    ),
    output: Format = options.output(),
) -> None:
    """Start a simulated GPU cluster in the background: the Kubernetes API emulator the
    tests use, GPU nodes labelled as the GPU Operator labels them, a simulated scheduler,
    Job and JobSet controllers and kubelets, dcgm-exporters and, when Prometheus is
    installed, a Prometheus scraping them. Prints the KUBECONFIG to export."""
    from gpuctl.sandbox import service
    from gpuctl.sim.cluster import DEFAULT_NODES

    sandbox = service.start(nodes or DEFAULT_NODES, kueue, prometheus)
    _show(sandbox, output, started=True)


def status(output: Format = options.output()) -> None:
    """Whether a sandbox runs, and how to reach it (exit code 1 when none runs)."""
    from gpuctl.common.errors import GpuctlError
    from gpuctl.sandbox import service

    sandbox = service.find()
    if sandbox is None:
        raise GpuctlError("no sandbox is running", hint="gpuctl sandbox start")
    _show(sandbox, output, started=False)


def stop(output: Format = options.output()) -> None:
    """Stop the sandbox; everything created in it is gone."""
    from gpuctl.sandbox import service

    sandbox = service.stop()
    if output != Format.table:
        echo(dump({"stopped": sandbox is not None, "pid": sandbox and sandbox.pid}, output.value))
    elif sandbox is None:
        echo("no sandbox was running\n")
    else:
        echo(
            f"sandbox stopped (pid {sandbox.pid}): the simulated cluster and its objects are gone\n"
        )


def _show(sandbox, output: Format, started: bool) -> None:
    if output != Format.table:
        echo(dump(sandbox.to_dict(), output.value))
        return
    lines = [
        f"sandbox {'started' if started else 'running'}: {SIMULATOR}",
        f"  nodes       {sandbox.nodes}" + (" (+ Kueue's CRDs)" if sandbox.kueue else ""),
        f"  API         {sandbox.api}  (pid {sandbox.pid})",
        f"  Prometheus  {sandbox.prometheus}"
        if sandbox.prometheus
        else "  Prometheus  none (install prometheus for the cluster view)",
        "Use it in this shell:",
        f"  export KUBECONFIG={sandbox.kubeconfig}",
    ]
    if sandbox.prometheus:
        lines.append(f"  export GPUCTL_PROMETHEUS_URL={sandbox.prometheus}")
    echo("\n".join(lines) + "\n")
