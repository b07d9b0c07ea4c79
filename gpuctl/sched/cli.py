"""`gpuctl sched render`: print the bin-packing scheduler profile, or everything that runs it
as a second scheduler."""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import DataFormat, dump, dump_documents, echo
from gpuctl.k8s import images

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube

sched_app = typer.Typer(
    help="A kube-scheduler profile that packs GPU pods onto the fewest nodes.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


class Strategy(str, enum.Enum):
    binpack = "binpack"
    spread = "spread"


STRATEGY = typer.Option(
    Strategy.binpack,
    "--strategy",
    help="binpack: NodeResourcesFit MostAllocated (fill the fullest node); "
    "spread: LeastAllocated (the emptiest).",
)
GPU_WEIGHT = typer.Option(
    None,
    "--gpu-weight",
    metavar="W",
    help="Weight of nvidia.com/gpu against cpu and memory (weight 1 each), 1..100; "
    "default 20: one more GPU in use on an 8-GPU node outweighs any cpu and memory use.",
)
NAME = typer.Option(
    None,
    "--name",
    help="The schedulerName pods ask for (job spec `scheduler:`); default gpuctl-binpack, "
    "with --extender gpuctl-fgd.",
)
EXTENDER = typer.Option(
    False,
    "--extender",
    help="A profile scored by gpuctl's FGD scheduler extender (`gpuctl sched extender`, run "
    "beside kube-scheduler by --deploy) instead of NodeResourcesFit.",
)
EXTENDER_IMAGE = typer.Option(
    images.DEFAULT,
    "--extender-image",
    metavar="IMAGE",
    help="With --extender --deploy: an image with gpuctl installed, for the extender container "
    "(`make image` builds the default; docs/image.md).",
)
SHAPE = typer.Option(
    None,
    "--shape",
    metavar="U:S,...",
    help="Score with RequestedToCapacityRatio and these utilization:score points "
    "(0..100 : 0..10), e.g. 0:0,100:10.",
)
DEPLOY = typer.Option(
    False,
    "--deploy",
    help="Also print the ServiceAccount, RBAC, ConfigMap and Deployment that run it as "
    "a second scheduler (kubectl apply -f - them).",
)
KUBE_VERSION = typer.Option(
    None,
    "--kube-version",
    metavar="vX.Y.Z",
    help="With --deploy: the cluster's version, for the kube-scheduler image "
    "(default: read from the cluster's /version).",
)


def register(app: typer.Typer) -> None:
    app.add_typer(sched_app, name="sched")


@sched_app.command("render")
@uses_cluster
def render(
    strategy: Strategy = STRATEGY,
    gpu_weight: int | None = GPU_WEIGHT,
    name: str | None = NAME,
    shape: str | None = SHAPE,
    extender: bool = EXTENDER,
    extender_image: str = EXTENDER_IMAGE,
    deploy: bool = DEPLOY,
    namespace: str = options.namespace(
        "Namespace the scheduler runs in and holds its lease.", default="kube-system"
    ),
    kube_version: str | None = KUBE_VERSION,
    output: DataFormat = options.data_output(),
) -> None:
    """Print a KubeSchedulerConfiguration whose profile scores nodes by GPU. Needs no
    cluster, except --deploy without --kube-version (it reads the server's version). With
    a cluster it checks that GPU nodes keep pods without GPUs out (a NoSchedule taint), and
    warns if not; without one it says it assumes so."""
    from gpuctl.sched import service
    from gpuctl.sched.core import profile as sched

    default_name = sched.EXTENDER_NAME if extender else sched.DEFAULT_NAME
    p = sched.make_profile(
        name or default_name, strategy.value, gpu_weight, shape, namespace, extender
    )
    sched.check_extender_image(extender, deploy, extender_image)
    kube: Kube | None
    if deploy and kube_version is None:
        image = service.cluster_image(application().kube)
        kube = application().kube()
    else:
        image = sched.image(kube_version) if deploy and kube_version else ""
        kube, _ = application().kube_or_offline(offline_ok=True)
    _warn(service.taint_warning(kube))
    if not deploy:
        echo(dump(sched.scheduler_config(p), output.value))
        return
    echo(dump_documents(service.deployment(p, image, extender_image), output.value))


def _warn(text: str | None) -> None:
    from gpuctl.cli.output import err_console

    if text:
        err_console().print(f"warning: {text}", style="yellow", markup=False)


EXTENDER_HOST = typer.Option(
    "127.0.0.1",
    "--host",
    help="Address to listen on: an IP address or a host name of this machine "
    "(127.0.0.1: this machine only; 0.0.0.0 or ::, every interface).",
)
EXTENDER_PORT = typer.Option(8888, "--port", help="Port to listen on, 1..65535.")


@sched_app.command("extender")
@uses_cluster
def extender_command(
    host: str = EXTENDER_HOST,
    port: int = EXTENDER_PORT,
    gpu_label_key: str | None = options.gpu_label_key(),
) -> None:
    """Serve kube-scheduler's extender protocol (filter, prioritize; /healthz) with FGD
    scoring over the cluster's nodes and pods, kept by watches. Runs until interrupted;
    `gpuctl sched render --extender --deploy` runs it beside kube-scheduler. Logs one line
    per refused request, and with --debug why a pod passes unscored."""
    from gpuctl.cli.output import inform
    from gpuctl.sched import service
    from gpuctl.sched.extender import Log

    _check_listen(host, port)
    label_key = options.resolve_gpu_label_key(gpu_label_key)
    log = Log(inform, application().debug)
    service.serve_extender(application().kube, host, port, label_key, log)


_HOST_NAME = re.compile(
    r"(?=.{1,253}\.?\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?\Z"
)


def _check_listen(host: str, port: int) -> None:
    """--host and --port as given, before anything is bound or read."""
    import ipaddress

    from gpuctl.common.errors import UsageError

    if not 0 < port < 65536:
        raise UsageError(f"--port must be 1 to 65535, got {port}")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOST_NAME.match(host):
            raise UsageError(
                f"--host {host!r}: not an IP address or a host name",
                hint="e.g. 127.0.0.1 (this machine only), 0.0.0.0 or :: (every interface)",
            ) from None
