"""The replay: arrival order, fit, each policy's choice, the figures measured, and the FGD
paper artifact's published figures on the openb trace."""

import random
import statistics

import numpy as np
import pytest

from gpuctl.common.errors import UsageError
from gpuctl.gpus.fragmentation import fgd_score, typical_shapes
from gpuctl.whatif.core import replay as rp
from gpuctl.whatif.core.summary import summarise
from gpuctl.whatif.core.trace import MILLI, Node, Pod
from tests.whatif import openb


def gpu_pods(requests):
    return [Pod(f"p{i:03d}", 1000, 100, 1, r) for i, r in enumerate(requests)]


def test_arrivals_shuffle_then_resample_up_to_the_target():
    pods = gpu_pods([100, 200, 300, 400, 1000]) + [Pod("cpu", 1000, 1, 0, 0)]
    order = rp.arrivals(pods, 10_000, random.Random(1))
    total = sum(p.gpu_request for p in order)
    assert sorted(p.name for p in order[:6]) == sorted(p.name for p in pods)
    assert set(order[6:]) <= set(pods) and len(order) > 6
    assert 10_000 - 1000 < total <= 10_000
    assert rp.arrivals(pods, 10_000, random.Random(1)) == order
    assert rp.arrivals(pods, 10_000, random.Random(2)) != order


def test_arrivals_leave_pods_out_down_to_the_target():
    pods = gpu_pods([500] * 10)
    order = rp.arrivals(pods, 2_200, random.Random(3))
    assert len(order) == 4 and len(set(order)) == 4 and set(order) <= set(pods)


def test_arrivals_refuse_a_demand_out_of_reach():
    with pytest.raises(UsageError, match="more than 1,000,000 pod arrivals"):
        rp.arrivals(gpu_pods([1]), 10**9, random.Random(0))


NODES = [
    Node("t4", 8000, 1000, 2, "T4"),
    Node("v100", 1000, 1000, 8, "V100"),
    Node("cpu", 64000, 1000, 0, ""),
]


@pytest.mark.parametrize(
    "pod, fits",
    [
        (Pod("cpu-heavy", 4000, 1, 0, 0), [True, False, True]),
        (Pod("memory-heavy", 1, 1001, 0, 0), [False, False, False]),
        (Pod("model", 1, 1, 1, 100, ("V100",)), [False, True, False]),
        (Pod("three-gpus", 1, 1, 3, 1000), [False, True, False]),
        (Pod("share", 1, 1, 1, 700), [True, True, False]),
    ],
)
def test_fit_on_empty_nodes(pod, fits):
    assert rp.Cluster(NODES).fits(pod).tolist() == fits


def test_a_share_needs_one_gpu_with_enough_free_and_whole_gpus_nothing_allocated():
    cluster = rp.Cluster([Node("n", 64000, 1000, 2, "T4")])
    cluster.place(0, Pod("a", 1, 1, 1, 600), gpu=0)
    cluster.place(0, Pod("b", 1, 1, 1, 300), gpu=1)
    assert cluster.gpu_free.tolist() == [[400, 700]]
    assert cluster.fits(Pod("c", 1, 1, 1, 700)).tolist() == [True]
    assert cluster.fits(Pod("d", 1, 1, 1, 701)).tolist() == [False]
    assert cluster.fits(Pod("e", 1, 1, 1, 1000)).tolist() == [False]
    assert cluster.allocated == 900


def two_nodes_one_used():
    """Two equal nodes; the first holds a pod with 4 CPUs, 100 MiB and 1 GPU."""
    cluster = rp.Cluster([Node("a", 8000, 1000, 4, "X"), Node("b", 8000, 1000, 4, "X")])
    cluster.place(0, Pod("x", 4000, 100, 1, 1000), gpu=None)
    return cluster


@pytest.mark.parametrize(
    "policy, node",
    [("k8s-default", 1), ("most-allocated", 0), ("best-fit", 0), ("first-fit", 1)],
)
def test_each_policy_picks_its_node(policy, node):
    cluster = two_nodes_one_used()
    cluster.preference[:] = [0, 1]  # b first among equals
    chosen = rp.make_policy(policy, cluster, [], 10)
    pod = Pod("p", 1000, 100, 1, 1000)
    assert chosen.choose(cluster, pod, cluster.fits(pod))[0] == node


def test_ties_go_to_the_preferred_node():
    cluster = rp.Cluster([Node(n, 8000, 1000, 4, "X") for n in "abc"])
    pod = Pod("p", 1000, 100, 1, 1000)
    for preference, node in (([0, 2, 1], 1), ([5, 2, 1], 0)):
        cluster.preference[:] = preference
        chosen = rp.make_policy("best-fit", cluster, [], 10)
        assert chosen.choose(cluster, pod, cluster.fits(pod))[0] == node


