"""How `gpuctl share` shows what it plans, assumes and finds: the plans of `share timeslice`
and `share off` (with or without a cluster), the confirmation rule, and the table of
`share show`. CLI side (rich)."""

from __future__ import annotations

import json
import shlex
from typing import Any

from gpuctl.cli import options
from gpuctl.cli.application import application
from gpuctl.cli.output import Format, dump, dump_documents, echo, err_console, inform, out_console
from gpuctl.cli.workflow import end_dry_run
from gpuctl.k8s import device_plugin, nodes
from gpuctl.sharing.core import config as core
from gpuctl.sharing.core.plans import OffPlan, SharePlan, Target, fallback_change


def show_objects(p: SharePlan | OffPlan, output: Format | None) -> None:
    if output is not None and output != Format.table:
        echo(dump_documents(p.objects(), output.value))


def show_share_plan(p: SharePlan, output: Format | None) -> None:
    """The config, what happens to the ConfigMap and to each node; how to point a device
    plugin that does not read the ConfigMap at it."""
    t, spec, err = p.target, p.sharing, err_console()
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
    _show_fallback(t, p.added)
    if not t.mounted:
        _not_mounted(t)
    for c in p.changes:
        what = (
            f"label {device_plugin.CONFIG_LABEL}: {c.old or '(none)'} → {c.new}"
            if c.changes
            else "unchanged"
        )
        err.print(f"  node {c.node}: {what}" + (f" ({c.note})" if c.note and c.changes else ""))
    show_objects(p, output)


def _not_mounted(t: Target) -> None:
    default = core.NAMED_FALLBACK
    patch = json.dumps(
        {"spec": {"devicePlugin": {"config": {"name": t.config_map, "default": default}}}}
    )
    err = err_console()
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


def _show_fallback(target: Target | None, added: dict[str, str]) -> None:
    change = fallback_change(target, added)
    if change:
        was, now = change
        err_console().print(f"  nodes without the label: run {was} now; {now} after", markup=False)


def show_offline_share(
    why: str,
    p: SharePlan,
    names: tuple[str, ...],
    selector: str | None,
    given: tuple[str | None, str | None],
    output: Format | None,
) -> None:
    """`share timeslice --dry-run` without a cluster: what was assumed (GIVEN: -n and
    --config-map as given), the plan, how to label nodes not named."""
    options.offline_note(why)
    t, (namespace, config_map) = p.target, given
    to_change = [
        opt for opt, value in (("-n", namespace), ("--config-map", config_map)) if not value
    ]
    fallback = core.NAMED_FALLBACK
    inform(
        f"assumed without a cluster: the device plugin reads ConfigMap "
        f"{t.namespace}/{t.config_map}"
        + (f" ({', '.join(to_change)} to change)" if to_change else "")
        + f", falls back to its key {fallback!r}, and no node is labelled yet",
        [
            f"its fallback key: Helm config.default={fallback}; GPU Operator "
            f"devicePlugin.config.default={fallback}",
            "that ConfigMap does not exist yet (merge these keys into one that does)",
            f"the nodes carry no {device_plugin.CONFIG_LABEL} label yet",
        ],
        debug=application().debug,
    )
    show_share_plan(p, None)
    if not names:
        which = f"-l {shlex.quote(selector)}" if selector else f"-l {nodes.GFD_PRESENT}=true"
        inform(
            f"label the nodes to share (no node names without a cluster; --node NAME to "
            f"render their labels): kubectl label nodes {which} {device_plugin.CONFIG_LABEL}={p.name} "
            "--overwrite"
        )
    show_objects(p, output)
    end_dry_run()


def show_off_plan(p: OffPlan, output: Format | None) -> None:
    err = err_console()
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
    _show_fallback(p.target, p.added)
    for c in p.changes:
        if not c.changes:
            what = "label unchanged"
        elif c.new is None:
            what = f"remove label {device_plugin.CONFIG_LABEL}={c.old}"
        else:
            what = f"label {device_plugin.CONFIG_LABEL}: {c.old or '(none)'} → {c.new}"
        err.print(f"  node {c.node}: {what}" + (f" ({c.note})" if c.note else ""))
    show_objects(p, output)


def show_off_offline(
    why: str, names: tuple[str, ...], selector: str | None, output: Format | None
) -> None:
    """`share off --dry-run` without a cluster: the named nodes lose their config label."""
    options.offline_note(why)
    inform(
        "assumed, as a cluster would have told: the device plugin's default config (what a "
        "node without the label runs) shares nothing, as `gpuctl share timeslice` sets it up"
    )
    if selector:
        inform(
            f"no node names without a cluster: kubectl label nodes -l {shlex.quote(selector)} "
            f"{device_plugin.CONFIG_LABEL}-"
        )
    for n in names:
        err_console().print(f"  node {n}: remove label {device_plugin.CONFIG_LABEL}", markup=False)
    if output is not None and output != Format.table:
        echo(dump_documents([core.node_label_patch(n, None) for n in names], output.value))
    end_dry_run()


def show_nodes(target: Target | None, rows: list[dict[str, Any]], output: Format) -> None:
    """`share show`: per GPU node its config, strategy, replicas and what was applied."""
    if output != Format.table:
        data = {
            "namespace": target and target.namespace,
            "configMap": target and target.config_map,
            "nodes": rows,
        }
        echo(dump(data, output.value))
        return
    from rich.markup import escape

    from gpuctl.cli.output import new_table as Table

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
        gpus = "?" if r["gpus"] is None else str(r["gpus"])
        mig = "yes" if r["mig"] else "no"
        if r["mig_slices"]:
            mig = f"{r['mig_split_gpus'] or '?'} into {r['mig_slices']} slices"
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
            mig,
            escape(r["problem"] or ""),
        )
    out_console().print(table if rows else "No GPU nodes found.")
