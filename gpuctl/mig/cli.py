"""`gpuctl mig …`: MIG layouts validated against the GPU's geometry, planned for a demand,
applied on this node through NVML or on a cluster through the GPU Operator."""

from __future__ import annotations

from typing import Any

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import DataFormat, Format, confirm, dump, echo, err_console
from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.common.numbers import whole_number

mig_app = typer.Typer(
    help="Partition GPUs with MIG: plan, configure, show, assert, export.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

_SIMULATE = typer.Option(
    None,
    "--simulate",
    envvar="GPUCTL_SIMULATE",
    metavar="SPEC",
    help="Use a simulated node instead of the NVML driver, e.g. 8xH100-80GB.",
)


def register(app: typer.Typer) -> None:
    app.add_typer(mig_app, name="mig")


def _nvml(simulate: str | None):
    from gpuctl.adapters.nvml import Nvml

    return Nvml(simulate=simulate)


# ---------- profiles ----------


@mig_app.command("profiles")
def profiles(
    gpu: str | None = typer.Option(
        None,
        "--gpu",
        metavar="MODEL",
        help="A GPU model (H100-80GB, A100-40GB, …) or 'all'; default: the GPUs of this node.",
    ),
    simulate: str | None = _SIMULATE,
    output: Format = options.output(),
) -> None:
    """List the MIG profiles of a GPU model: ids, slices, memory, placements, limits."""
    from gpuctl.gpus.geometry import find_model, known_model, models

    if gpu == "all":
        chosen = list(models())
    elif gpu:
        chosen = [find_model(gpu)]
    else:
        with _nvml(simulate) as nvml:
            names = [nvml.gpu_name(i) for i in range(nvml.gpu_count())]
        chosen = []
        for n in dict.fromkeys(names):
            m = known_model(n)
            if m is None:
                err_console().print(f"{n}: not a MIG GPU known to gpuctl")
            elif m not in chosen:
                chosen.append(m)
    rows: list[dict[str, Any]] = [
        {
            "gpu": m.short_name,
            "profile": p.name,
            "profile_id": p.profile_id,
            "compute_slices": p.slices,
            "memory_slices": p.size,
            "memory_mib": p.memory_mib,
            "sm_count": p.sm_count,
            "max_instances": p.max_instances,
            "placements": [f"{s}:{p.size}" for s in p.starts],
            "resource": p.resource_name,
        }
        for m in chosen
        for p in m.profiles
    ]
    if output != Format.table:
        echo(dump(rows, output.value))
        return
    from rich.table import Table

    from gpuctl.cli.output import out_console

    table = Table(box=None)
    for col in (
        "GPU",
        "PROFILE",
        "ID",
        "SM SLICES",
        "MEM SLICES",
        "MEMORY",
        "SMs",
        "MAX",
        "STARTS",
    ):
        table.add_column(col, no_wrap=col in ("PROFILE", "STARTS"))
    for r in rows:
        table.add_row(
            r["gpu"],
            r["profile"],
            _s(r["profile_id"]),
            str(r["compute_slices"]),
            str(r["memory_slices"]),
            f"{r['memory_mib']} MiB" if r["memory_mib"] else "?",
            _s(r["sm_count"]),
            str(r["max_instances"]),
            ",".join(p.split(":")[0] for p in r["placements"]),
        )
    out_console().print(table)


def _s(v) -> str:
    return "?" if v is None else str(v)


# ---------- plan ----------


@mig_app.command("plan")
def plan(
    demand: str | None = typer.Option(
        None,
        "--demand",
        metavar="PROFILE=N,…",
        help="MIG devices needed, e.g. 1g.10gb=9,3g.40gb=3.",
    ),
    layout: str | None = typer.Option(
        None,
        "--layout",
        metavar="PROFILE=N,…",
        help="Check one GPU's layout instead: place it or say why it cannot be.",
    ),
    gpu: str | None = typer.Option(
        None, "--gpu", metavar="MODEL", help="GPU model, as many as needed (e.g. H100-80GB)."
    ),
    gpus: str | None = typer.Option(
        None,
        "--gpus",
        metavar="NxMODEL,…",
        help="The GPUs there are, e.g. 8xH100-80GB or 4xH100-80GB,4xA100-80GB.",
    ),
    output: Format = options.output(),
) -> None:
    """The fewest GPUs, and a layout for each, that hold a demand of MIG devices."""
    from gpuctl.gpus import mig_demand
    from gpuctl.mig.core import plan as mig_plan

    if (gpu is None) == (gpus is None):
        raise UsageError("give exactly one of --gpu MODEL or --gpus NxMODEL")
    if bool(demand) == bool(layout):
        raise UsageError("give exactly one of --demand or --layout")
    fleet = mig_plan.parse_fleet(gpu or gpus)
    if gpu and fleet[0].count is not None:
        raise UsageError("--gpu takes a model; use --gpus for a count (e.g. --gpus 8xH100-80GB)")
    if layout:
        _check_layout(layout, fleet, output)
        return
    result = mig_demand.plan_demand(mig_plan.parse_demand(demand), fleet)
    data = {
        "demand": result.demand,
        "gpus": result.gpus,
        "optimal": result.optimal,
        "lower_bound": result.lower_bound,
        "layouts": [
            {
                "gpu": g.model.short_name,
                "count": g.gpus,
                "layout": g.layout,
                "placements": [
                    {"profile": p.profile.name, "start": p.start, "size": p.profile.size}
                    for p in g.placements
                ],
                "free_memory_slices": g.free_slices,
            }
            for g in result.groups
        ],
    }
    if output != Format.table:
        echo(dump(data, output.value))
        return
    from rich.table import Table

    from gpuctl.cli.output import out_console

    table = Table(box=None)
    for col in ("GPUS", "MODEL", "LAYOUT", "PLACEMENT (slices)", "FREE SLICES"):
        table.add_column(col)
    for g in result.groups:
        table.add_row(
            str(g.gpus),
            g.model.short_name,
            ", ".join(f"{k}×{v}" for k, v in g.layout.items()),
            " ".join(f"{p.profile.name}@{p.slices_text()}" for p in g.placements),
            str(g.free_slices),
        )
    con = out_console()
    con.print(table)
    proof = "optimal" if result.optimal else f"best found (at least {result.lower_bound} needed)"
    con.print(
        f"{result.gpus} GPUs ({proof}) for "
        + ", ".join(f"{k}×{v}" for k, v in result.demand.items())
    )


def _check_layout(layout: str, fleet, output: Format) -> None:
    from gpuctl.gpus.mig_layout import devices_of, parse_layout_text, place, slice_range

    counts = parse_layout_text(layout)
    out = []
    for f in fleet:
        placed = place(f.model, devices_of(f.model, counts))
        out.append(
            {
                "gpu": f.model.short_name,
                "placements": [
                    {"profile": p.profile.name, "start": p.start, "size": p.profile.size}
                    for p in placed
                ],
            }
        )
    if output != Format.table:
        echo(dump(out, output.value))
        return
    for f, o in zip(fleet, out):
        echo(
            f"{f.model.short_name}: fits: "
            + ", ".join(
                f"{p['profile']} at slices {slice_range(p['start'], p['size'])}"
                for p in o["placements"]
            )
            + "\n"
        )


# ---------- node state ----------


def _state_dict(g) -> dict:
    by_gi: dict = {}
    for p in g.processes:
        by_gi.setdefault(p.gi_id, []).append(p)
    instances = []
    for inst in g.instances:
        prof = g.profile_of(inst)
        instances.append(
            {
                "gi_id": inst.gi_id,
                "profile": prof.name if prof else None,
                "profile_id": inst.profile_id,
                "start": inst.start,
                "size": inst.size,
                "memory_mib": prof.memory_mib if prof else None,
                "compute_instances": [
                    {"ci_id": c.ci_id, "profile_id": c.profile_id} for c in inst.compute_instances
                ],
                "processes": [_proc(p) for p in by_gi.get(inst.gi_id, [])],
            }
        )
    return {
        "index": g.index,
        "name": g.name,
        "uuid": g.uuid,
        "model": g.model.short_name if g.model else None,
        "mig": None if g.mig is None else {"current": g.mig[0], "pending": g.mig[1]},
        "layout": g.layout() if g.mig and g.mig[0] else {},
        "instances": instances,
        "processes": [_proc(p) for p in g.processes if p.gi_id is None],
    }


def _proc(p) -> dict:
    return {
        "pid": p.pid,
        "name": p.name,
        "user": p.user,
        "used_memory_mib": p.used_memory_mib,
        "gi_id": p.gi_id,
        "ci_id": p.ci_id,
    }


@mig_app.command("show")
def show(simulate: str | None = _SIMULATE, output: Format = options.output()) -> None:
    """Current MIG layout of each GPU on this node: placements, memory, processes."""
    from gpuctl.gpus.mig_layout import slice_range
    from gpuctl.mig import node as mig_apply

    with _nvml(simulate) as nvml:
        gpus = mig_apply.read_node(nvml)
    data = [_state_dict(g) for g in gpus]
    if output != Format.table:
        echo(dump(data, output.value))
        return
    from rich.table import Table

    from gpuctl.cli.output import out_console

    table = Table(box=None)
    for col in ("GPU", "MODEL", "MIG", "GI", "PROFILE", "SLICES", "MEMORY", "CI", "PROCESSES"):
        table.add_column(col)
    for d in data:
        mig = d["mig"]
        mode = (
            "n/a"
            if mig is None
            else ("on" if mig["current"] else "off")
            + (
                f" (pending {'on' if mig['pending'] else 'off'}: reset needed)"
                if mig["current"] != mig["pending"]
                else ""
            )
        )
        procs = ", ".join(f"{p['pid']} {p['name']}" for p in d["processes"])
        table.add_row(str(d["index"]), d["model"] or d["name"], mode, "", "", "", "", "", procs)
        for i in d["instances"]:
            table.add_row(
                "",
                "",
                "",
                str(i["gi_id"]),
                i["profile"] or f"id {i['profile_id']}",
                slice_range(i["start"], i["size"]),
                f"{i['memory_mib']} MiB" if i["memory_mib"] else "?",
                ",".join(str(c["ci_id"]) for c in i["compute_instances"]) or "none",
                ", ".join(
                    f"{p['pid']} {p['name']} ({p['user']}, {p['used_memory_mib']} MiB)"
                    for p in i["processes"]
                ),
            )
    out_console().print(table)


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
    from gpuctl.mig import node as mig_apply
    from gpuctl.mig.core import migparted

    with _nvml(simulate) as nvml:
        gpus = mig_apply.read_node(nvml)
    cfg = migparted.export(gpus, name)
    if configmap:
        cfg = migparted.render_configmap(cfg)
    echo(dump(cfg, output.value))


# ---------- configure / assert ----------


def _indexes(text: str | None) -> list[int] | None:
    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        index = whole_number(part)
        if index is None:
            raise UsageError(f"--gpus: {part!r} is not a GPU index (use e.g. --gpus 0,1)")
        out.append(index)
    if not out:
        raise UsageError("--gpus: no GPU index given")
    return out


def _plan_data(plans) -> list[dict]:
    """The plan of each GPU the config touches, for -o json|yaml."""
    from gpuctl.mig.core.migparted import summary

    return [
        {
            "gpu": p.state.label,
            "index": p.state.index,
            "wanted": p.desired.skipped or summary(p.desired),
            "source": p.desired.source or None,
            "notes": list(p.desired.notes),
            "keep": list(p.kept),
            "steps": [s.text for s in p.steps],
            "blocked": list(p.blocked),
            "applied": p.applied,
        }
        for p in plans
        if p.desired is not None
    ]


def _say(output: Format):
    """Where the plan's text goes: stdout, or stderr when stdout carries -o json|yaml."""
    if output == Format.table:
        return echo

    def to_stderr(text: str) -> None:
        import sys

        sys.stderr.write(text)
        sys.stderr.flush()

    return to_stderr


def _plan_text(plans, from_file: bool = False) -> list[str]:
    from gpuctl.mig.core.migparted import summary

    lines = []
    for p in plans:
        if p.desired is None:
            if from_file:
                lines.append(f"{p.state.label}: matched by no entry: left as is")
            continue
        what = p.desired.skipped or summary(p.desired)
        head = f"{p.state.label}: {what}"
        if p.desired.source:
            head += f"  [{p.desired.source}]"
        lines.append(head)
        lines += [f"  note: {n}" for n in p.desired.notes]
        if p.desired.skipped:
            continue
        if not p.steps:
            lines.append("  already applied")
        for k in p.kept:
            lines.append(f"  keep    {k}")
        for s in p.steps:
            lines.append(f"  {s.text}")
        for b in p.blocked:
            lines.append(f"  BLOCKED {b}")
    return lines


@mig_app.command("configure")
@uses_cluster
def configure(
    file: str | None = typer.Option(
        None, "-f", "--file", metavar="CONFIG.yaml", help="A mig-parted v1 config file."
    ),
    config: str | None = typer.Option(
        None,
        "-c",
        "--config",
        metavar="NAME",
        help="The config to apply (from -f, or the GPU Operator's with --node/--selector).",
    ),
    layout: str | None = typer.Option(
        None,
        "--layout",
        metavar="LAYOUT",
        help="Shorthand: 3g.40gb=2,1g.10gb=1, all-1g.10gb, all-disabled or all-enabled.",
    ),
    gpus: str | None = typer.Option(
        None, "--gpus", metavar="0,1,…", help="With --layout: only these GPU indexes."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Apply without asking."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan and stop."),
    reset: bool = typer.Option(
        False,
        "--reset",
        help="Reset a GPU when a MIG mode change needs it (only if nothing runs on it).",
    ),
    node: list[str] = options.nodes(
        "Cluster: label this node (repeat it, or separate names with commas)."
    ),
    selector: str | None = options.selector("Cluster: label the nodes matching this."),
    render_configmap: bool = typer.Option(
        False,
        "--render-configmap",
        help="Print the GPU Operator ConfigMap holding this layout (-f or --layout) and stop.",
    ),
    configmap_name: str = typer.Option(
        "custom-mig-config",
        "--configmap-name",
        help="The mig-parted ConfigMap to render, or to look the config up in (besides "
        "default-mig-parted-config).",
    ),
    namespace: str = options.namespace("The GPU Operator's namespace.", default="gpu-operator"),
    timeout: float = typer.Option(
        600.0, "--timeout", min=1, help="Cluster: seconds to wait for the operator."
    ),
    simulate: str | None = _SIMULATE,
    output: Format = options.output(
        "table (the plan as text), json or yaml (the plan as data, the text on stderr; "
        "with --render-configmap: the ConfigMap)."
    ),
) -> None:
    """Apply a MIG layout: on this node via NVML, or on cluster nodes via the GPU Operator."""
    if render_configmap:
        form = "yaml" if output == Format.table else output.value
        _render(file, config, layout, _indexes(gpus), configmap_name, namespace, form)
        return
    names = options.node_names(node)
    if names or selector:
        if layout:
            raise UsageError(
                "on a cluster the GPU Operator applies a named config: use -c NAME "
                "(render a custom one with --layout … --render-configmap)"
            )
        if not config:
            raise UsageError(
                "--node/--selector need -c CONFIG (a config in the GPU Operator's mig-parted "
                "ConfigMap)"
            )

        _configure_cluster(
            lambda: application().kube(),
            file,
            config,
            names,
            selector,
            yes,
            dry_run,
            timeout,
            namespace,
            configmap_name,
            output,
        )
        return
    from gpuctl.mig import node as mig_apply

    indexes = _indexes(gpus)
    say = _say(output)
    with _nvml(simulate) as nvml:
        states = mig_apply.read_node(nvml)
        desired = mig_apply.desired(states, file, config, layout, indexes)
        plans = mig_apply.plan(states, desired)
        if output != Format.table:
            echo(dump({"gpus": _plan_data(plans), "dryRun": dry_run}, output.value))
        if all(d is None for d in desired.values()):
            say("no GPU on this node is matched by that config: nothing to do\n")
            return
        say("\n".join(_plan_text(plans, from_file=file is not None)) + "\n")
        if all(p.applied for p in plans):
            say("nothing to change\n")
            return
        if any(p.blocked for p in plans):
            mig_apply.apply(nvml, plans, allow_reset=reset)  # raises, naming the processes
        mig_apply.check_steps(nvml, plans)
        if dry_run:
            say("dry run: nothing changed\n")
            return
        confirm("Apply these MIG changes?", yes)
        con = err_console()
        mig_apply.apply(nvml, plans, allow_reset=reset, report=lambda s: con.print(f"  done: {s}"))
        after = mig_apply.plan(mig_apply.read_node(nvml), desired)
        if not all(p.applied for p in after):
            raise GpuctlError(
                "the layout is not fully applied yet",
                hint="see `gpuctl mig show`; run the same command again",
            )
    say("applied\n")


@mig_app.command("assert")
def assert_(
    file: str | None = typer.Option(None, "-f", "--file", metavar="CONFIG.yaml"),
    config: str | None = typer.Option(None, "-c", "--config", metavar="NAME"),
    layout: str | None = typer.Option(None, "--layout", metavar="LAYOUT"),
    gpus: str | None = typer.Option(None, "--gpus", metavar="0,1,…"),
    simulate: str | None = _SIMULATE,
    output: Format = options.output(
        "table, json or yaml: whether it is applied and, per GPU, what differs."
    ),
) -> None:
    """Exit 0 if the config is applied on this node; else exit 1 saying what differs."""
    from gpuctl.mig import node as mig_apply

    with _nvml(simulate) as nvml:
        states = mig_apply.read_node(nvml)
    indexes = _indexes(gpus)
    desired = mig_apply.desired(states, file, config, layout, indexes)
    plans = mig_apply.plan(states, desired)
    # As mig-parted's assert: every GPU of the node must match an entry and be as it says
    # (with --gpus, the GPUs not named are not asked about).
    asked = [p for p in plans if indexes is None or p.state.index in indexes]
    differences = {p.state.index: _difference(p) for p in asked}
    if output != Format.table:
        gpus_out = [
            {"gpu": p.state.label, "index": p.state.index, "difference": differences[p.state.index]}
            for p in asked
        ]
        applied = all(p.holds for p in asked)
        echo(dump({"applied": applied, "gpus": gpus_out}, output.value))
    if all(p.holds for p in asked):
        if output == Format.table:
            echo("the selected MIG configuration is applied\n")
        return
    differ = [f"{p.state.label}: {d}" for p in asked if (d := differences[p.state.index])]
    raise GpuctlError(
        "the selected MIG configuration is not applied: " + "; ".join(differ),
        hint="see the steps with `gpuctl mig configure … --dry-run`"
        if any(p.steps for p in asked)
        else "mig-parted's assert fails on such a node too: give every GPU an entry that "
        "holds on it (e.g. its device-filter with mig-enabled: false)",
    )


def _difference(p) -> str | None:
    """What keeps the config from holding on this GPU (None: it holds)."""
    if p.desired is None:
        return "matched by no entry of the config"
    if p.desired.skipped:
        return "no MIG, but the config enables MIG on it"
    if p.steps:
        return f"{len(p.steps)} step(s) needed"
    return None


def _render(file, config, layout, indexes, name, namespace, form: str) -> None:
    from gpuctl.mig import cluster as mig_cluster
    from gpuctl.mig.core import migparted

    data = mig_cluster.config_to_render(file, config, layout, indexes)
    echo(dump(migparted.render_configmap(data, name, namespace), form))


def _configure_cluster(
    connect, file, config, nodes, selector, yes, dry_run, timeout, namespace, configmap_name, output
) -> None:
    from gpuctl.mig import cluster as mig_cluster

    cfg = None
    if file:
        from gpuctl.mig.core import migparted

        cfg = migparted.load(file)
        cfg.select(config)
    echo_plan = _say(output)
    with connect() as kube:
        nodes = mig_cluster.targets(kube, nodes, selector)
        if output != Format.table:
            rows = [
                {
                    "node": t.name,
                    "from": t.config,
                    "to": config,
                    "state": t.state,
                    "gpuPods": list(t.gpu_pods),
                }
                for t in nodes
            ]
            echo(dump({"nodes": rows, "dryRun": dry_run}, output.value))
        if cfg is None:
            cfg, note = mig_cluster.operator_config(
                kube, namespace, config, [configmap_name, mig_cluster.OPERATOR_CONFIGMAP]
            )
            if note:
                echo_plan(f"note: config {config!r} not checked: {note}\n")
        if cfg is not None:
            for note in mig_cluster.check_config(cfg, config, nodes):
                echo_plan(f"note: {note}\n")
        for t in nodes:
            change = "already set" if t.config == config else f"{t.config or '(none)'} -> {config}"
            echo_plan(
                f"node {t.name}: {mig_cluster.CONFIG_LABEL}: {change}"
                f" (state: {t.state or 'none'})\n"
            )
            if t.gpu_pods:
                echo_plan(
                    f"  WARNING: pods using GPUs there will lose them: {', '.join(t.gpu_pods)}\n"
                )
        if dry_run:
            echo_plan("dry run: nothing changed\n")
            return
        pending = [t for t in nodes if t.config != config]
        if pending:
            confirm(f"Label {len(pending)} node(s) {mig_cluster.CONFIG_LABEL}={config}?", yes)
            mig_cluster.label(kube, pending, config)
        con = err_console()
        mig_cluster.follow(
            kube, nodes, config, timeout, lambda n, s, t: con.print(f"  {n}: {s} ({t:.0f}s)")
        )
    echo_plan(f"MIG config {config!r} applied on {len(nodes)} node(s)\n")