def test_a_share_goes_to_the_tightest_gpu_or_under_first_fit_the_first():
    cluster = rp.Cluster([Node("n", 64000, 1000, 4, "X")])
    for gpu, share in ((0, 100), (1, 500), (2, 300)):
        cluster.place(0, Pod("x", 1, 1, 1, share), gpu)
    pod = Pod("p", 1, 1, 1, 400)  # free: 900, 500, 700, 1000
    fits = cluster.fits(pod)
    assert rp.make_policy("best-fit", cluster, [], 10).choose(cluster, pod, fits) == (0, 1)
    assert rp.make_policy("first-fit", cluster, [], 10).choose(cluster, pod, fits) == (0, 0)


def brute_force_fgd(fgd, cluster, pod):
    """Every fitting node and GPU scored from the measure recomputed after placing there;
    the best score and the (node, GPU) that reach it."""
    best, where = -1, set()
    for node in np.flatnonzero(cluster.fits(pod)):
        row = cluster.gpu_free[node : node + 1]
        if 0 < pod.gpu_milli < MILLI:
            tries = [(g, -pod.gpu_milli) for g in range(row.shape[1]) if row[0, g] >= pod.gpu_milli]
        else:
            tries = [(None, 0)]
        for gpu, change in tries:
            after = row.copy()
            if gpu is not None:
                after[0, gpu] += change
            else:
                after[0, np.flatnonzero(after[0] == MILLI)[: pod.gpus]] = 0
            frag = fgd.frag.of_nodes(
                after,
                cluster.cpu_free[node : node + 1] - pod.cpu_milli,
                fgd.frag.accepts[node:][:1],
            )
            score = int(fgd_score(fgd.before[node : node + 1], frag)[0])
            if score > best:
                best, where = score, {(int(node), gpu)}
            elif score == best:
                where.add((int(node), gpu))
    return best, where


def test_fgd_places_where_fragmentation_grows_least():
    rng = random.Random(5)
    nodes = [
        Node(f"n{i}", rng.choice([16000, 64000]), 10**6, rng.choice([1, 2, 4, 8]), rng.choice("AB"))
        for i in range(12)
    ]
    pods = [
        Pod(f"p{i}", rng.choice([1000, 4000, 8000]), 1, g, m, rng.choice([(), (), ("A",)]))
        for i, (g, m) in enumerate(
            rng.choice([(1, 200), (1, 500), (1, 750), (1, 1000), (2, 1000), (0, 0)])
            for _ in range(120)
        )
    ]
    cluster = rp.Cluster(nodes)
    fgd = rp.Fgd(cluster, typical_shapes(pods))
    for pod in pods:
        fits = cluster.fits(pod)
        if not fits.any():
            continue
        node, gpu = fgd.choose(cluster, pod, fits)
        best, where = brute_force_fgd(fgd, cluster, pod)
        # among equal nodes the preferred one, and on it the first best GPU
        assert (node, gpu) == min(
            (w for w in where if w[0] == node), key=lambda w: -1 if w[1] is None else w[1]
        )
        assert node == max({w[0] for w in where}, key=lambda n: cluster.preference[n])
        cluster.place(node, pod, gpu)
        fgd.placed(cluster, node)


def test_figures_of_a_small_replay():
    nodes = [Node("a", 8000, 1000, 1, "X"), Node("b", 8000, 1000, 1, "X")]
    pods = [Pod("p1", 1000, 1, 1, 1000), Pod("p2", 1000, 1, 1, 1000), Pod("p3", 1000, 1, 1, 1000)]
    run = rp.replay(nodes, pods, "best-fit", seed=0, demand_permille=1500)
    # capacity 2 GPUs; 3 arrive (150 %): the last fits nowhere. A point is recorded as the
    # cluster was before the pod that took demand past it
    assert run.capacity == 2000
    assert run.allocated_at == {50: 1000, 90: 1000, 100: 2000, 130: 2000}
    assert run.whole_nodes_at == {50: 1, 90: 1, 100: 0, 130: 0}
    assert run.whole_largest_at == run.whole_nodes_at  # every node has the most GPUs: 1
    assert run.first_gpu_failure == 3000
    assert (run.unallocated, run.fragmented) == (0, 0.0)
    summary = summarise([run])["policies"][0]
    assert summary == {
        "policy": "best-fit",
        "gpu_nodes_tainted": False,
        "seeds": [0],
        "alloc_pct": {"50": 50, "90": 50, "100": 100, "130": 100},
        "first_gpu_pod_failure_demand_pct": 150,
        "unallocated_gpus_end": 0,
        "fragmented_gpu_pct_end": 0,
        "empty_full_nodes_at_50": 1,
        "empty_largest_nodes_at_50": 1,
        "alloc_pct_mean": {"50": 50.0, "90": 50.0, "100": 100.0, "130": 100.0},
    }


