"""`gpuctl share timeslice|show`: GPU sharing through the NVIDIA device plugin."""

from __future__ import annotations

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import (
    Format,
    confirm,
    dump,
    dump_documents,
    echo,
    err_console,
    out_console,
)

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


def register(app: typer.Typer) -> None:
    app.add_typer(share_app, name="share")


@share_app.command("timeslice")
@uses_cluster
def timeslice(
    replicas: int = typer.Option(..., "--replicas", help="Pods that may share each GPU."),
    mps: bool = typer.Option(
        False, "--mps", help="Share with CUDA MPS instead of time-slicing (not on MIG nodes)."
    ),
    rename_by_default: bool = typer.Option(
        False,
        "--rename-by-default",
        help="Advertise shared GPUs as nvidia.com/gpu.shared (jobs ask with `shared: true`).",
    ),
    fail_gt_one: bool | None = typer.Option(
        None,
        "--fail-requests-greater-than-one/--no-fail-requests-greater-than-one",
        help="Refuse pods that ask for more than one replica. Default: no for time-slicing, "
        "yes for MPS (the plugin's defaults); --no-… with --mps writes an explicit false, "
        "which the device plugin honours from v0.20.0.",
        show_default=False,
    ),
    resource: list[str] = typer.Option(
        [],
        "--resource",
        help="Resource to share (repeatable; default nvidia.com/gpu; "
        "nvidia.com/mig-<profile> for MIG slices).",
    ),
    nodes: list[str] = options.nodes(),
    old_nodes: list[str] = options.old_nodes(),
    selector: str | None = options.selector(
        "Label selector for the nodes (default: all GPU nodes)."
    ),
    name: str | None = typer.Option(
        None, "--name", help="Config name (ConfigMap key and node label value)."
    ),
    namespace: str | None = _PLUGIN_NAMESPACE,
    config_map: str | None = _CONFIG_MAP,
    replace: bool = typer.Option(
        False, "--replace", help="Switch nodes between time-slicing and MPS."
    ),
    dry_run: bool = options.dry_run(
        "Show the plan; change nothing. Works without a cluster too (see docs/sharing.md)."
    ),
    output: Format | None = options.output("yaml or json: print the objects.", default=None),
    yes: bool = options.yes(),
) -> None:
    """Let several pods share each GPU on the chosen nodes (time-slicing, or MPS with --mps)."""
    from gpuctl.common.errors import UsageError
    from gpuctl.k8s import device_plugin
    from gpuctl.sharing import service as sharing
    from gpuctl.sharing.core import config as core

    names = options.node_names(nodes, old_nodes)
    if names and selector:
        raise UsageError("give --node or --selector, not both")
    spec = core.make_sharing(
        device_plugin.MPS if mps else device_plugin.TIME_SLICING,
        replicas,
        rename_by_default,
        fail_gt_one,
        tuple(resource),
    )
    if name:
        core.check_name(name)
    err = err_console()
    kube, why = application().kube_or_offline(application().offline_ok(dry_run))
    if kube is None:
        assert why is not None
        p = sharing.plan_offline(spec, name, names, namespace, config_map)
        _offline_plan_notes(err, why, p.target, namespace, config_map)
        _print_plan(err, p, spec)
        _label_advice(err, names, selector, p.name)
        if output is not None and output != Format.table:
            echo(dump_documents(p.objects(), output.value))
        err.print("dry run: nothing was changed")
        return
    with kube:
        p = sharing.plan(kube, spec, name, names, selector, namespace, config_map, replace)
        _print_plan(err, p, spec)
        if output is not None and output != Format.table:
            echo(dump_documents(p.objects(), output.value))
        todo = p.config_map_action != "unchanged" or any(c.changes for c in p.changes)
        if dry_run or not todo:
            err.print("dry run: nothing was changed" if dry_run else "nothing to change")
            return
        changing = [c.node for c in p.changes if c.changes]
        confirm(
            f"Apply {spec.strategy} ×{spec.replicas} to {len(changing)} node(s)? The device "
            "plugin restarts on them",
            yes,
        )
        sharing.apply(kube, p)
    err.print(
        f"[green]done[/]: {len(changing)} node(s) labelled {device_plugin.CONFIG_LABEL}={p.name}"
    )


