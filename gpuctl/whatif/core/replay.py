"""Replay a workload onto nodes one pod at a time under a scheduling policy, and measure the
GPU allocation as demand grows. Pure.

The replay is the FGD paper's artifact's (hkust-adsl/kubernetes-scheduler-simulator:
SortClusterPods, TunePodsByNodeTotalResource, SchedulePods): the pods, in name order, are
shuffled with the seed; while their GPU request is below demand × the GPU capacity, pods
drawn at random from the list are appended (while it is above, pods drawn at random are
removed); then each pod in turn goes to the fitting node its policy scores highest, or is
dropped if it fits nowhere. No pod leaves. Ties go to the node that comes first in an order
of the nodes drawn at random with the seed (the artifact's scheduler picks the smallest node
name, and names the nodes in a random order; upstream kube-scheduler picks one of the tied
nodes at random at each placement). Fit: free CPU and memory cover the pod's requests; the
node's GPU model is one the pod accepts (if it names any); a pod with a share of one GPU
needs one GPU with that much free, a pod with whole GPUs that many GPUs with nothing
allocated.

Policies (GPU amounts in thousandths of a GPU):
- k8s-default: kube-scheduler's default profile, GPU-blind: LeastAllocated over cpu and
  memory (weights 1) + BalancedAllocation (scoring.py);
- most-allocated: NodeResourcesFit MostAllocated with gpuctl.gpus.scoring's weights (cpu 1,
  memory 1, nvidia.com/gpu W), BalancedAllocation off — the profile `gpuctl sched render`
  writes;
- best-fit: the artifact's BestFitScore: ⌊100 · (1 − ½ (free CPU − CPU) / largest node's
  CPU − ½ (free GPU − GPU) / largest node's GPU)⌋, after placing the pod;
- first-fit: the first fitting node (in the seed's order of the nodes);
- fgd: the artifact's FGDScore (fragmentation.py).
A share of a GPU goes to the fitting GPU with the least free (the artifact's default), to
the first fitting GPU under first-fit, and where fragmentation grows least under fgd; whole
GPUs are the first free ones.

Where this differs from the artifact: random draws come from Python's generator (same
method, other numbers); resampling stops at the first pod whose whole GPU request would
pass the target (the artifact compares its share of one GPU); best-fit divides by the
largest node of the cluster replayed (the artifact by 128 CPUs and 8 GPUs, openb's largest).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from gpuctl.common.errors import UsageError
from gpuctl.gpus.fragmentation import Fragmentation, Shape, fgd_score, typical_shapes
from gpuctl.gpus.placement import Placement
from gpuctl.gpus.scoring import DEFAULT_GPU_WEIGHT, GPU_RESOURCE, resource_weights
from gpuctl.whatif.core import scoring
from gpuctl.whatif.core.trace import MILLI, Node, Pod

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Ints = NDArray[np.int64]
    Bools = NDArray[np.bool_]

POLICIES = ("k8s-default", "most-allocated", "extender", "best-fit", "first-fit", "fgd")
# deployed as a second scheduler beside the default one: only GPU pods ask for it
SECOND_SCHEDULER = frozenset({"most-allocated", "extender"})
DEMAND_POINTS = (50, 90, 100, 130)  # % of the GPU capacity at which allocation is reported
MAX_ARRIVALS = 1_000_000
MAX_NODES = 100_000  # Kubernetes supports 5,000
PREFERENCE_SPAN = MAX_NODES + 1  # above every node preference: breaks ties, never scores


@dataclass(frozen=True)
class Run:
    """What one replay measured. GPU amounts in thousandths of a GPU."""

    policy: str
    seed: int
    capacity: int
    gpu_nodes_tainted: bool
    allocated_at: dict[int, int]  # demand point (%) → GPU allocated just before demand passed it
    whole_nodes_at: dict[int, int]  # demand point (%) → GPU nodes with every GPU unallocated
    # the same among the nodes with the most GPUs (8 on openb): room for a full-node job
    whole_largest_at: dict[int, int]
    first_gpu_failure: int | None  # GPU request arrived, counting the first GPU pod dropped
    unallocated: int  # at the end
    fragmented: float  # of the unallocated at the end (fragmentation.py)


class Cluster:
    """The nodes' capacity and what is allocated on them, one column per node."""

    CPU, MEMORY, GPU = 0, 1, 2  # rows of `capacity` and `used`

    def __init__(self, nodes: Sequence[Node]):
        import numpy as np

        self.names = [n.name for n in nodes]
        self.models = [n.model for n in nodes]
        self.gpus: Ints = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.cap: Ints = np.array(
            [[n.cpu_milli for n in nodes], [n.memory_mib for n in nodes], self.gpus * MILLI],
            dtype=np.int64,
        ).reshape(3, len(nodes))
        self.used: Ints = np.zeros_like(self.cap)  # what the pods request; GPU in thousandths
        self.cpu_free: Ints = self.cap[self.CPU].copy()
        self.memory_free: Ints = self.cap[self.MEMORY].copy()
        # the requests as kube-scheduler's resource scores count them: a pod requesting no
        # cpu or memory counts as requesting NON_ZERO_*
        self.counted: Ints = np.zeros_like(self.cap)
        self.capacity = int(self.cap[self.GPU].sum())
        self.gpu_free: Ints = np.zeros((len(nodes), max(int(self.gpus.max()), 1)), np.int64)
        for i, n in enumerate(nodes):
            self.gpu_free[i, : n.gpus] = MILLI
        self.max_free: Ints = self.gpu_free.max(axis=1)
        self.whole_free: Ints = (self.gpu_free == MILLI).sum(axis=1)
        self.cpu_only_allowed: Bools = np.ones(len(nodes), dtype=bool)  # see taint_gpu_nodes
        self._accepting: dict[tuple[str, ...], Bools] = {}
        # among equal scores the highest preference wins: distinct, first node first until
        # the replay draws an order
        self.preference: Ints = np.arange(len(nodes), 0, -1, dtype=np.int64)

    @property
    def gpu_unallocated(self) -> Ints:
        result: Ints = self.cap[self.GPU] - self.used[self.GPU]
        return result

    @property
    def allocated(self) -> int:
        return int(self.used[self.GPU].sum())

    def taint_gpu_nodes(self) -> None:
        """GPU nodes carry a NoSchedule taint that pods without GPUs do not tolerate."""
        self.cpu_only_allowed &= self.gpus == 0

    def close_to_plain_pods(self, names: frozenset[str]) -> None:
        """These nodes' own taints keep pods without GPUs out."""
        import numpy as np

        if names:
            self.cpu_only_allowed &= ~np.array([n in names for n in self.names])

    def fits(self, pod: Pod) -> Bools:
        ok: Bools = (self.cpu_free >= pod.cpu_milli) & (self.memory_free >= pod.memory_mib)
        if not pod.gpus:
            ok &= self.cpu_only_allowed
        if pod.gpus:
            if pod.gpu_models:
                ok &= self.accepting(pod.gpu_models)
            ok &= (
                (self.max_free >= pod.gpu_milli) if pod.gpus == 1 else (self.whole_free >= pod.gpus)
            )
        return ok

    def accepting(self, models: tuple[str, ...]) -> Bools:
        """Nodes whose GPU model is one of `models`."""
        import numpy as np

        if models not in self._accepting:
            self._accepting[models] = np.array([m in models for m in self.models])
        return self._accepting[models]

    def place(self, node: int, pod: Pod, gpu: int | None) -> None:
        """Allocate the pod on the node; `gpu` is the GPU that gets a share of one."""
        # element by element: numpy is slow on single elements, and this runs per pod
        self.used[self.CPU, node] += pod.cpu_milli
        self.used[self.MEMORY, node] += pod.memory_mib
        self.cpu_free[node] -= pod.cpu_milli
        self.memory_free[node] -= pod.memory_mib
        self.counted[self.CPU, node] += pod.cpu_milli or scoring.NON_ZERO_CPU_MILLI
        self.counted[self.MEMORY, node] += pod.memory_mib or scoring.NON_ZERO_MEMORY_MIB
        if not pod.gpus:
            return
        self.used[self.GPU, node] += pod.gpu_request
        self.counted[self.GPU, node] += pod.gpu_request
        row = self.gpu_free[node].tolist()
        if pod.gpu_milli < MILLI:
            assert gpu is not None
            row[gpu] -= pod.gpu_milli
        else:
            whole = [i for i, free in enumerate(row) if free == MILLI][: pod.gpus]
            for i in whole:
                row[i] = 0
        self.gpu_free[node] = row
        self.max_free[node] = max(row)
        self.whole_free[node] = row.count(MILLI)


