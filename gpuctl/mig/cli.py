"""`gpuctl mig …`: MIG layouts validated against the GPU's geometry, planned for a demand,
applied on this node through NVML or on a cluster through the GPU Operator."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import DataFormat, Format, dump, echo, err_console
from gpuctl.cli.workflow import changes, go_ahead
from gpuctl.common.errors import UsageError
from gpuctl.common.numbers import whole_number

if TYPE_CHECKING:
    from gpuctl.adapters.nvml import Nvml

mig_app = typer.Typer(
    help="Partition GPUs with MIG: plan, configure, show, assert, export.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _profile_count(item: str) -> str | None:
    """Why ITEM is not PROFILE[=N] (or all-PROFILE, all-disabled), or None; the profile
    is checked against the GPU's geometry later."""
    name, sep, count = item.partition("=")
    if not name.strip():
        return "has no profile name before '='"
    if sep and whole_number(count.strip()) is None:
        return "has no whole number after '='"
    return None


def _gpus_of_a_model(item: str) -> str | None:
    """Why ITEM is not [N x]MODEL, or None (the model is looked up later)."""
    count, x, model = item.partition("x")
    if x and count.strip().isdigit() and whole_number(count.strip()) in (None, 0):
        return "needs a count from 1"
    return None if model.strip() or not x else "has no GPU model after the count"


def _index(item: str) -> str | None:
    return None if whole_number(item) is not None else "is not a GPU index"


def _nvml(simulate: str | None) -> Nvml:
    """This node's NVML session (Application.nvml); a usage error where --simulate (or
    GPUCTL_SIMULATE) names another vendor's accelerators: MIG is NVIDIA's."""
    from gpuctl.gpus.vendor_models import spec_vendors

    spec = simulate
    if spec and spec_vendors(spec) - {"nvidia"}:
        raise UsageError(
            f"--simulate {spec}: MIG is NVIDIA's, and this names another vendor's accelerators",
            hint="AMD Instinct GPUs partition through their own compute and memory partition "
            "modes; Neuron, TPU and Gaudi devices have no MIG",
        )
    return application().nvml(simulate)


_SIMULATE = options.listed(
    None,
    "--simulate",
    envvar="GPUCTL_SIMULATE",
    metavar="SPEC",
    help="Use a simulated node instead of the NVML driver, e.g. 8xH100-80GB.",
)
_PROFILES_GPU = typer.Option(
    None,
    "--gpu",
    metavar="MODEL",
    help="A GPU model (H100-80GB, A100-40GB, …) or 'all'; default: the GPUs of this node.",
)
_DEMAND = options.listed(
    None,
    "--demand",
    metavar="PROFILE=N,…",
    check=_profile_count,
    help="MIG devices needed, e.g. 1g.10gb=9,3g.40gb=3.",
)
_CHECK_LAYOUT = options.listed(
    None,
    "--layout",
    metavar="PROFILE=N,…",
    check=_profile_count,
    help="Check one GPU's layout instead: place it or say why it cannot be.",
)
_PLAN_GPU = typer.Option(
    None, "--gpu", metavar="MODEL", help="GPU model, as many as needed (e.g. H100-80GB)."
)
_FLEET = options.listed(
    None,
    "--gpus",
    metavar="NxMODEL,…",
    check=_gpus_of_a_model,
    help="The GPUs there are, e.g. 8xH100-80GB or 4xH100-80GB,4xA100-80GB.",
)
_FILE = typer.Option(
    None, "-f", "--file", metavar="CONFIG.yaml", help="A mig-parted v1 config file."
)
_CONFIG = typer.Option(
    None,
    "-c",
    "--config",
    metavar="NAME",
    help="The config to apply (from -f, or the GPU Operator's with --node/--selector).",
)
_LAYOUT = options.listed(
    None,
    "--layout",
    metavar="LAYOUT",
    check=_profile_count,
    help="Shorthand: 3g.40gb=2,1g.10gb=1, all-1g.10gb, all-disabled or all-enabled.",
)
_INDEXES = options.listed(
    None, "--gpus", metavar="0,1,…", check=_index, help="With --layout: only these GPU indexes."
)
_YES = typer.Option(False, "--yes", "-y", help="Apply without asking.")
_DRY_RUN = typer.Option(False, "--dry-run", help="Show the plan and stop.")
_RESET = typer.Option(
    False,
    "--reset",
    help="Reset a GPU whose new MIG mode the driver holds pending (only if nothing runs "
    "on it); a plan that may reset a GPU refuses to start without it.",
)
_NODE = options.nodes("Cluster: label this node (repeat it, or separate names with commas).")
_SELECTOR = options.selector("Cluster: label the nodes matching this.")
_RENDER_CONFIGMAP = typer.Option(
    False,
    "--render-configmap",
    help="Print the GPU Operator ConfigMap holding this layout (-f or --layout) and stop.",
)
_CONFIGMAP_NAME = typer.Option(
    "custom-mig-config",
    "--configmap-name",
    callback=options.optional_name,
    help="The mig-parted ConfigMap to render, or to look the config up in (besides "
    "default-mig-parted-config).",
)
_OPERATOR_NAMESPACE = options.namespace("The GPU Operator's namespace.", default="gpu-operator")
_TIMEOUT = options.seconds(
    600.0,
    "--timeout",
    low=1,
    high=86400,
    help="Cluster: seconds to wait for the operator (1 to 86400).",
)
_CONFIGURE_OUTPUT = options.output(
    "table (the plan as text), json or yaml (the plan as data, the text on stderr; "
    "with --render-configmap: the ConfigMap)."
)
_ASSERT_OUTPUT = options.output(
    "table, json or yaml: whether it is applied and, per GPU, what differs."
)


