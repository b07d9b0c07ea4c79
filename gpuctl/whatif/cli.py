"""`gpuctl whatif`: replay a workload under several scheduling policies and compare how much
GPU capacity each one allocates as demand grows."""

from __future__ import annotations

import math
from typing import Any

import typer

from gpuctl.cli import options
from gpuctl.cli.application import application, uses_cluster
from gpuctl.cli.output import Format

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
POLICY = typer.Option(
    POLICIES,
    "--policy",
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
GPU_WEIGHT_OPTION = typer.Option(
    GPU_WEIGHT, "--gpu-weight", help="Weight of nvidia.com/gpu in most-allocated (1-100)."
)
DEMAND = typer.Option(
    1.3,
    "--demand",
    help="Replay until the pods' GPU request reaches this times the GPU capacity "
    "(resampling the pods, or leaving some out).",
)
SEEDS = typer.Option(
    "42,43,44",
    "--seeds",
    help="Random seeds, comma-separated: each one a pod order; figures are medians.",
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
    if from_cluster == bool(nodes or pods) or (not from_cluster and not (nodes and pods)):
        raise UsageError("give either --node-csv and --pod-csv, or --from-cluster")
    chosen = _policies(policy)
    _check_gpu_weight(gpu_weight)
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


def _check_gpu_weight(gpu_weight: int) -> None:
    from gpuctl.common.errors import UsageError
    from gpuctl.gpus.scoring import MAX_WEIGHT

    if not 1 <= gpu_weight <= MAX_WEIGHT:
        raise UsageError(
            f"--gpu-weight must be 1 to {MAX_WEIGHT} (kube-scheduler's range), got {gpu_weight}"
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
    from gpuctl.common.errors import UsageError

    chosen = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    unknown = [p for p in chosen if p not in POLICIES.split(",")]
    if unknown or not chosen:
        raise UsageError(
            f"--policy {text!r}: {'unknown ' + ', '.join(unknown) if unknown else 'none given'}"
            f" (choose from {POLICIES})"
        )
    return chosen


def _demand_permille(demand: float) -> int:
    from gpuctl.common.errors import UsageError

    # the range first: 1e308 × 1000 is no number to round
    in_range = math.isfinite(demand) and 0 < demand <= MAX_DEMAND
    permille = round(demand * 1000) if in_range else 0
    if not in_range or abs(demand * 1000 - permille) > 1e-6:
        raise UsageError(
            f"--demand must be above 0 and at most {MAX_DEMAND:g}, with at most 3 decimals "
            f"(1.3 = 130 % of the GPU capacity), got {demand}"
        )
    return permille


def _seeds(text: str) -> list[int]:
    from gpuctl.common.errors import UsageError
    from gpuctl.common.numbers import whole_number

    values = [whole_number(s.strip()) for s in text.split(",")]
    if not values or len(values) > MAX_SEEDS or any(v is None or v >= 2**32 for v in values):
        raise UsageError(
            f"--seeds {text!r}: expected 1 to {MAX_SEEDS} whole numbers below 2^32, "
            "comma-separated (e.g. 42,43,44)"
        )
    return list(dict.fromkeys(v for v in values if v is not None))


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