class Policy(Protocol):
    def choose(self, cluster: Cluster, pod: Pod, fits: Bools) -> tuple[int, int | None]:
        """The node for the pod among those it fits, and for a share, the GPU."""
        ...

    def placed(self, cluster: Cluster, node: int) -> None:
        """Told after each placement."""
        ...


class _Scored:
    """A policy that scores every node: the best-scored fitting node wins; a share goes to
    the fitting GPU with the least free."""

    def scores(self, cluster: Cluster, pod: Pod) -> Ints:
        raise NotImplementedError

    def choose(self, cluster: Cluster, pod: Pod, fits: Bools) -> tuple[int, int | None]:
        import numpy as np

        node = _best(np.where(fits, self.scores(cluster, pod), -1), cluster.preference)
        return node, _tightest_gpu(cluster.gpu_free[node], pod)

    def placed(self, cluster: Cluster, node: int) -> None:
        pass


class KubeDefault(_Scored):
    def __init__(self, cluster: Cluster):
        self.scorer = scoring.Scorer(cluster.cap[:2], (1, 1))

    def scores(self, cluster: Cluster, pod: Pod) -> Ints:
        least = self.scorer.least_allocated(cluster.counted[:2] + _counted(pod)[:2])
        if not (pod.cpu_milli or pod.memory_mib):
            return least  # BalancedAllocation skips a pod that requests nothing
        requested = cluster.used[:2] + _column(pod.cpu_milli, pod.memory_mib)
        result: Ints = least + self.scorer.balanced_allocation(requested)
        return result