def register(app: typer.Typer) -> None:
    app.add_typer(mig_app, name="mig")


@mig_app.command("profiles")
def profiles(
    gpu: str | None = _PROFILES_GPU,
    simulate: str | None = _SIMULATE,
    output: Format = options.output(),
) -> None:
    """List the MIG profiles of a GPU model: ids, slices, memory, placements, limits."""
    from gpuctl.gpus.geometry import find_model, models
    from gpuctl.mig import service, views
    from gpuctl.mig.core.report import profile_rows

    if gpu == "all":
        chosen = list(models())
    elif gpu:
        chosen = [find_model(gpu)]
    else:
        chosen, unknown = service.node_models(_nvml(simulate))
        for name in unknown:
            err_console().print(f"{name}: not a MIG GPU known to gpuctl")
    rows = profile_rows(chosen)
    if not views.print_data(rows, output):
        views.profiles(rows)


@mig_app.command("plan")
def plan(
    demand: str | None = _DEMAND,
    layout: str | None = _CHECK_LAYOUT,
    gpu: str | None = _PLAN_GPU,
    gpus: str | None = _FLEET,
    output: Format = options.output(),
) -> None:
    """The fewest GPUs, and a layout for each, that hold a demand of MIG devices."""
    from gpuctl.gpus import mig_demand
    from gpuctl.gpus.mig_layout import parse_layout_text
    from gpuctl.mig import views
    from gpuctl.mig.core import plan as mig_plan
    from gpuctl.mig.core import report

    wrong = [
        f"exactly one of {names}"
        for names, given in (
            ("--gpu MODEL or --gpus NxMODEL", (gpu, gpus)),
            ("--demand PROFILE=N,… or --layout PROFILE=N,…", (demand, layout)),
        )
        if sum(bool(v) for v in given) != 1
    ]
    if wrong:  # every missing option at once, not one a run
        raise UsageError(
            "give " + " and ".join(wrong), hint="e.g. --demand 1g.10gb=9 --gpu H100-80GB"
        )
    fleet = mig_plan.parse_fleet(gpu or gpus)
    if gpu and fleet[0].count is not None:
        raise UsageError("--gpu takes a model; use --gpus for a count (e.g. --gpus 8xH100-80GB)")
    if layout:
        fits = report.layout_fits(fleet, parse_layout_text(layout))
        if not views.print_data(fits, output):
            views.layout_fits(fits)
        return
    data = report.demand_data(mig_demand.plan_demand(mig_plan.parse_demand(demand), fleet))
    if not views.print_data(data, output):
        views.demand_plan(data)


@mig_app.command("show")
@uses_cluster
def show(
    simulate: str | None = _SIMULATE,
    node: list[str] = options.nodes(
        "A cluster node instead (repeat it, or separate names with commas): its MIG config "
        "and state, and the slices it advertises and its pods hold, from its labels and "
        "resources."
    ),
    output: Format = options.output(),
) -> None:
    """Current MIG layout of each GPU on this node: placements, memory, processes; or, with
    --node, of cluster nodes as the GPU Operator labels them."""
    from gpuctl.mig import service, views

    names = options.node_names(node)
    if names:  # cluster nodes: --simulate (or GPUCTL_SIMULATE) is this node's
        with application().kube() as kube:
            nodes = service.show_cluster_nodes(kube, names)
        if not views.print_data(nodes, output):
            views.cluster_nodes(nodes)
        return
    data = service.show(_nvml(simulate))
    if not views.print_data(data, output):
        views.node_state(data)


