"""`gpuctl sched render`: print the bin-packing scheduler profile, or everything that runs it
as a second scheduler."""

from __future__ import annotations

import enum

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import DataFormat, dump, dump_documents, echo

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
    "gpuctl-binpack", "--name", help="The schedulerName pods ask for (job spec `scheduler:`)."
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
    name: str = NAME,
    shape: str | None = SHAPE,
    deploy: bool = DEPLOY,
    namespace: str = options.namespace(
        "Namespace the scheduler runs in and holds its lease.", default="kube-system"
    ),
    kube_version: str | None = KUBE_VERSION,
    output: DataFormat = options.data_output(),
) -> None:
    """Print a KubeSchedulerConfiguration whose profile scores nodes by GPU. Needs no
    cluster, except --deploy without --kube-version (it reads the server's version)."""
    from gpuctl.sched import service
    from gpuctl.sched.core import profile as sched

    p = sched.make_profile(name, strategy.value, gpu_weight, shape, namespace)
    if not deploy:
        echo(dump(service.configuration(p), output.value))
        return
    if kube_version is not None:
        image = sched.image(kube_version)
    else:
        image = service.cluster_image(application().kube)
    echo(dump_documents(service.deployment(p, image), output.value))
