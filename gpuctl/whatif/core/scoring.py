"""How kube-scheduler scores nodes by their resources, computed for many nodes at once.
Pure. The weights of the `most-allocated` profile are gpuctl.gpus.scoring's, the ones
`gpuctl sched render` writes.

The formulas are upstream's (kubernetes/kubernetes, pkg/scheduler/framework/plugins/
noderesources: most_allocated.go, least_allocated.go, balanced_allocation.go,
resource_allocation.go), in Go's integer arithmetic:

- MostAllocated, for resources r with weights w_r:
      score = Σ_r w_r · ⌊100 · min(requested_r, allocatable_r) / allocatable_r⌋ ÷ Σ_r w_r
- LeastAllocated, the same with ⌊100 · (allocatable_r − requested_r) / allocatable_r⌋
  (0 when requested_r > allocatable_r).
  In both, requested_r is what the node's pods request plus what the incoming pod requests;
  for cpu and memory a pod that requests none counts as NON_ZERO_CPU_MILLI / NON_ZERO_MEMORY_MIB
  (upstream's "non-zero" requests). A resource the node has none of (allocatable 0) is left
  out of both sums, and so is an extended resource (nvidia.com/gpu) the pod does not request.
  ÷ is integer division; a node with nothing left to score gets 0.
- BalancedAllocation over cpu and memory, from the actual requests:
      f_r = min(requested_r / allocatable_r, 1),   score = ⌊100 · (1 − |f_cpu − f_memory| / 2)⌋
  A pod that requests nothing is not scored by it (0 on every node).

The replay counts nvidia.com/gpu in thousandths of a GPU, so that a pod holding a share of
one GPU counts as that share; for whole GPUs this gives upstream's scores exactly (⌊⌋ of the
same ratio).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuctl.gpus.scoring import MAX_NODE_SCORE, NON_ZERO_CPU_MILLI, NON_ZERO_MEMORY_MIB

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Ints = NDArray[np.int64]
    Floats = NDArray[np.float64]

__all__ = ["MAX_NODE_SCORE", "NON_ZERO_CPU_MILLI", "NON_ZERO_MEMORY_MIB", "Scorer"]


class Scorer:
    """The resource scores against fixed allocatable amounts: one row per resource, one
    column per node; what depends on them alone is worked out once."""

    def __init__(self, allocatable: Ints, weights: Sequence[int]):
        import numpy as np

        self.allocatable = allocatable
        self.divisor = np.maximum(allocatable, 1).astype(np.float64)  # converted once
        # a resource the node has none of is left out of its score
        self.weight: Ints = np.where(
            allocatable > 0, np.asarray(weights, dtype=np.int64)[:, None], 0
        )
        self.weight_sum = np.maximum(self.weight.sum(axis=0), 1).astype(np.float64)
        # where a node lacks one of the two, BalancedAllocation scores the other alone
        self.all_there = allocatable.all(axis=0)
        self.some_missing = not self.all_there.all()

    def most_allocated(self, requested: Ints) -> Ints:
        import numpy as np

        return self._weighted(np.minimum(requested, self.allocatable))

    def least_allocated(self, requested: Ints) -> Ints:
        import numpy as np

        return self._weighted(np.maximum(self.allocatable - requested, 0))

    def balanced_allocation(self, requested: Ints) -> Ints:
        """Over two resources (cpu and memory, upstream's default)."""
        import numpy as np

        fraction = np.minimum(requested / self.divisor, 1.0)
        std = np.abs(fraction[0] - fraction[1]) / 2
        if self.some_missing:  # one fraction alone deviates by 0
            std = np.where(self.all_there, std, 0.0)
        result: Ints = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
        return result

    def _weighted(self, part: Ints) -> Ints:
        """Σ w · ⌊100 · part / allocatable⌋ ÷ Σ w, over the resources each node has."""
        percent = _floor_quotient(part * MAX_NODE_SCORE, self.divisor)
        return _floor_quotient((percent * self.weight).sum(axis=0), self.weight_sum)


def _floor_quotient(numerator: Ints, denominator: Floats) -> Ints:
    """⌊numerator / denominator⌋ of whole numbers, numerator ≥ 0 and denominator ≥ 1.
    In floating point, several times faster than integer division and as exact here: a
    quotient ≤ 100 that is not whole lies at least 1/denominator below the next whole
    number, far more than the spacing of doubles there (2^-46) for denominators < 2^46."""
    import numpy as np

    result: Ints = (numerator / denominator).astype(np.int64)
    return result