@mig_app.command("export")
def export(
    name: str = typer.Option("current", "--name", help="Name of the config in the file."),
    simulate: str | None = _SIMULATE,
    output: DataFormat = options.data_output(),
    configmap: bool = typer.Option(
        False, "--configmap", help="Wrap it in the GPU Operator's mig-parted ConfigMap."
    ),
) -> None:
    """The current layout as a mig-parted v1 config (configure/assert read it back)."""
    from gpuctl.mig import service

    echo(dump(service.export(_nvml(simulate), name, configmap), output.value))


def _indexes(text: str | None) -> list[int] | None:
    """The GPU indexes of --gpus (each checked as it was parsed), once each."""
    return None if text is None else [*dict.fromkeys(map(int, options.comma_list(text, "--gpus")))]


@mig_app.command("configure")
@changes
@uses_cluster
def configure(
    file: str | None = _FILE,
    config: str | None = _CONFIG,
    layout: str | None = _LAYOUT,
    gpus: str | None = _INDEXES,
    yes: bool = _YES,
    dry_run: bool = _DRY_RUN,
    reset: bool = _RESET,
    node: list[str] = _NODE,
    selector: str | None = _SELECTOR,
    render_configmap: bool = _RENDER_CONFIGMAP,
    configmap_name: str = _CONFIGMAP_NAME,
    namespace: str = _OPERATOR_NAMESPACE,
    timeout: float = _TIMEOUT,
    simulate: str | None = _SIMULATE,
    output: Format = _CONFIGURE_OUTPUT,
) -> None:
    """Apply a MIG layout: on this node via NVML, or on cluster nodes via the GPU Operator."""
    from gpuctl.mig import service

    if render_configmap:
        form = "yaml" if output == Format.table else output.value
        cm = service.render_configmap(
            file, config, layout, _indexes(gpus), configmap_name, namespace
        )
        echo(dump(cm, form))
        return
    names = options.node_names(node)
    if not (names or selector):
        indexes = _indexes(gpus)
        nvml = _nvml(simulate)
        _configure_node(file, config, layout, indexes, yes, dry_run, reset, nvml, output)
        return
    if layout:
        raise UsageError(
            "on a cluster the GPU Operator applies a named config: use -c NAME "
            "(render a custom one with --layout … --render-configmap)"
        )
    _check_cluster_options(config, selector)
    assert config is not None  # checked
    with application().kube() as kube:
        plan = service.plan_cluster(kube, file, config, names, selector, namespace, configmap_name)
        _configure_cluster(kube, plan, yes, dry_run, timeout, output)


def _check_cluster_options(config: str | None, selector: str | None) -> None:
    """What the cluster form is given, checked before anything is read: the config is a
    label value, the selector one Kubernetes reads."""
    from gpuctl.common import selector as label_selector
    from gpuctl.common.k8s_names import label_value

    if not config:
        raise UsageError(
            "--node/--selector need -c CONFIG (a config in the GPU Operator's mig-parted ConfigMap)"
        )
    if not label_value(config):
        raise UsageError(f"-c {config!r} is not a config name a node label can hold")
    if selector is not None:
        label_selector.parse(selector)


def _configure_node(file, config, layout, indexes, yes, dry_run, reset, nvml, output) -> None:
    from gpuctl.mig import service, views

    write = views.text_writer(output)
    with nvml, service.configuring(nvml):
        plan = service.plan_node(nvml, file, config, layout, indexes)
        views.print_data(plan.to_dict(dry_run), output)
        if plan.untouched:
            write("no GPU on this node is matched by that config: nothing to do\n")
            return
        write("\n".join(plan.lines()) + "\n")
        if not plan.empty:
            service.check_node(nvml, plan)
        if not dry_run:  # the plan said which GPUs it may reset
            service.check_resets(plan, reset)
        question = "Apply these MIG changes?"
        if not go_ahead(plan, question, dry_run=dry_run, yes=yes, show=_line(write)):
            return
        service.configure_node(nvml, plan, allow_reset=reset, progress=views.MigProgress())
    write("applied\n")


def _configure_cluster(kube, plan, yes: bool, dry_run: bool, timeout: float, output) -> None:
    from gpuctl.mig import service, views
    from gpuctl.mig.core.operator import CONFIG_LABEL

    write = views.text_writer(output)
    views.print_data(plan.to_dict(dry_run), output)
    write("".join(line + "\n" for line in plan.lines()))
    question = f"Label {len(plan.pending)} node(s) {CONFIG_LABEL}={plan.config}?"
    # with no label to change, the operator's state is still followed to success
    if (dry_run or plan.pending) and not go_ahead(
        plan, question, dry_run=dry_run, yes=yes, show=_line(write)
    ):
        return
    service.configure_cluster(kube, plan, timeout, views.MigProgress(), views.print_state)
    write(f"MIG config {plan.config!r} applied on {len(plan.targets)} node(s)\n")