class MostAllocated(_Scored):
    def __init__(self, cluster: Cluster, gpu_weight: int):
        weight = dict(resource_weights(gpu_weight))
        self.cpu_memory = scoring.Scorer(cluster.cap[:2], (weight["cpu"], weight["memory"]))
        self.with_gpu = scoring.Scorer(
            cluster.cap, (weight["cpu"], weight["memory"], weight[GPU_RESOURCE])
        )

    def scores(self, cluster: Cluster, pod: Pod) -> Ints:
        if not pod.gpus:  # an extended resource the pod does not request is not scored
            return self.cpu_memory.most_allocated(cluster.counted[:2] + _counted(pod)[:2])
        return self.with_gpu.most_allocated(cluster.counted + _counted(pod))


class BestFit(_Scored):
    def __init__(self, cluster: Cluster):
        # the largest node's CPU and GPU
        self.most_cpu = int(cluster.cap[Cluster.CPU].max()) or 1
        self.most_gpu = int(cluster.cap[Cluster.GPU].max())

    def scores(self, cluster: Cluster, pod: Pod) -> Ints:
        import numpy as np

        left = (cluster.cpu_free - pod.cpu_milli) / self.most_cpu * 0.5
        left = left + (cluster.gpu_unallocated - pod.gpu_request) / self.most_gpu * 0.5
        result: Ints = ((1.0 - left) * scoring.MAX_NODE_SCORE).astype(np.int64)
        return result


class FirstFit:
    def choose(self, cluster: Cluster, pod: Pod, fits: Bools) -> tuple[int, int | None]:
        import numpy as np

        node = _best(fits.astype(np.int64), cluster.preference)
        gpu = None
        if 0 < pod.gpu_milli < MILLI:
            gpu = int(np.argmax(cluster.gpu_free[node] >= pod.gpu_milli))
        return node, gpu

    def placed(self, cluster: Cluster, node: int) -> None:
        pass


