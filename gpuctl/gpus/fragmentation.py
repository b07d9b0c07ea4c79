"""GPU fragmentation as the FGD paper measures it (Weng et al., USENIX ATC '23, "Beware of
Fragmentation"), and its scheduling score. Pure; works on arrays of the nodes' free GPU shares (whatif's replay and the scheduler
extender share it).

The measure is against the target workload: its *typical shapes* are the most common pod
shapes (CPU, share of each GPU, GPU count, allowed models) that together make up 95 % of
its pods, each with its frequency p_t. For one node and one shape t, the node's unallocated
GPU capacity is fragmented
- all of it, when t cannot run there (no GPU asked for, a model t does not accept, too
  little CPU, or fewer GPUs with t's share free than t needs);
- otherwise, the GPUs whose free share is below t's share.
The node's fragmentation is the frequency-weighted sum over the shapes; the cluster's, the
sum over nodes. The FGD policy places a pod where it grows the fragmentation least: node
score ⌊100 · sigmoid((F_before − F_after) / 1000)⌋, and a shared GPU chosen the same way.
Everything is in thousandths of a GPU, as in the paper's artifact
(hkust-adsl/kubernetes-scheduler-simulator, pkg/utils/frag.go, plugin/fgd_score.go).

Computed here as F = free − Σ_g [model accepted] · [count of GPUs with ≥ m_g free ≥ n_g]
· W_g(free CPU) · (free share on GPUs with ≥ m_g free), where the groups g gather the GPU
shapes by (share m_g, count n_g, models) and W_g(c) adds up the frequencies of the group's
shapes that need at most c CPU. That is the artifact's sum, regrouped so that placing a pod
updates a few numbers per node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gpuctl.gpus.scoring import MAX_NODE_SCORE, MILLI, NON_ZERO_CPU_MILLI

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Ints = NDArray[np.int64]
    Floats = NDArray[np.float64]
    Bools = NDArray[np.bool_]


class PodShape(Protocol):
    """What the measure reads of a pod (whatif's trace Pod, the extender's pods)."""

    @property
    def cpu_milli(self) -> int: ...
    @property
    def gpu_milli(self) -> int: ...
    @property
    def gpus(self) -> int: ...
    @property
    def gpu_models(self) -> tuple[str, ...]: ...


POPULARITY_PCT = 95  # the typical shapes make up this much of the pods (the artifact's default)


@dataclass(frozen=True)
class Shape:
    cpu_milli: int
    gpu_milli: int
    gpus: int
    models: tuple[str, ...]
    frequency: float


def typical_shapes(pods: Sequence[PodShape], popularity_pct: int = POPULARITY_PCT) -> list[Shape]:
    """The most common shapes until they make up `popularity_pct` % of the pods, renormalised.
    Ties in count go to the larger shape, as in the artifact (GetTypicalPods)."""
    counts = Counter(
        (max(p.cpu_milli, NON_ZERO_CPU_MILLI), p.gpu_milli, p.gpus, "|".join(p.gpu_models))
        for p in pods
    )
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    chosen, covered = [], 0
    for key, count in ranked:
        if covered * 100 >= popularity_pct * len(pods):
            break
        chosen.append((key, count))
        covered += count
    return [
        Shape(cpu, milli, gpus, tuple(m for m in models.split("|") if m), count / covered)
        for (cpu, milli, gpus, models), count in chosen
    ]


class Fragmentation:
    """The measure for a fixed set of nodes (their GPU models) and typical shapes."""

    def __init__(self, shapes: Sequence[Shape], node_models: Sequence[str]):
        import numpy as np

        groups: dict[tuple[int, int, tuple[str, ...]], list[Shape]] = {}
        for s in shapes:
            if s.gpus:  # a shape without GPUs finds all free GPU capacity fragmented
                groups.setdefault((s.gpu_milli, s.gpus, s.models), []).append(s)
        keys = list(groups)
        self.share: Ints = np.array([k[0] for k in keys], dtype=np.int64)
        self.count: Ints = np.array([k[1] for k in keys], dtype=np.int64)
        self.accepts: Bools = np.array(
            [[not k[2] or m in k[2] for k in keys] for m in node_models], dtype=bool
        ).reshape(len(node_models), len(keys))
        # W_g as a step function: the CPU thresholds of group g and the frequency reached
        self._cpu: list[Ints] = []
        self._reached: list[Floats] = []
        for k in keys:
            members = sorted(groups[k], key=lambda s: s.cpu_milli)
            self._cpu.append(np.array([s.cpu_milli for s in members], dtype=np.int64))
            self._reached.append(np.cumsum([0.0] + [s.frequency for s in members]))

    def gpu_terms(self, gpu_free: Ints) -> tuple[Ints, Ints]:
        """Per node (row of GPU free shares) and group: GPUs with the group's share free,
        and the free share on them."""

        enough = gpu_free[:, :, None] >= self.share[None, None, :]
        counted: Ints = enough.sum(axis=1)
        free_there: Ints = (gpu_free[:, :, None] * enough).sum(axis=1)
        return counted, free_there

    def of_nodes(self, gpu_free: Ints, cpu_free: Ints, accepts: Bools) -> Floats:
        """F per node from its GPUs' free shares, its free CPU and the rows of `accepts`."""
        counted, free_there = self.gpu_terms(gpu_free)
        return self.amount(
            gpu_free.sum(axis=1), self.cpu_weight(cpu_free), counted, free_there, accepts
        )

    def amount(
        self, free: Ints, weight: Floats, counted: Ints, free_there: Ints, accepts: Bools
    ) -> Floats:
        """F per node from its free GPU total, cpu_weight() and gpu_terms()."""
        import numpy as np

        usable = accepts & (counted >= self.count[None, :])
        result: Floats = free - (np.where(usable, weight, 0.0) * free_there).sum(axis=1)
        return result

    def cpu_weight(self, cpu_free: Ints) -> Floats:
        """W_g(free CPU) per node and group."""
        import numpy as np

        out = np.empty((len(cpu_free), len(self._cpu)))
        for g, (cpu, reached) in enumerate(zip(self._cpu, self._reached)):
            out[:, g] = reached[np.searchsorted(cpu, cpu_free, side="right")]
        return out


def fgd_score(before: Floats, after: Floats) -> Ints:
    """The FGD node score from the fragmentation before and after placing the pod."""
    import numpy as np

    x = (before - after) / MILLI
    result: Ints = (1.0 / (1.0 + np.exp(-x)) * MAX_NODE_SCORE).astype(np.int64)
    return result