def _line(write: Callable[[str], None]) -> Callable[[str], None]:
    """WRITE (which writes text as it is) for one line: where go_ahead's words go."""
    return lambda text: write(text + "\n")


@mig_app.command("assert")
def assert_(
    file: str | None = typer.Option(None, "-f", "--file", metavar="CONFIG.yaml"),
    config: str | None = typer.Option(None, "-c", "--config", metavar="NAME"),
    layout: str | None = typer.Option(None, "--layout", metavar="LAYOUT"),
    gpus: str | None = typer.Option(None, "--gpus", metavar="0,1,…"),
    simulate: str | None = _SIMULATE,
    output: Format = _ASSERT_OUTPUT,
) -> None:
    """Exit 0 if the config is applied on this node; else exit 1 saying what differs."""
    from gpuctl.mig import service

    indexes = _indexes(gpus)
    result = service.assess(_nvml(simulate), file, config, layout, indexes)
    if output != Format.table:
        echo(dump(result.to_dict(), output.value))
    if not result.holds:
        raise result.error()
    if output == Format.table:
        echo("the selected MIG configuration is applied\n")


_REBALANCE_CONFIGMAP = typer.Option(
    None,
    "--configmap",
    metavar="NAME",
    callback=options.optional_name,
    help="The ConfigMap the MIG manager reads, where gpuctl adds its configs beside NVIDIA's "
    "(default: the ClusterPolicy's migManager.config.name, else default-mig-parted-config).",
)
_REBALANCE_OUTPUT = options.output(
    "table (the plan as text), json or yaml (the plan as data, the text on stderr)."
)
_FORECAST = typer.Option(
    None, "--demand", metavar="PROFILE=N,…", help="Demand to add to the pending pods' (forecast)."
)


_DRAIN = typer.Option(
    False,
    "--drain",
    help="Also change GPUs whose pods the policy lets gpuctl evict: Job, ReplicaSet and "
    "StatefulSet pods in a --drain-namespace, not marked gpuctl.io/reclaim: never or "
    "gpuctl.io/evict: never, without emptyDir/hostPath data (PodDisruptionBudgets hold).",
)
_DRAIN_NAMESPACE = options.namespaces(
    "--drain-namespace",
    "A namespace whose GPU pods --drain may evict (repeatable; --drain needs one).",
)


@mig_app.command("rebalance")
@changes
@uses_cluster
def rebalance(
    demand: str | None = _FORECAST,
    drain: bool = _DRAIN,
    drain_namespace: list[str] | None = _DRAIN_NAMESPACE,
    yes: bool = _YES,
    dry_run: bool = _DRY_RUN,
    namespace: str = _OPERATOR_NAMESPACE,
    configmap: str | None = _REBALANCE_CONFIGMAP,
    timeout: float = _TIMEOUT,
    output: Format = _REBALANCE_OUTPUT,
) -> None:
    """Re-split idle MIG GPUs for pending pods and Kueue workloads, node by node."""
    from gpuctl.adapters.kube_guarded import Evictions
    from gpuctl.cli.workflow import reported
    from gpuctl.mig import rebalance, views
    from gpuctl.mig.core.drain import drain_policy
    from gpuctl.mig.core.plan import parse_demand

    write = views.text_writer(output)
    policy = drain_policy(drain, drain_namespace or [])
    extra = parse_demand(demand) if demand else None
    with application().kube() as kube:
        configmap = configmap or rebalance.mig_configmap(kube)
        plan = rebalance.plan_rebalance(kube, namespace, configmap, extra, policy)
        write("".join(line + "\n" for line in plan.lines()))
        evictions, done = Evictions(), list[str]()

        def document() -> dict:
            return {**plan.to_dict(dry_run), "rebalanced": done, **evictions.to_dict()}

        with reported(output, document, lambda: views.rebalanced(done, evictions)):
            if go_ahead(
                plan, views.rebalance_question(plan), dry_run=dry_run, yes=yes, show=_line(write)
            ):
                progress = views.MigProgress()
                done += rebalance.apply(
                    kube, plan, namespace, configmap, timeout, progress, drain=policy,
                    evictions=evictions,
                )  # fmt: skip