class Fgd:
    """Where the fragmentation against the workload's typical shapes grows least."""

    def __init__(self, cluster: Cluster, shapes: Sequence[Shape]):
        self.frag = Fragmentation(shapes, cluster.models)
        self.counted, self.free_there = self.frag.gpu_terms(cluster.gpu_free)
        self.before = self.frag.of_nodes(cluster.gpu_free, cluster.cpu_free, self.frag.accepts)

    def placed(self, cluster: Cluster, node: int) -> None:
        one = slice(node, node + 1)
        self.counted[one], self.free_there[one] = self.frag.gpu_terms(cluster.gpu_free[one])
        self.before[one] = self.frag.of_nodes(
            cluster.gpu_free[one], cluster.cpu_free[one], self.frag.accepts[one]
        )

    def choose(self, cluster: Cluster, pod: Pod, fits: Bools) -> tuple[int, int | None]:
        import numpy as np

        at = np.flatnonzero(fits)
        weight = self.frag.cpu_weight(cluster.cpu_free[at] - pod.cpu_milli)
        free = cluster.gpu_unallocated[at]
        if not 0 < pod.gpu_milli < MILLI:
            # no GPU, or whole ones: each GPU taken had its whole share free in every group
            after = self.frag.amount(
                free - pod.gpu_request,
                weight,
                self.counted[at] - pod.gpus,
                self.free_there[at] - pod.gpu_request,
                self.frag.accepts[at],
            )
            return int(at[_best(fgd_score(self.before[at], after), cluster.preference[at])]), None
        # A share: try each GPU it fits on (one per distinct free share: equal GPUs score
        # alike, and the first of them is the one the artifact keeps).
        rows = cluster.gpu_free[at]
        earlier_same = (rows[:, :, None] == rows[:, None, :]) & np.tri(
            rows.shape[1], k=-1, dtype=bool
        )
        row, gpu = np.nonzero((rows >= pod.gpu_milli) & ~earlier_same.any(axis=2))
        was = rows[row, gpu][:, None]
        now = was - pod.gpu_milli
        enough_was, enough_now = was >= self.frag.share, now >= self.frag.share
        after = self.frag.amount(
            free[row] - pod.gpu_milli,
            weight[row],
            self.counted[at][row] - enough_was + enough_now,
            self.free_there[at][row] - was * enough_was + now * enough_now,
            self.frag.accepts[at][row],
        )
        score = fgd_score(self.before[at][row], after)
        first = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])  # each node's first try
        node_score = np.maximum.reduceat(score, first)
        pick = row[first][_best(node_score, cluster.preference[at][row[first]])]
        best_try = np.flatnonzero((row == pick) & (score == node_score.max()))[0]
        return int(at[pick]), int(gpu[best_try])


class Extender(_Scored):
    """gpuctl's scheduler extender (gpuctl.gpus.placement): its profile scores by the
    extender alone, so its first choice wins; the share goes where the device plugin puts it."""

    def __init__(self, cluster: Cluster, shapes: Sequence[Shape]):
        self.placement = Placement(
            shapes, cluster.names, cluster.models, cluster.gpu_free, cluster.cpu_free
        )

    def choose(self, cluster: Cluster, pod: Pod, fits: Bools) -> tuple[int, int | None]:
        import numpy as np

        at = np.flatnonzero(fits)
        node = int(at[np.argmax(self.placement.keys(pod, at))])
        return node, _tightest_gpu(cluster.gpu_free[node], pod)

    def placed(self, cluster: Cluster, node: int) -> None:
        self.placement.update(node, cluster.gpu_free[node], int(cluster.cpu_free[node]))


def make_policy(name: str, cluster: Cluster, shapes: Sequence[Shape], gpu_weight: int) -> Policy:
    if name == "k8s-default":
        return KubeDefault(cluster)
    if name == "most-allocated":
        return MostAllocated(cluster, gpu_weight)
    if name == "best-fit":
        return BestFit(cluster)
    if name == "first-fit":
        return FirstFit()
    if name == "fgd":
        return Fgd(cluster, shapes)
    if name == "extender":
        return Extender(cluster, shapes)
    raise UsageError(f"unknown policy {name!r} (use {', '.join(POLICIES)})")


class Demand(Protocol):
    """What arrives: a pod, or a gang (gpuctl.whatif.core.gangs)."""

    @property
    def name(self) -> str: ...

    @property
    def gpu_request(self) -> int: ...


Arriving = TypeVar("Arriving", bound=Demand)


def arrivals(pods: Sequence[Arriving], target: int, rng: random.Random) -> list[Arriving]:
    """The pods in the order they arrive, their GPU request tuned to at most `target`."""
    base = sorted(pods, key=lambda p: p.name)
    order = list(base)
    rng.shuffle(order)
    total = sum(p.gpu_request for p in order)
    if total < target:
        while True:
            pod = base[rng.randrange(len(base))]
            if total + pod.gpu_request > target:
                break
            if len(order) >= MAX_ARRIVALS:
                raise UsageError(
                    f"reaching the demand would take more than {MAX_ARRIVALS:,} pod arrivals",
                    hint="lower --demand, or replay a workload that requests more GPU",
                )
            order.append(pod)
            total += pod.gpu_request
    while total > target:
        total -= order.pop(rng.randrange(len(order))).gpu_request
    return order


