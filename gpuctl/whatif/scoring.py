"""How kube-scheduler scores nodes by their resources, computed for many nodes at once.
Pure. This module is the one definition of the `most-allocated` profile: `gpuctl whatif`
replays with it and `gpuctl sched render` writes it (MOST_ALLOCATED, most_allocated_resources).

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

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Ints = NDArray[np.int64]

MAX_NODE_SCORE = 100
MAX_WEIGHT = 100  # upstream refuses resource weights outside 1..100 (validateResources)
NON_ZERO_CPU_MILLI = 100  # upstream's DefaultMilliCPURequest
NON_ZERO_MEMORY_MIB = 200  # upstream's DefaultMemoryRequest, 200 MiB

GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_GPU_WEIGHT = 10

# The `most-allocated` profile: plugin NodeResourcesFit with scoringStrategy.type
# MostAllocated over cpu 1, memory 1 and nvidia.com/gpu W, as the only resource scorer
# (NodeResourcesBalancedAllocation disabled: it pulls pods towards emptier nodes).
MOST_ALLOCATED = "MostAllocated"
FIT_PLUGIN = "NodeResourcesFit"
BALANCED_PLUGIN = "NodeResourcesBalancedAllocation"


def most_allocated_resources(gpu_weight: int = DEFAULT_GPU_WEIGHT) -> list[dict[str, str | int]]:
    """`scoringStrategy.resources` of the most-allocated profile, as the scheduler's
    configuration (kubescheduler.config.k8s.io/v1) writes them."""
    if not 1 <= gpu_weight <= MAX_WEIGHT:
        raise ValueError(f"the GPU weight must be 1 to {MAX_WEIGHT}, got {gpu_weight}")
    return [
        {"name": "cpu", "weight": 1},
        {"name": "memory", "weight": 1},
        {"name": GPU_RESOURCE, "weight": gpu_weight},
    ]


def most_allocated(requested: Ints, allocatable: Ints, weights: Sequence[int]) -> Ints:
    """MostAllocated scores: one row per resource, one column per node."""
    import numpy as np

    used = np.minimum(requested, allocatable) * MAX_NODE_SCORE // np.maximum(allocatable, 1)
    return _weighted(used, allocatable, weights)


def least_allocated(requested: Ints, allocatable: Ints, weights: Sequence[int]) -> Ints:
    """LeastAllocated scores: one row per resource, one column per node."""
    import numpy as np

    free = (allocatable - requested) * MAX_NODE_SCORE // np.maximum(allocatable, 1)
    return _weighted(np.where(requested > allocatable, 0, free), allocatable, weights)


def balanced_allocation(requested: Ints, allocatable: Ints) -> Ints:
    """BalancedAllocation scores over two resources (cpu and memory, upstream's default):
    one row per resource, one column per node."""
    import numpy as np

    fraction = np.minimum(requested / np.maximum(allocatable, 1), 1.0)
    # a resource the node has none of is left out; one fraction alone deviates by 0
    std = np.where(allocatable.all(axis=0), np.abs(fraction[0] - fraction[1]) / 2, 0.0)
    result: Ints = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return result


def _weighted(scores: Ints, allocatable: Ints, weights: Sequence[int]) -> Ints:
    """Σ w·score ÷ Σ w over the resources each node has."""
    import numpy as np

    weight = np.where(allocatable > 0, np.asarray(weights, dtype=np.int64)[:, None], 0)
    weight_sum = weight.sum(axis=0)
    result: Ints = (scores * weight).sum(axis=0) // np.maximum(weight_sum, 1)
    return result