def _offline_plan_notes(err, why: str, target, namespace, config_map) -> None:
    from gpuctl.k8s.device_plugin import CONFIG_LABEL
    from gpuctl.sharing.core.config import NAMED_FALLBACK

    options.offline_note(why)
    guessed = [
        f"namespace {target.namespace}" + ("" if namespace else " (-n to change)"),
        f"ConfigMap {target.config_map}" + ("" if config_map else " (--config-map to change)"),
    ]
    err.print(
        "assumed, as a cluster would have told: the device plugin reads its configs from "
        + ", ".join(guessed)
        + f" and falls back to its key {NAMED_FALLBACK!r} (Helm: config.default="
        f"{NAMED_FALLBACK}; GPU Operator: devicePlugin.config.default={NAMED_FALLBACK}); "
        "that ConfigMap does not exist yet (merge these keys into one that does); "
        f"the nodes carry no {CONFIG_LABEL} label yet",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _label_advice(err, names, selector, value) -> None:
    import shlex

    from gpuctl.k8s.device_plugin import CONFIG_LABEL
    from gpuctl.k8s.nodes import GFD_PRESENT

    if names:
        return
    which = f"-l {shlex.quote(selector)}" if selector else f"-l {GFD_PRESENT}=true"
    err.print(
        f"label the nodes to share (no node names without a cluster; --node NAME to render "
        f"their labels): kubectl label nodes {which} {CONFIG_LABEL}={value} --overwrite",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _print_plan(err, p, spec) -> None:
    from gpuctl.k8s import device_plugin
    from gpuctl.sharing.core import config as core

    t = p.target
    from gpuctl.sharing import service

    err.print(
        f"config {p.name!r}: {spec.strategy}, {spec.replicas} replicas per GPU of "
        f"{', '.join(spec.resources)}"
        + (" (renamed to <resource>.shared)" if spec.rename_by_default else "")
        + (
            "; requests for more than one replica refused"
            if spec.fail_requests_greater_than_one
            else ""
        )
    )
    err.print(f"ConfigMap {t.namespace}/{t.config_map}: {p.config_map_action}")
    for key in p.extra:
        err.print(f"  and key {key!r}: a config without sharing, for nodes without the label")
    _print_fallback(err, service.fallback_change(t, p.added))
    if not t.mounted:
        import json

        default = core.NAMED_FALLBACK
        patch = json.dumps(
            {"spec": {"devicePlugin": {"config": {"name": t.config_map, "default": default}}}}
        )
        err.print(
            f"[yellow]warning[/]: the device plugin does not read ConfigMap "
            f"{t.config_map} yet; point it there, with its config {default!r} (no sharing) "
            "as the default for nodes without the label:"
        )
        err.print(
            f"  GPU Operator: kubectl patch clusterpolicies.nvidia.com/cluster-policy "
            f"--type merge -p '{patch}'",
            markup=False,
            soft_wrap=True,
        )
        err.print(
            f"  Helm chart: --set config.name={t.config_map} --set config.default={default}",
            markup=False,
        )
    for c in p.changes:
        what = (
            f"label {device_plugin.CONFIG_LABEL}: {c.old or '(none)'} → {c.new}"
            if c.changes
            else "unchanged"
        )
        err.print(f"  node {c.node}: {what}" + (f" ({c.note})" if c.note and c.changes else ""))


def _print_fallback(err, change) -> None:
    if change:
        was, now = change
        err.print(f"  nodes without the label: run {was} now; {now} after", markup=False)


@share_app.command("off")
@uses_cluster
def off(
    nodes: list[str] = options.nodes(),
    old_nodes: list[str] = options.old_nodes(),
    selector: str | None = options.selector(),
    namespace: str | None = _PLUGIN_NAMESPACE,
    config_map: str | None = _CONFIG_MAP,
    dry_run: bool = options.dry_run(
        "Show the plan; change nothing. Works without a cluster too (see docs/sharing.md)."
    ),
    output: Format | None = options.output(
        "yaml or json: print the objects (node label patches, ConfigMap keys added).",
        default=None,
    ),
    yes: bool = options.yes(),
) -> None:
    """Stop sharing on the chosen nodes: remove their nvidia.com/device-plugin.config label,
    so that they run the plugin's default config, and make sure that default shares
    nothing (else label them with a config without sharing)."""
    from gpuctl.common.errors import UsageError
    from gpuctl.k8s.device_plugin import CONFIG_LABEL
    from gpuctl.sharing import service as sharing

    names = options.node_names(nodes, old_nodes)
    if bool(names) == bool(selector):
        raise UsageError("give the nodes: --node NAME... or --selector LABELS")
    err = err_console()
    kube, why = application().kube_or_offline(application().offline_ok(dry_run))
    if kube is None:
        assert why is not None
        _off_offline(err, why, names, selector, output)
        return
    with kube:
        p = sharing.plan_off(kube, names, selector, namespace, config_map)
        if p.target is None:
            err.print(
                "[yellow]warning[/]: no NVIDIA device plugin found: what a node falls back "
                "to without the label is not known"
            )
        for key in p.added:
            assert p.target is not None  # keys are only added to a known ConfigMap
            err.print(
                f"ConfigMap {p.target.namespace}/{p.target.config_map}: add key {key!r} "
                "(a config without sharing)"
            )
        _print_fallback(err, sharing.fallback_change(p.target, p.added))
        for c in p.changes:
            if not c.changes:
                what = "label unchanged"
            elif c.new is None:
                what = f"remove label {CONFIG_LABEL}={c.old}"
            else:
                what = f"label {CONFIG_LABEL}: {c.old or '(none)'} → {c.new}"
            err.print(f"  node {c.node}: {what}" + (f" ({c.note})" if c.note else ""))
        if output is not None and output != Format.table:
            echo(dump_documents(p.objects(), output.value))
        if dry_run or not p.todo:
            err.print("dry run: nothing was changed" if dry_run else "nothing to change")
            return
        confirm(
            f"Stop sharing on {len(p.changes)} node(s)? The device plugin restarts on them",
            yes,
        )
        sharing.apply_off(kube, p)
    err.print(f"[green]done[/]: {len(p.changes)} node(s) on a config without sharing")


def _off_offline(err, why: str, names, selector, output) -> None:
    """`share off --dry-run` without a cluster: the named nodes lose their config label."""
    import shlex

    from gpuctl.k8s.device_plugin import CONFIG_LABEL
    from gpuctl.sharing.core.config import node_label_patch

    options.offline_note(why)
    err.print(
        "assumed, as a cluster would have told: the device plugin's default config (what a "
        "node without the label runs) shares nothing, as `gpuctl share timeslice` sets it up",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if selector:
        err.print(
            f"no node names without a cluster: kubectl label nodes -l {shlex.quote(selector)} "
            f"{CONFIG_LABEL}-",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    for n in names:
        err.print(f"  node {n}: remove label {CONFIG_LABEL}", markup=False)
    if output is not None and output != Format.table:
        echo(dump_documents([node_label_patch(n, None) for n in names], output.value))
    err.print("dry run: nothing was changed")


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
    from gpuctl.sharing import service as sharing

    with application().kube() as kube:
        target, rows = sharing.show(kube, namespace, config_map)
    if output != Format.table:
        echo(
            dump(
                {
                    "namespace": target and target.namespace,
                    "configMap": target and target.config_map,
                    "nodes": rows,
                },
                output.value,
            )
        )
        return
    from rich.markup import escape
    from rich.table import Table

    if target is None:
        title = "no NVIDIA device plugin found: strategies are what GPU Feature Discovery reports"
    else:
        title = f"configs from ConfigMap {target.namespace}/{target.config_map}" + (
            "" if target.data is not None else " (missing)"
        )
    table = Table(box=None, title=title, title_justify="left")
    for col in ("NODE", "GPUS", "CONFIG", "STRATEGY", "REPLICAS", "APPLIED", "MIG", "PROBLEM"):
        table.add_column(col)
    for r in rows:
        applied = (
            f"{r['applied_strategy']} ×{r['applied_replicas'] or 1}"
            if r["applied_strategy"]
            else "-"
        )
        gpus = str(r["gpus"] + r["shared_gpus"]) + (
            f" +{r['mig_devices']} MIG" if r["mig_devices"] else ""
        )
        config = r["config"] or "-"
        if r["config"] is None and r["config_source"] and r["config_source"] != "label":
            # no label: name the config the plugin falls back to
            config = f"({r['running_config'] or 'none'}: {r['config_source']})"
        table.add_row(
            r["node"],
            gpus,
            escape(config),
            r["strategy"],
            str(r["replicas"]),
            applied,
            "yes" if r["mig"] else "no",
            escape(r["problem"] or ""),
        )
    out_console().print(table if rows else "No GPU nodes found.")