def test_a_replay_is_reproducible_by_its_seed():
    nodes = [Node(f"n{i}", 32000, 10**5, 4, "X") for i in range(6)]
    pods = [Pod(f"p{i}", 1000 * (1 + i % 5), 10, 1, 100 * (1 + i % 10)) for i in range(40)]
    runs = [rp.replay(nodes, pods, "k8s-default", seed, 1300) for seed in (1, 1, 2)]
    assert runs[0] == runs[1] and runs[0] != runs[2]


@pytest.mark.parametrize(
    "nodes, pods, message",
    [
        ([Node("c", 1000, 1, 0, "")], gpu_pods([500]), "no GPUs"),
        (NODES, [Pod("c", 1, 1, 0, 0)], "request no GPU"),
        ([], gpu_pods([500]), "1 to 100,000 nodes"),
    ],
)
def test_nothing_to_replay_is_refused(nodes, pods, message):
    with pytest.raises(UsageError, match=message):
        rp.replay(nodes, pods, "best-fit", 0, 1300)


def test_an_unknown_policy_is_refused():
    with pytest.raises(UsageError, match="unknown policy 'spread'"):
        rp.replay(NODES, gpu_pods([500]), "spread", 0, 1300)


def test_reproduces_the_papers_best_fit_figure_on_the_openb_trace():
    """FGD artifact, default trace, 130 % demand, median of seeds 42-51: best-fit 93.1 %."""
    nodes, pods = openb.load()
    runs = [rp.replay(nodes, pods, "best-fit", seed, 1300) for seed in range(42, 52)]
    at_130 = statistics.median(r.allocated_at[130] * 100 / r.capacity for r in runs)
    assert abs(at_130 - 93.1) <= 1.0, at_130


def test_reproduces_the_papers_fgd_figure_on_the_openb_trace():
    """FGD 95.4 % (median of 10 seeds; one seed here, to keep the test short: the
    artifact's seeds range over 95.27-95.49 %)."""
    nodes, pods = openb.load()
    run = rp.replay(nodes, pods, "fgd", 42, 1300)
    assert abs(run.allocated_at[130] * 100 / run.capacity - 95.4) <= 1.0


def test_on_openb_untainted_gpu_nodes_undo_packing_and_the_extender_wins_tainted():
    """As deployed: most-allocated and the extender are second schedulers, so the default
    scheduler's LeastAllocated puts pods without GPUs on the GPU nodes packing keeps empty,
    unless a NoSchedule taint keeps them off (one seed; bench/bench_whatif_policies.py
    replays seeds 42-51)."""
    nodes, pods = openb.load()
    shapes = typical_shapes(pods)

    def at_130(policy, tainted):
        run = rp.replay(nodes, pods, policy, 42, 1300, shapes=shapes, gpu_nodes_tainted=tainted)
        return run.allocated_at[130] * 100 / run.capacity, run

    default, _ = at_130("k8s-default", False)
    untainted, _ = at_130("most-allocated", False)
    tainted, run = at_130("most-allocated", True)
    assert untainted < default - 5 and untainted < tainted - 5
    assert run.whole_largest_at[50] >= 300  # whole 8-GPU nodes
    extender, run = at_130("extender", True)
    assert extender >= 95.0 and run.first_gpu_failure * 100 / run.capacity >= 94
    assert run.whole_largest_at[50] >= 280


def test_gpu_node_taints_keep_pods_without_gpus_on_cpu_nodes():
    cluster = rp.Cluster([Node("gpu", 8000, 1000, 1, "X"), Node("cpu", 8000, 1000, 0, "")])
    cpu_pod, gpu_pod = Pod("c", 1000, 1, 0, 0), Pod("g", 1000, 1, 1, 1000)
    assert cluster.fits(cpu_pod).tolist() == [True, True]
    cluster.taint_gpu_nodes()
    assert cluster.fits(cpu_pod).tolist() == [False, True]
    assert cluster.fits(gpu_pod).tolist() == [True, False]


def test_a_clusters_own_taints_keep_pods_without_gpus_off_those_nodes():
    nodes = [Node("a", 8000, 1000, 1, "X"), Node("b", 8000, 1000, 1, "X")]
    cluster = rp.Cluster(nodes)
    cluster.close_to_plain_pods(frozenset({"a"}))
    assert cluster.fits(Pod("c", 1000, 1, 0, 0)).tolist() == [False, True]
    assert cluster.fits(Pod("g", 1000, 1, 1, 1000)).tolist() == [True, True]
    pods = [Pod(f"c{i}", 1000, 1, 0, 0) for i in range(4)] + [Pod("g", 1000, 1, 1, 1000)]
    run = rp.replay(nodes, pods, "k8s-default", 0, 1000, closed=frozenset({"a", "b"}))
    # the GPU pods still go there (pods without GPUs are dropped)
    assert run.allocated_at[100] == run.capacity == 2000
