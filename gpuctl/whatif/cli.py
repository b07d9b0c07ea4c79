"""`gpuctl whatif`: replay a workload under several scheduling policies and compare how much
GPU capacity each one allocates as demand grows."""

from __future__ import annotations

from typing import Any

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import Format
from gpuctl.common.numbers import whole_number
from gpuctl.gpus.scoring import MAX_WEIGHT

# Literal here so that `--help` loads nothing of the replay; tests/whatif/test_cli.py checks
# they are replay.POLICIES and gpus.scoring.DEFAULT_GPU_WEIGHT.
POLICIES = "k8s-default,most-allocated,extender,best-fit,first-fit,fgd"
GPU_WEIGHT = 20
MAX_SEEDS = 100
MAX_DEMAND = 10.0


NODE_CSV = typer.Option(
    None,
    "--node-csv",
    metavar="NODES.csv",
    help="Nodes in the openb format: sn, cpu_milli, memory_mib, gpu, model.",
)
POD_CSV = typer.Option(
    None,
    "--pod-csv",
    metavar="PODS.csv",
    help="Pods in the openb format: name, cpu_milli, memory_mib, num_gpu, gpu_milli "
    "(thousandths of each GPU), and optionally gpu_spec (allowed models, |-separated).",
)
FROM_CLUSTER = typer.Option(
    False, "--from-cluster", help="Replay the cluster's unfinished pods onto its nodes (read only)."
)
POLICY = options.listed(
    POLICIES,
    "--policy",
    metavar="POLICY,…",
    check=lambda name: None if name in POLICIES.split(",") else f"is not one of {POLICIES}",
    help="Policies to compare, comma-separated: k8s-default (LeastAllocated + "
    "BalancedAllocation on cpu and memory), most-allocated (MostAllocated over cpu, "
    "memory and nvidia.com/gpu, as `gpuctl sched render` writes), extender (`gpuctl sched "
    "extender`'s FGD scoring); these two as a second scheduler, pods without GPUs staying on "
    "the default one. best-fit, first-fit, fgd: the FGD paper's, one scheduler for all pods.",
)
GPU_TAINT = typer.Option(
    "both",
    "--gpu-taint",
    help="Replay with GPU nodes untainted, tainted (NoSchedule: pods without GPUs stay "
    "off them), or both.",
)
TAINTS = {"untainted": (False,), "tainted": (True,), "both": (False, True)}
GPU_WEIGHT_OPTION = options.count(
    GPU_WEIGHT,
    "--gpu-weight",
    low=1,
    high=MAX_WEIGHT,
    metavar="W",
    help="Weight of nvidia.com/gpu in most-allocated (1-100, kube-scheduler's range).",
)
DEMAND = options.number(
    1.3,
    "--demand",
    low=0,
    above=True,
    high=MAX_DEMAND,
    help="Replay until the pods' GPU request reaches this times the GPU capacity "
    "(resampling the pods, or leaving some out); at most 3 decimals.",
)


def _seed(text: str) -> str | None:
    """Why TEXT is not a seed, or None."""
    n = whole_number(text)
    return None if n is not None and n < 2**32 else "is not a whole number below 2^32"


SEEDS = options.listed(
    "42,43,44",
    "--seeds",
    metavar="N,…",
    check=_seed,
    help="Random seeds, comma-separated: each one a pod order; figures are medians.",
)
GANG_CSV = typer.Option(
    None,
    "--gang-csv",
    metavar="GANGS.csv",
    help="Replay gangs instead of pods, with --node-csv: name, workers, num_gpu (whole GPUs "
    "per worker), within (block, spine, or empty): each gang all at once within one domain "
    "of the --layout, or refused; reports the free GPUs per block and spine.",
)
LAYOUT = typer.Option(
    "2,2",
    "--layout",
    metavar="NODES,BLOCKS",
    help="With --gang-csv: the synthetic network layout (traces carry none): GPU nodes per "
    "block, in the file's order, and blocks per spine (default: the sandbox's).",
)
OLD_NODES = typer.Option(None, "--nodes", hidden=True, help="Old spelling of --node-csv.")
OLD_PODS = typer.Option(None, "--pods", hidden=True, help="Old spelling of --pod-csv.")


def register(app: typer.Typer) -> None:
    app.command("whatif")(whatif)


