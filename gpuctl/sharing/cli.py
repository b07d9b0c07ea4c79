"""`gpuctl share timeslice|off|show`: GPU sharing through the NVIDIA device plugin."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import Format
from gpuctl.cli.workflow import changes

share_app = typer.Typer(
    help="Share GPUs between pods: time-slicing or MPS via the NVIDIA device plugin.",
    no_args_is_help=True,
)


_PLUGIN_NAMESPACE = options.namespace(
    "The device plugin's namespace (default: where its DaemonSet runs)."
)
_CONFIG_MAP = typer.Option(
    None,
    "--config-map",
    help="ConfigMap of device plugin configs (default: the one the plugin mounts).",
)
_DRY_RUN = options.dry_run(
    "Show the plan; change nothing. Works without a cluster too (see docs/sharing.md)."
)
Replicas = Annotated[int, typer.Option("--replicas", help="Pods that may share each GPU.")]
Mps = Annotated[
    bool,
    typer.Option("--mps", help="Share with CUDA MPS instead of time-slicing (not on MIG nodes)."),
]
RenameByDefault = Annotated[
    bool,
    typer.Option(
        "--rename-by-default",
        help="Advertise shared GPUs as nvidia.com/gpu.shared (jobs ask with `shared: true`).",
    ),
]
FailGreaterThanOne = Annotated[
    bool | None,
    typer.Option(
        "--fail-requests-greater-than-one/--no-fail-requests-greater-than-one",
        help="Refuse pods that ask for more than one replica. Default: no for time-slicing, "
        "yes for MPS (the plugin's defaults); --no-… with --mps writes an explicit false, "
        "which the device plugin honours from v0.20.0.",
        show_default=False,
    ),
]
Resources = Annotated[
    list[str],
    typer.Option(
        "--resource",
        help="Resource to share (repeatable; default nvidia.com/gpu; "
        "nvidia.com/mig-<profile> for MIG slices).",
    ),
]
ConfigName = Annotated[
    str | None,
    typer.Option("--name", help="Config name (ConfigMap key and node label value)."),
]
Replace = Annotated[
    bool, typer.Option("--replace", help="Switch nodes between time-slicing and MPS.")
]


def register(app: typer.Typer) -> None:
    app.add_typer(share_app, name="share")


@share_app.command("timeslice")
@changes
@uses_cluster
def timeslice(
    replicas: Replicas,
    mps: Mps = False,
    rename_by_default: RenameByDefault = False,
    fail_gt_one: FailGreaterThanOne = None,
    resource: Resources = [],  # noqa: B006 - typer copies list defaults
    nodes: list[str] = options.nodes(),
    old_nodes: list[str] = options.old_nodes(),
    selector: str | None = options.selector(
        "Label selector for the nodes (default: all GPU nodes)."
    ),
    name: ConfigName = None,
    namespace: str | None = _PLUGIN_NAMESPACE,
    config_map: str | None = _CONFIG_MAP,
    replace: Replace = False,
    dry_run: bool = _DRY_RUN,
    output: Format | None = options.output("yaml or json: print the objects.", default=None),
    yes: bool = options.yes(),
) -> None:
    """Let several pods share each GPU on the chosen nodes (time-slicing, or MPS with --mps)."""
    from gpuctl.cli.output import err_console
    from gpuctl.cli.workflow import StepPrinter, go_ahead
    from gpuctl.common.errors import UsageError
    from gpuctl.k8s import device_plugin
    from gpuctl.sharing import service, views
    from gpuctl.sharing.core import config as core
    from gpuctl.sharing.core.plans import plan_offline

    names = options.node_names(nodes, old_nodes)
    if names and selector:
        raise UsageError("give --node or --selector, not both")
    strategy = device_plugin.MPS if mps else device_plugin.TIME_SLICING
    spec = core.make_sharing(strategy, replicas, rename_by_default, fail_gt_one, tuple(resource))
    if name:
        core.check_name(name)
    kube, why = application().kube_or_offline(application().offline_ok(dry_run))
    if kube is None:
        assert why is not None
        p = plan_offline(spec, name, names, namespace, config_map)
        views.show_offline_share(why, p, names, selector, (namespace, config_map), output)
        return
    p = service.plan_share(kube, spec, name, names, selector, namespace, config_map, replace)
    views.show_share_plan(p, output)
    if go_ahead(p.plan, p.question, dry_run=dry_run, yes=yes):
        service.apply(kube, p, StepPrinter())
        err_console().print(
            f"[green]done[/]: {len(p.changing)} node(s) labelled {device_plugin.CONFIG_LABEL}={p.name}"
        )


@share_app.command("off")
@changes
@uses_cluster
def off(
    nodes: list[str] = options.nodes(),
    old_nodes: list[str] = options.old_nodes(),
    selector: str | None = options.selector(),
    namespace: str | None = _PLUGIN_NAMESPACE,
    config_map: str | None = _CONFIG_MAP,
    dry_run: bool = _DRY_RUN,
    output: Format | None = options.output(
        "yaml or json: print the objects (node label patches, ConfigMap keys added).",
        default=None,
    ),
    yes: bool = options.yes(),
) -> None:
    """Stop sharing on the chosen nodes: remove their nvidia.com/device-plugin.config label,
    so that they run the plugin's default config, and make sure that default shares
    nothing (else label them with a config without sharing)."""
    from gpuctl.cli.output import err_console
    from gpuctl.cli.workflow import StepPrinter, go_ahead
    from gpuctl.common.errors import UsageError
    from gpuctl.sharing import service, views

    names = options.node_names(nodes, old_nodes)
    if bool(names) == bool(selector):
        raise UsageError("give the nodes: --node NAME... or --selector LABELS")
    kube, why = application().kube_or_offline(application().offline_ok(dry_run))
    if kube is None:
        assert why is not None
        views.show_off_offline(why, names, selector, output)
        return
    p = service.plan_off(kube, names, selector, namespace, config_map)
    views.show_off_plan(p, output)
    if go_ahead(p.plan, p.question, dry_run=dry_run, yes=yes):
        service.apply(kube, p, StepPrinter())
        err_console().print(f"[green]done[/]: {len(p.changes)} node(s) on a config without sharing")


@share_app.command("show")
@uses_cluster
def show(
    namespace: str | None = options.namespace("The device plugin's namespace."),
    config_map: str | None = typer.Option(
        None, "--config-map", help="ConfigMap of device plugin configs."
    ),
    output: Format = options.output(),
) -> None:
    """List GPU nodes with their sharing strategy and replicas."""
    from gpuctl.sharing import service, views

    target, rows = service.show(application().kube(), namespace, config_map)
    views.show_nodes(target, rows, output)
