"""Gangs replayed on a network layout: each gang's workers all placed at once within one
block or spine (or anywhere), or refused; and how fragmented the free GPUs end up per
domain. Pure.

openb (and the other public GPU traces) carry no topology, so the layout is synthetic: the
sandbox's rule (gpuctl.sim.cluster.network_labels), in numbers one chooses: the GPU nodes,
in the order given, fill blocks of BLOCK_NODES nodes; the blocks fill spines of
SPINE_BLOCKS blocks.

The model, and what it leaves out:
- a gang is WORKERS pods of NUM_GPU whole GPUs each; a node holds as many of its workers as
  it has NUM_GPU free GPUs for (several workers may share a node, as the pods of an Indexed
  Job may);
- the gangs arrive in the seed's order, resampled up to the demand as the pod replay's
  (gpuctl.whatif.core.replay.arrivals); none leaves;
- a gang goes to the domain of its level with the fewest free worker slots that still holds
  it all (what `gpuctl submit` pins an affinity-kept gang to; Kueue's BestFit also prefers
  the tightest domain), and within it to its fullest nodes first; a gang that no domain holds
  is refused, "for want of a domain" when the cluster as a whole had the slots;
- CPU, memory, GPU models, taints, shares of a GPU and pods outside gangs are not replayed.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuctl.common.errors import SpecError, UsageError
from gpuctl.whatif.core.replay import arrivals
from gpuctl.whatif.core.trace import MAX_GPUS, MILLI, Node, rows, whole

GANG_COLUMNS = ("name", "workers", "num_gpu", "within")
LEVELS = ("block", "spine")  # the layout's levels, narrowest first
ANYWHERE = "cluster"  # a gang without a level: one domain, the whole cluster
MAX_WORKERS = 1024
MAX_GANGS = 100_000
MAX_LAYOUT = 10_000


@dataclass(frozen=True)
class Gang:
    name: str
    workers: int
    gpus: int  # whole GPUs per worker
    within: str | None  # a level of LEVELS, or None: anywhere

    @property
    def gpu_request(self) -> int:
        """The GPU it asks for in all, in thousandths of a GPU (as a Pod's)."""
        return self.workers * self.gpus * MILLI


@dataclass(frozen=True)
class Layout:
    block_nodes: int
    spine_blocks: int

    def __post_init__(self) -> None:
        for what, n in (("nodes per block", self.block_nodes), ("blocks per spine", self.spine_blocks)):  # fmt: skip
            if not 0 < n <= MAX_LAYOUT:
                raise UsageError(f"--layout: {n} {what}; 1 to {MAX_LAYOUT:,}")

    def domains(self, nodes: Sequence[Node]) -> dict[str, dict[str, str]]:
        """Each GPU node of NODES → its domain of each level (block-N, spine-N)."""
        gpu_nodes = [n.name for n in nodes if n.gpus]
        out = {}
        for i, name in enumerate(gpu_nodes):
            block = i // self.block_nodes
            out[name] = {"block": f"block-{block}", "spine": f"spine-{block // self.spine_blocks}"}  # fmt: skip
        return out


@dataclass(frozen=True)
class Domain:
    level: str
    name: str
    nodes: int
    gpus: int
    free: int  # GPUs free at the end
    whole_free: int  # nodes with every GPU free at the end


@dataclass(frozen=True)
class GangRun:
    seed: int
    capacity: int  # GPUs
    arrived: int  # gangs
    placed: dict[str, tuple[str, ...]]  # gang (name#arrival) → the node of each worker
    refused_never: int  # no domain of its level holds it even empty
    refused_for_domain: int  # no domain held it now, though the cluster had the slots
    refused_for_room: int  # the cluster had no room for it at all
    domains: tuple[Domain, ...] = field(default=())

    @property
    def allocated(self) -> int:
        return self.capacity - sum(d.free for d in self.domains if d.level == ANYWHERE)


def parse_gangs(text: str | Iterable[str], file: str) -> list[Gang]:
    """The gangs of a CSV (`name, workers, num_gpu, within`; within: block, spine, or empty
    for anywhere), given whole or as lines."""
    gangs = []
    for line, row in rows(text, file, GANG_COLUMNS, MAX_GANGS):
        name = row["name"].strip()
        if not name:
            raise SpecError("empty gang name", file=file, line=line, field="name")
        workers = whole(row, "workers", MAX_WORKERS, file, line)
        gpus = whole(row, "num_gpu", MAX_GPUS, file, line)
        for column, value in (("workers", workers), ("num_gpu", gpus)):
            if not value:
                raise SpecError("0: a gang needs at least 1", file=file, line=line, field=column)
        within = row["within"].strip() or None
        if within is not None and within not in LEVELS:
            raise SpecError(
                f"{within!r}: one of {', '.join(LEVELS)}, or empty for anywhere",
                file=file,
                line=line,
                field="within",
            )
        gangs.append(Gang(name, workers, gpus, within))
    if not gangs:
        raise SpecError("no gangs in the file", file=file)
    return gangs


def replay_gangs(
    nodes: Sequence[Node], gangs: Sequence[Gang], layout: Layout, seed: int, demand_permille: int
) -> GangRun:
    """One replay of GANGS onto empty NODES laid out by LAYOUT until their GPU request
    reaches demand_permille / 1000 × the GPU capacity."""
    where = layout.domains(nodes)
    size = {n.name: n.gpus for n in nodes if n.gpus}
    if not size:
        raise UsageError("the nodes have no GPUs: there is no GPU capacity to replay against")
    free = dict(size)
    capacity = sum(size.values())
    order = arrivals(gangs, capacity * MILLI * demand_permille // 1000, random.Random(seed))
    placed: dict[str, tuple[str, ...]] = {}
    never = for_domain = for_room = 0
    ever: dict[tuple[str | None, int, int], bool] = {}
    for i, gang in enumerate(order):
        shape = (gang.within, gang.gpus, gang.workers)
        if shape not in ever:
            ever[shape] = _ever(gang, size, where)
        if not ever[shape]:
            never += 1
            continue
        slots = {n: f // gang.gpus for n, f in free.items() if f >= gang.gpus}
        members: dict[str, list[str]] = {}
        for n in slots:
            members.setdefault(where[n][gang.within] if gang.within else ANYWHERE, []).append(n)
        room = {d: sum(slots[n] for n in ns) for d, ns in members.items()}
        roomy = [d for d in room if room[d] >= gang.workers]
        if not roomy:
            if sum(slots.values()) >= gang.workers:
                for_domain += 1
            else:
                for_room += 1
            continue
        chosen = min(roomy, key=lambda d: (room[d], d))
        workers: list[str] = []
        for n in sorted(members[chosen], key=lambda n: (slots[n], n)):
            take = min(slots[n], gang.workers - len(workers))
            workers += [n] * take
            free[n] -= take * gang.gpus
            if len(workers) == gang.workers:
                break
        placed[f"{gang.name}#{i}"] = tuple(workers)
    return GangRun(seed, capacity, len(order), placed, never, for_domain, for_room, _domains(where, size, free))  # fmt: skip


def _ever(gang: Gang, size: dict[str, int], where: dict[str, dict[str, str]]) -> bool:
    """Whether some domain of GANG's level holds all its workers when empty."""
    room: dict[str, int] = {}
    for n, gpus in size.items():
        d = where[n][gang.within] if gang.within else ANYWHERE
        room[d] = room.get(d, 0) + gpus // gang.gpus
    return max(room.values()) >= gang.workers


def _domains(
    where: dict[str, dict[str, str]], size: dict[str, int], free: dict[str, int]
) -> tuple[Domain, ...]:
    """Each domain of each level, and the cluster, as the replay left them."""
    groups: dict[tuple[str, str], list[str]] = {}
    for n in size:
        for level in LEVELS:
            groups.setdefault((level, where[n][level]), []).append(n)
        groups.setdefault((ANYWHERE, ANYWHERE), []).append(n)
    return tuple(
        Domain(
            level,
            name,
            len(ns),
            sum(size[n] for n in ns),
            sum(free[n] for n in ns),
            sum(1 for n in ns if free[n] == size[n]),
        )
        for (level, name), ns in groups.items()
    )


def summary(runs: Sequence[GangRun], layout: Layout) -> dict[str, Any]:
    """What the replays measured, for a person or a program: per seed the gangs placed and
    refused, and each domain's free GPUs at the end."""
    return {
        "layout": {"block_nodes": layout.block_nodes, "spine_blocks": layout.spine_blocks},
        "runs": [
            {
                "seed": r.seed,
                "gpus": r.capacity,
                "gpus_allocated": r.allocated,
                "gangs_arrived": r.arrived,
                "gangs_placed": len(r.placed),
                "refused_never": r.refused_never,
                "refused_for_domain": r.refused_for_domain,
                "refused_for_room": r.refused_for_room,
                "domains": [
                    {
                        "level": d.level,
                        "domain": d.name,
                        "nodes": d.nodes,
                        "gpus": d.gpus,
                        "free": d.free,
                        "whole_nodes_free": d.whole_free,
                    }  # fmt: skip
                    for d in r.domains
                ],
            }
            for r in runs
        ],
        "reading": READING,
    }


READING = (
    "NEVER: gangs no domain of their level holds even empty; NO DOMAIN: gangs no block or "
    "spine (as they asked) held when they came, though the cluster as a whole had room for "
    "them: GPUs stranded by the topology; NO ROOM: the cluster had none. The layout is synthetic (the traces carry none); the replay leaves out CPU, "
    "memory, GPU models, taints and pods outside gangs, and no gang leaves."
)