@uses_cluster
def whatif(
    nodes: str | None = NODE_CSV,
    pods: str | None = POD_CSV,
    from_cluster: bool = FROM_CLUSTER,
    policy: str = POLICY,
    gpu_weight: int = GPU_WEIGHT_OPTION,
    demand: float = DEMAND,
    seeds: str = SEEDS,
    gpu_taint: str = GPU_TAINT,
    gangs: str | None = GANG_CSV,
    layout: str = LAYOUT,
    old_nodes: str | None = OLD_NODES,
    old_pods: str | None = OLD_PODS,
    output: Format = options.output(),
    gpu_label_key: str | None = options.gpu_label_key(),
) -> None:
    """Replay pods onto nodes one at a time, as the FGD paper's simulator does, under each
    policy, and report the GPU allocation at 50/90/100/130 % demand, when the first GPU pod
    fails, and how fragmented the unallocated GPUs end up. No pod leaves; a pod that fits
    nowhere is dropped."""
    from gpuctl.cli.output import dump, echo, err_console
    from gpuctl.common.errors import UsageError
    from gpuctl.whatif import service

    nodes = _renamed(nodes, old_nodes, "--nodes", "--node-csv")
    pods = _renamed(pods, old_pods, "--pods", "--pod-csv")
    if gangs is not None:
        if not nodes or pods or from_cluster:
            raise UsageError("--gang-csv replays onto --node-csv: give no --pod-csv or --from-cluster")  # fmt: skip
        _replay_gangs(nodes, gangs, layout, _seeds(seeds), _demand_permille(demand), output)
        return
    if from_cluster == bool(nodes or pods) or (not from_cluster and not (nodes and pods)):
        raise UsageError("give either --node-csv and --pod-csv, or --from-cluster")
    chosen = _policies(policy)
    permille = _demand_permille(demand)
    seed_list = _seeds(seeds)
    if gpu_taint not in TAINTS:
        raise UsageError(f"--gpu-taint {gpu_taint!r}: choose from {', '.join(TAINTS)}")
    node_list, pod_list, closed, physical = _workload(nodes, pods, gpu_label_key)
    err = err_console()
    err.print(_replaying(node_list, pod_list, permille, physical), soft_wrap=True)
    with err.status("") as status:
        result = service.compare(
            node_list,
            pod_list,
            chosen,
            seed_list,
            permille,
            gpu_weight,
            lambda name, seed: status.update(f"replaying {name}, seed {seed}"),
            TAINTS[gpu_taint],
            closed,
        )
    if output == Format.table:
        _print_table(result)
    else:
        echo(dump(result, output.value))


def _replay_gangs(
    nodes: str, gangs: str, layout: str, seeds: list[int], permille: int, output: Format
) -> None:
    from gpuctl.cli.output import dump, echo, err_console
    from gpuctl.whatif import service
    from gpuctl.whatif.core import gangs as core

    node_list, gang_list = service.read_gangs(nodes, gangs)
    shape = core.Layout(*_layout(layout))
    err_console().print(
        f"{len(node_list):,} nodes, {sum(n.gpus for n in node_list):,} GPUs; synthetic "
        f"layout: {shape.block_nodes} nodes a block, {shape.spine_blocks} blocks a spine; "
        f"gang shapes: {len(gang_list):,}; replaying to {permille / 10:g} % demand",
        soft_wrap=True,
    )
    runs = [core.replay_gangs(node_list, gang_list, shape, seed, permille) for seed in seeds]
    result = core.summary(runs, shape)
    if output == Format.table:
        from gpuctl.whatif import views

        views.gang_tables(result)
    else:
        echo(dump(result, output.value))


def _layout(text: str) -> tuple[int, int]:
    from gpuctl.common.errors import UsageError

    parts = [whole_number(p.strip()) for p in text.split(",")]
    if len(parts) != 2 or None in parts:
        raise UsageError(f"--layout {text!r}: two whole numbers, NODES,BLOCKS (e.g. 2,2)")
    return parts[0] or 0, parts[1] or 0


def _workload(nodes: str | None, pods: str | None, gpu_label_key: str | None) -> tuple:
    """The trace files' nodes and pods, or else (--from-cluster) the cluster's; and the
    nodes whose own taints keep pods without GPUs out (none in a trace)."""
    from gpuctl.whatif import service

    if nodes and pods:
        return (*service.read_trace(nodes, pods), frozenset(), None)
    with application().kube() as kube:
        return service.snapshot(kube, options.resolve_gpu_label_key(gpu_label_key))


