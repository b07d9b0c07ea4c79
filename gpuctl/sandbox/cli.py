"""`gpuctl sandbox start|status|list|stop`: simulated GPU clusters on this machine, by name."""

from __future__ import annotations

import typer

from gpuctl.cli import options
from gpuctl.cli.output import Format, dump, echo

SIMULATOR = "a simulator for trying gpuctl, not a Kubernetes cluster"
NAME = typer.Option(
    "gpuctl",
    "--name",
    metavar="NAME",
    help="The sandbox's name: each has its own state, kubeconfig and Prometheus.",
)


def register(app: typer.Typer) -> None:
    sandbox = typer.Typer(
        help="A local simulated GPU cluster to try every command on (a simulator).",
        no_args_is_help=True,
    )
    sandbox.command("start")(start)
    sandbox.command("status")(status)
    sandbox.command("list")(listing)
    sandbox.command("stop")(stop)
    app.add_typer(sandbox, name="sandbox")


def start(
    nodes: str = typer.Option(
        None,
        "--gpu-nodes",
        metavar="SPEC",
        help="GPU nodes, COUNTxMODEL[:mig=PROFILE|:mig-config=CONFIG|:dra],… (8 GPUs each; "
        "mig= splits every GPU into PROFILE, MIG single strategy; mig-config= applies a "
        "config of the GPU Operator's mig-parted ConfigMap, mixed strategy; dra: GPUs "
        "published by a simulated DRA driver); other vendors: COUNTxMI300X (AMD, 8 GPUs), "
        "COUNTxTPU-v5e:TOPOLOGY or COUNTxTPU-v6e:TOPOLOGY (COUNT slices, 4 chips a host), "
        "each with its exporter "
        "[default: 2xH100-80GB,1xA100-80GB,1xA100-80GB:mig=1g.10gb].",
    ),
    kueue: bool = typer.Option(
        False,
        "--kueue",
        help="Serve Kueue's CRDs and simulate its controller: admission by ClusterQueue quota.",
    ),
    prometheus: str = typer.Option(
        "prometheus",
        "--prometheus-bin",
        metavar="PATH",
        help="The Prometheus executable that scrapes the simulated dcgm-exporters; "
        "none found: no Prometheus.",
    ),
    name: str = NAME,
    output: Format = options.output(),
) -> None:
    """Start a simulated GPU cluster in the background: the Kubernetes API emulator the
    tests use, GPU nodes labelled as the GPU Operator labels them, a simulated scheduler,
    controllers (Deployment, ReplicaSet, Job, JobSet, garbage collector, the GPU Operator's
    MIG manager; Kueue with --kueue), kubelets that write pod logs, dcgm-exporters and, when
    Prometheus is installed, a Prometheus of its own (empty at start) scraping them. Prints
    the KUBECONFIG to export."""
    from gpuctl.sandbox import service
    from gpuctl.sim.cluster import DEFAULT_NODES

    sandbox = service.start(name, nodes or DEFAULT_NODES, kueue, prometheus)
    _show(sandbox, output, started=True)


def status(name: str = NAME, output: Format = options.output()) -> None:
    """Whether the sandbox runs, and how to reach it (exit code 1 when it does not)."""
    from gpuctl.common.errors import GpuctlError
    from gpuctl.sandbox import service

    sandbox = service.find(name)
    if sandbox is None:
        raise GpuctlError(f"no sandbox {name} is running", hint=_start_hint(name))
    _show(sandbox, output, started=False)


def listing(output: Format = options.output()) -> None:
    """Every sandbox of this user not stopped: name, running or crashed, API, Prometheus."""
    from gpuctl.sandbox import service

    rows = service.listing()
    if output != Format.table:
        found = [
            {"name": n, "running": s is not None, **(s.to_dict() if s else {}), "left": left}
            for n, s, left in rows
        ]
        echo(dump({"sandboxes": found}, output.value))
        return
    from gpuctl.sandbox import views

    views.listing(rows)


def stop(name: str = NAME, output: Format = options.output()) -> None:
    """Stop the sandbox and everything it started, also after it crashed or hung; everything
    created in it is gone."""
    from gpuctl.sandbox import service

    stopped = service.stop(name)
    if output != Format.table:
        echo(dump({"name": name, "stopped": bool(stopped), "pids": stopped}, output.value))
    elif not stopped:
        echo(f"no sandbox {name} was running\n")
    else:
        pids = ", ".join(f"{role} pid {pid}" for role, pid in stopped.items())
        echo(f"sandbox {name} stopped ({pids}): the simulated cluster and its objects are gone\n")


def _start_hint(name: str) -> str:
    return "gpuctl sandbox start" + ("" if name == "gpuctl" else f" --name {name}")


def _show(sandbox, output: Format, started: bool) -> None:
    if output != Format.table:
        echo(dump(sandbox.to_dict(), output.value))
        return
    lines = [
        f"sandbox {sandbox.name} {'started' if started else 'running'}: {SIMULATOR}",
        f"  nodes       {sandbox.nodes}" + (" (+ Kueue)" if sandbox.kueue else ""),
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