def replay(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    policy: str,
    seed: int,
    demand_permille: int,
    gpu_weight: int = DEFAULT_GPU_WEIGHT,
    shapes: Sequence[Shape] | None = None,
    gpu_nodes_tainted: bool = False,
    closed: frozenset[str] = frozenset(),
) -> Run:
    """One replay of `pods` onto empty `nodes` until the GPU request reaches
    demand_permille / 1000 × the GPU capacity; with `gpu_nodes_tainted`, pods without GPUs
    may go to nodes without GPUs only; the nodes in `closed` (tainted so) never take them."""
    if not 0 < len(nodes) <= MAX_NODES:
        raise UsageError(f"the replay takes 1 to {MAX_NODES:,} nodes, not {len(nodes):,}")
    cluster = Cluster(nodes)
    if not cluster.capacity:
        raise UsageError("the nodes have no GPUs: there is no GPU capacity to replay against")
    if not any(p.gpu_request for p in pods):
        raise UsageError("the pods request no GPU: there is no GPU demand to replay")
    shapes = typical_shapes(pods) if shapes is None else shapes
    cluster.close_to_plain_pods(closed)
    if gpu_nodes_tainted:
        cluster.taint_gpu_nodes()
    chosen = make_policy(policy, cluster, shapes, gpu_weight)
    # pods without GPUs do not ask for a second scheduler: the default one places them
    default = KubeDefault(cluster) if policy in SECOND_SCHEDULER else chosen
    rng = random.Random(seed)
    order = arrivals(pods, cluster.capacity * demand_permille // 1000, rng)
    preference = list(range(len(nodes)))
    rng.shuffle(preference)
    cluster.preference[:] = preference
    allocated_at: dict[int, int] = {}
    whole_nodes_at: dict[int, int] = {}
    whole_largest_at: dict[int, int] = {}
    largest = cluster.gpus == cluster.gpus.max()

    def record(point: int) -> None:
        allocated_at[point] = cluster.allocated
        whole = (cluster.gpus > 0) & (cluster.whole_free == cluster.gpus)
        whole_nodes_at[point] = int(whole.sum())
        whole_largest_at[point] = int((whole & largest).sum())

    pending = [p for p in DEMAND_POINTS if p * 10 <= demand_permille]
    arrived = 0
    first_failure = None
    for pod in order:
        arrived += pod.gpu_request
        while pending and arrived * 100 > pending[0] * cluster.capacity:
            record(pending.pop(0))  # the cluster as it was when demand reached the point
        fits = cluster.fits(pod)
        if not fits.any():
            if pod.gpus and first_failure is None:
                first_failure = arrived
            continue
        scheduler = chosen if pod.gpus else default
        node, gpu = scheduler.choose(cluster, pod, fits)
        cluster.place(node, pod, gpu)
        chosen.placed(cluster, node)
    for point in pending:  # reached at the end
        record(point)
    frag = Fragmentation(shapes, cluster.models)
    fragmented = frag.of_nodes(cluster.gpu_free, cluster.cpu_free, frag.accepts)
    return Run(
        policy=policy,
        seed=seed,
        capacity=cluster.capacity,
        gpu_nodes_tainted=gpu_nodes_tainted,
        allocated_at=allocated_at,
        whole_nodes_at=whole_nodes_at,
        whole_largest_at=whole_largest_at,
        first_gpu_failure=first_failure,
        unallocated=cluster.capacity - cluster.allocated,
        fragmented=float(fragmented.sum()),
    )


def _best(scores: Ints, preference: Ints) -> int:
    """The index of the highest score (nodes a pod does not fit score < 0), the most
    preferred among equals."""
    import numpy as np

    return int(np.argmax(scores * PREFERENCE_SPAN + preference))


def _tightest_gpu(row: Ints, pod: Pod) -> int | None:
    import numpy as np

    if not 0 < pod.gpu_milli < MILLI:
        return None
    return int(np.argmin(np.where(row >= pod.gpu_milli, row, MILLI + 1)))


def _counted(pod: Pod) -> Ints:
    """The pod's requests as a column, as kube-scheduler's resource scores count them."""
    return _column(
        pod.cpu_milli or scoring.NON_ZERO_CPU_MILLI,
        pod.memory_mib or scoring.NON_ZERO_MEMORY_MIB,
        pod.gpu_request,
    )


def _column(*values: int) -> Ints:
    import numpy as np

    return np.array(values, dtype=np.int64).reshape(len(values), 1)
