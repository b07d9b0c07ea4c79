"""Medians over seeds, where "never" (None) counts above every number."""

from gpuctl.whatif.core.replay import Run
from gpuctl.whatif.core.summary import median, summarise


def test_median_counts_none_as_never():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 2, 3]) == 2.5
    assert median([1, None, 2]) == 2
    assert median([1, None, None]) is None
    assert median([1, 2, None, None]) is None
    assert median([None]) is None


def run(seed, allocated_130, failure, unallocated, fragmented, policy="fgd", tainted=False):
    return Run(
        policy=policy,
        seed=seed,
        capacity=10_000,
        gpu_nodes_tainted=tainted,
        allocated_at={50: 5000, 90: 9000, 100: 9500, 130: allocated_130},
        whole_nodes_at={50: seed, 90: 0, 100: 0, 130: 0},
        whole_largest_at={50: seed - 1, 90: 0, 100: 0, 130: 0},
        first_gpu_failure=failure,
        unallocated=unallocated,
        fragmented=fragmented,
    )


def test_summary_per_policy_is_the_median_over_seeds():
    runs = [
        run(1, 9600, 9000, 400, 100.0),
        run(2, 9700, None, 300, 300.0),
        run(3, 9650, 9100, 350, 35.0),
    ]
    assert summarise(runs) == {
        "policies": [
            {
                "policy": "fgd",
                "gpu_nodes_tainted": False,
                "seeds": [1, 2, 3],
                "alloc_pct": {"50": 50, "90": 90, "100": 95, "130": 96.5},
                "first_gpu_pod_failure_demand_pct": 91,
                "unallocated_gpus_end": 0.35,
                # 25 %, 100 %, 10 %
                "fragmented_gpu_pct_end": 25,
                "empty_full_nodes_at_50": 2,
                "empty_largest_nodes_at_50": 1,
                "alloc_pct_mean": {"50": 50.0, "90": 90.0, "100": 95.0, "130": 96.5},
            }
        ],
        "reading": "fgd allocates most at 130 % demand (96.50 %).",
    }


def test_the_reading_names_the_winner_and_the_cost_of_untainted_gpu_nodes():
    runs = [
        run(1, 9400, 9000, 600, 0.0, "k8s-default"),
        run(1, 8600, 3000, 1400, 0.0, "most-allocated"),
        run(1, 9400, 9300, 600, 0.0, "most-allocated", tainted=True),
        run(1, 9530, 9500, 470, 0.0, "extender", tainted=True),
    ]
    summary = summarise(runs)
    assert [p["gpu_nodes_tainted"] for p in summary["policies"]] == [False, False, True, True]
    assert summary["reading"] == (
        "extender +taint allocates most at 130 % demand (95.30 %, +1.30 points against "
        "k8s-default); untainted GPU nodes cost most-allocated 8.00 points: the default "
        "scheduler puts pods without GPUs on the empty GPU nodes it keeps."
    )


def test_a_tie_is_called_a_tie_not_a_win():
    """Policies that allocate the same at the highest demand: none of them is named the
    winner (a trace every policy packs alike, or too small to tell them apart)."""
    same = [run(1, 9000, 9000, 1000, 0.0, name) for name in ("k8s-default", "fgd", "best-fit")]
    assert summarise(same)["reading"] == "all 3 policies tie at 130 % demand (90.00 %)."
    two = [
        run(1, 8000, 8000, 2000, 0.0, "k8s-default"),
        run(1, 9000, 9000, 1000, 0.0, "fgd"),
        run(1, 9000, 9000, 1000, 0.0, "best-fit"),
    ]
    assert summarise(two)["reading"] == (
        "fgd, best-fit tie for the most at 130 % demand (90.00 %, +10.00 points against "
        "k8s-default)."
    )
