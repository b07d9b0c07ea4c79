"""The GPU weight's claim, in kube-scheduler's own integer arithmetic (MostAllocated:
noderesources/most_allocated.go): one more GPU in use on an 8-GPU node outweighs any cpu
and memory difference at the default weight, and not at 10."""

from itertools import product

from gpuctl.gpus.scoring import DEFAULT_GPU_WEIGHT, GPU_RESOURCE, resource_weights

MAX_NODE_SCORE = 100


def most_allocated(requested: dict, capacity: dict, weights) -> int:
    score = weight_sum = 0
    for name, weight in weights:
        used = min(requested[name], capacity[name])
        score += (used * MAX_NODE_SCORE // capacity[name]) * weight
        weight_sum += weight
    return score // weight_sum


def one_gpu_always_wins(gpu_weight: int) -> bool:
    """Node A has one GPU more in use than node B; B may have any cpu/memory use (in
    quarters, the extremes included) and A any other: does A score higher in every case?"""
    capacity = {"cpu": 96_000, "memory": 1_000_000, GPU_RESOURCE: 8}
    weights = resource_weights(gpu_weight)
    steps = [i / 4 for i in range(5)]
    for gpus in range(1, 9):
        for ca, ma, cb, mb in product(steps, repeat=4):
            a = {"cpu": ca * 96_000, "memory": ma * 1_000_000, GPU_RESOURCE: gpus}
            b = {"cpu": cb * 96_000, "memory": mb * 1_000_000, GPU_RESOURCE: gpus - 1}
            if most_allocated(a, capacity, weights) <= most_allocated(b, capacity, weights):
                return False
    return True


def test_default_weight_lets_one_gpu_outweigh_cpu_and_memory():
    assert dict(resource_weights())[GPU_RESOURCE] == DEFAULT_GPU_WEIGHT
    assert one_gpu_always_wins(DEFAULT_GPU_WEIGHT)
    assert not one_gpu_always_wins(10)


def test_cpu_and_memory_weigh_one_each():
    assert resource_weights(7) == (("cpu", 1), ("memory", 1), (GPU_RESOURCE, 7))
