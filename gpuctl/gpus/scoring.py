"""How gpuctl weighs resources when kube-scheduler scores a node for a pod (the
NodeResourcesFit plugin's scoring strategy). One definition: `gpuctl sched render` emits it,
and a replay that wants to place pods as that profile does reads the same weights.

kube-scheduler scores each resource 0..100 (requested / allocatable, after adding the pod)
and takes the weighted mean, in integers. With cpu and memory at weight 1, the GPU weight
decides how much GPU occupancy counts against cpu and memory:

- on an 8-GPU node one more GPU allocated moves the GPU score by 12.5 points, worth
  12.5·W/(W+2) in the mean; cpu and memory together can move it by at most 200/(W+2).
- W = 20 is the smallest round weight where one GPU outweighs any cpu/memory difference
  (11.4 > 9.1 points): GPU pods fill the fullest GPU node first, whatever cpu and memory
  say. At W = 10 a node with one GPU less in use but much more cpu and memory requested
  can still win (10.4 < 16.7), and at W = 5 a GPU is worth 8.9 points against 28.6.
"""

from __future__ import annotations

GPU_RESOURCE = "nvidia.com/gpu"
MILLI = 1000  # a whole GPU, in thousandths (shares of one GPU are counted in these)
MAX_NODE_SCORE = 100  # kube-scheduler's framework.MaxNodeScore
NON_ZERO_CPU_MILLI = 100  # upstream's DefaultMilliCPURequest: what a pod requesting none counts
NON_ZERO_MEMORY_MIB = 200  # upstream's DefaultMemoryRequest, 200 MiB
DEFAULT_GPU_WEIGHT = 20
MAX_WEIGHT = 100  # kube-scheduler refuses resource weights outside 1..100


def resource_weights(gpu_weight: int = DEFAULT_GPU_WEIGHT) -> tuple[tuple[str, int], ...]:
    """The scored resources and their weights, in the order the profile lists them."""
    return (("cpu", 1), ("memory", 1), (GPU_RESOURCE, gpu_weight))


def most_allocated(
    requested: dict[str, int], allocatable: dict[str, int], weights: tuple[tuple[str, int], ...]
) -> int:
    """kube-scheduler's MostAllocated score (0..100) of one node, in its integer arithmetic:
    Σ w·⌊100·min(requested, allocatable)/allocatable⌋ ÷ Σ w over the resources the node has
    (allocatable > 0). `requested` is what the node's pods request plus the incoming pod's;
    leave out of `weights` an extended resource the pod does not request (upstream does).
    The same rule as gpuctl.whatif's replay (its Scorer works on many nodes at once)."""
    total = weight_sum = 0
    for resource, weight in weights:
        have = allocatable.get(resource, 0)
        if have > 0:
            total += weight * (100 * min(requested.get(resource, 0), have) // have)
            weight_sum += weight
    return total // weight_sum if weight_sum else 0
