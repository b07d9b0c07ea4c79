"""kube-scheduler's resource scores. Expected values are upstream's own test cases
(kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources: most_allocated_test.go,
least_allocated_test.go, balanced_allocation_test.go), in their units."""

import numpy as np
import pytest

from gpuctl.whatif.core import scoring


def rows(*per_resource):
    """One row per resource, one column per node."""
    return np.array(per_resource, dtype=np.int64)


def test_most_allocated_differently_sized_nodes():
    # pod cpu 3000, memory 5000 on empty nodes of (4000, 10000) and (6000, 10000)
    requested = rows([3000, 3000], [5000, 5000])
    allocatable = rows([4000, 6000], [10000, 10000])
    assert scoring.Scorer(allocatable, (1, 1)).most_allocated(requested).tolist() == [62, 50]
    # memory weighted 2
    assert scoring.Scorer(allocatable, (1, 2)).most_allocated(requested).tolist() == [58, 50]


def test_most_allocated_caps_requests_above_capacity():
    # "nonzero request for resource": 300m of 250m cpu counts as 100
    requested = rows([300, 100], [600, 200])
    allocatable = rows([250, 250], [1000, 1000])
    assert scoring.Scorer(allocatable, (1, 1)).most_allocated(requested).tolist() == [80, 30]


def test_most_allocated_honours_the_gpu_and_leaves_out_what_a_node_lacks():
    # "honor extended resource if the pod request": 2 of 4 and 2 of 10
    requested = rows([3000, 3000], [5000, 5000], [2, 2])
    allocatable = rows([6000, 6000], [10000, 10000], [4, 10])
    assert scoring.Scorer(allocatable, (1, 1, 1)).most_allocated(requested).tolist() == [50, 40]
    # a node without the resource is scored on the others: (50 + 40) / 2
    requested = rows([3000], [4000], [1])
    allocatable = rows([6000], [10000], [0])
    assert scoring.Scorer(allocatable, (1, 1, 2)).most_allocated(requested).tolist() == [45]


def test_least_allocated():
    requested = rows([3000, 3000], [5000, 5000])
    allocatable = rows([4000, 6000], [10000, 10000])
    assert scoring.Scorer(allocatable, (1, 1)).least_allocated(requested).tolist() == [37, 50]
    # more requested than allocatable scores 0 for that resource
    over = scoring.Scorer(rows([4000], [10000]), (1, 1)).least_allocated(rows([5000], [5000]))
    assert over.tolist() == [25]


@pytest.mark.parametrize(
    "requested, allocatable, expected",
    [
        ([[3000, 3000], [5000, 5000]], [[4000, 6000], [10000, 10000]], [87, 100]),
        ([[6000, 6000], [5000, 10000]], [[10000, 10000], [20000, 20000]], [82, 95]),
        ([[6000, 6000], [5000, 10000]], [[10000, 10000], [20000, 50000]], [82, 80]),
        ([[6000, 6000], [0, 5000]], [[6000, 6000], [10000, 10000]], [50, 75]),
    ],
)
def test_balanced_allocation(requested, allocatable, expected):
    scorer = scoring.Scorer(rows(*allocatable), (1, 1))
    assert scorer.balanced_allocation(rows(*requested)).tolist() == expected
