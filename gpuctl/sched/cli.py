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


def register(app: typer.Typer) -> None:
    app.add_typer(sched_app, name="sched")


@sched_app.command("render")
@uses_cluster
def render(
    strategy: Strategy = typer.Option(
        Strategy.binpack,
        "--strategy",
        help="binpack: NodeResourcesFit MostAllocated (fill the fullest node); "
        "spread: LeastAllocated (the emptiest).",
    ),
    gpu_weight: int | None = typer.Option(
        None,
        "--gpu-weight",
        metavar="W",
        help="Weight of nvidia.com/gpu against cpu and memory (weight 1 each), 1..100; "
        "default 20: one more GPU in use on an 8-GPU node outweighs any cpu and memory use.",
    ),
    name: str = typer.Option(
        "gpuctl-binpack", "--name", help="The schedulerName pods ask for (job spec `scheduler:`)."
    ),
    shape: str | None = typer.Option(
        None,
        "--shape",
        metavar="U:S,...",
        help="Score with RequestedToCapacityRatio and these utilization:score points "
        "(0..100 : 0..10), e.g. 0:0,100:10.",
    ),
    deploy: bool = typer.Option(
        False,
        "--deploy",
        help="Also print the ServiceAccount, RBAC, ConfigMap and Deployment that run it as "
        "a second scheduler (kubectl apply -f - them).",
    ),
    namespace: str = options.namespace(
        "Namespace the scheduler runs in and holds its lease.", default="kube-system"
    ),
    kube_version: str | None = typer.Option(
        None,
        "--kube-version",
        metavar="vX.Y.Z",
        help="With --deploy: the cluster's version, for the kube-scheduler image "
        "(default: read from the cluster's /version).",
    ),
    output: DataFormat = options.data_output(),
) -> None:
    """Print a KubeSchedulerConfiguration whose profile scores nodes by GPU. Needs no
    cluster, except --deploy without --kube-version (it reads the server's version)."""
    from gpuctl.sched.core import profile as sched

    p = sched.make_profile(name, strategy.value, gpu_weight, shape, namespace)
    config = sched.scheduler_config(p)
    if not deploy:
        echo(dump(config, output.value))
        return
    if kube_version is not None:
        image = sched.image(kube_version)
    else:
        image = _cluster_image()
    objects = sched.deploy_objects(p, image, sched.config_text(config))
    echo(dump_documents(objects, output.value))


def _cluster_image() -> str:
    """The kube-scheduler image of the cluster's own version, read from its /version."""
    from gpuctl.common.errors import GpuctlError
    from gpuctl.sched.core import profile as sched

    try:
        with application().kube() as kube:
            version, host = kube.server_version(), kube.host
    except GpuctlError as e:
        offline = "or give --kube-version vX.Y.Z to render without a cluster"
        raise type(e)(e.message, hint=f"{e.hint}; {offline}" if e.hint else offline) from None
    return sched.image(version, f"the version of {host}")