def _replaying(nodes: list, pods: list, permille: int, physical) -> str:
    """What is replayed; a cluster's physical GPUs too where the nvidia.com/gpu its pods are
    placed on are not all whole GPUs (MIG slices under the single strategy, time-shared
    replicas)."""
    gpus = sum(n.gpus for n in nodes)
    requested = sum(p.gpu_request for p in pods) / 1000
    capacity = f"{gpus:,} GPUs"
    if physical is not None and (physical.split or physical.unknown or physical.gpus != gpus):
        capacity = f"{physical.text()}, placing pods on {gpus:,} nvidia.com/gpu"
    return (
        f"{len(nodes):,} nodes, {capacity}; {len(pods):,} pods requesting "
        f"{requested:,.1f} GPUs; replaying to {permille / 10:g} % demand"
    )


def _renamed(value: str | None, old: str | None, old_flag: str, flag: str) -> str | None:
    """--node-csv/--pod-csv, once --nodes/--pods (which, everywhere else, name nodes)."""
    if old is None:
        return value
    from gpuctl.cli.output import err_console
    from gpuctl.common.errors import UsageError

    if value is not None:
        raise UsageError(f"give {flag} only ({old_flag} is its old spelling)")
    err_console().print(
        f"warning: {old_flag} is deprecated: use {flag}", style="yellow", markup=False
    )
    return old


def _policies(text: str) -> list[str]:
    """The policies of --policy (each checked as it was parsed), once each."""
    return list(dict.fromkeys(options.comma_list(text, "--policy")))


def _demand_permille(demand: float) -> int:
    from gpuctl.common.errors import UsageError

    permille = round(demand * 1000)  # the option is a finite number in range
    if abs(demand * 1000 - permille) > 1e-6:
        raise UsageError(
            f"--demand: {demand} has more than 3 decimals (1.3 = 130 % of the GPU capacity)"
        )
    return permille


def _seeds(text: str) -> list[int]:
    """The seeds of --seeds (each checked as it was parsed), once each."""
    from gpuctl.common.errors import UsageError

    seeds = list(dict.fromkeys(int(s) for s in options.comma_list(text, "--seeds")))
    if len(seeds) > MAX_SEEDS:
        raise UsageError(f"--seeds: {len(seeds)} seeds; at most {MAX_SEEDS}")
    return seeds


def _print_table(result: dict[str, Any]) -> None:
    from gpuctl.cli.output import new_table as Table
    from gpuctl.cli.output import out_console

    def cell(value: Any, digits: int = 2) -> str:
        if value is None:
            return "-"
        return f"{value:,}" if isinstance(value, int) else f"{value:,.{digits}f}"

    from gpuctl.whatif.core.summary import label

    seed_list = result["policies"][0]["seeds"]
    seeds = ", ".join(str(s) for s in seed_list)
    over = f"Medians over seeds {seeds}." if len(seed_list) > 1 else f"One seed ({seeds})."
    table = Table(
        box=None,
        header_style="bold",
        pad_edge=False,
        caption=f"ALLOC: GPU allocated (% of capacity) when demand reached 50/90/100/130 %; "
        "DROP: demand (%) when a GPU pod first fit nowhere; LEFT: GPUs unallocated at the "
        "end, FRAG: % of them fragmented; WHOLE: nodes with all GPUs free at 50 % demand, "
        "LARGEST: those of them with the most GPUs a node has; "
        "+taint: GPU nodes tainted NoSchedule (without: as given; from a cluster, its own "
        f"taints). {over}",
        caption_justify="left",
    )
    headings: tuple[str, ...] = ("POLICY", "ALLOC@50", "@90", "@100", "@130", "DROP")
    headings += ("LEFT", "FRAG", "WHOLE", "LARGEST")
    for heading in headings:
        table.add_column(heading, justify="left" if heading == "POLICY" else "right")
    for p in result["policies"]:
        alloc = p["alloc_pct"]
        table.add_row(
            label(p),
            *(cell(alloc[k]) for k in ("50", "90", "100", "130")),
            cell(p["first_gpu_pod_failure_demand_pct"]),
            cell(p["unallocated_gpus_end"], 1),
            cell(p["fragmented_gpu_pct_end"], 1),
            cell(p["empty_full_nodes_at_50"], 1),
            cell(p["empty_largest_nodes_at_50"], 1),
        )
    out_console().print(table)
    out_console().print(result["reading"], soft_wrap=True, markup=False)
