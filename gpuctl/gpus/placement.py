"""Where gpuctl's scheduler extender puts a GPU pod: the node where the fragmentation
gradient (fragmentation.py, the FGD paper's measure) grows least, the GPU within the node
being the one the device plugin will choose, ties broken by a fixed rank of the node. Pure:
one implementation, used by `gpuctl sched extender` on the live cluster and by `gpuctl
whatif --policy extender` in the replay.

- The node only: the extender picks a node, never a GPU index. The GPU a share goes to is
  the device plugin's choice, taken to be the fitting GPU with the least free share (the
  bin-packing choice of sharing device plugins); the score is computed for that GPU.
- Ties: FGD scores are ⌊100·sigmoid⌋, so many nodes tie; the FGD paper's lead over best-fit
  comes from the artifact's fixed tie order (random ties lose it). Here a node's rank is a
  hash of its name: fixed across restarts and replays, and a new node takes its place in
  the order without moving the others.
- kube-scheduler adds an extender's priorities (0..MAX_EXTENDER_PRIORITY) times its weight
  to its plugins' scores: the best TOP nodes get TOP, TOP−1, … 1 (so the extender's first
  choice is one node, not a tie kube-scheduler would break at random), the rest 0.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuctl.gpus.fragmentation import Fragmentation, PodShape, Shape, fgd_score
from gpuctl.gpus.scoring import MILLI

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Ints = NDArray[np.int64]
    Floats = NDArray[np.float64]

MAX_EXTENDER_PRIORITY = 10  # k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority
RANK_SPAN = 1 << 32  # ranks are below it: a key is score · RANK_SPAN + rank


def node_rank(name: str) -> int:
    """The node's fixed place in the tie order (higher wins)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")


def device_plugin_gpus(gpu_free: Ints, share: int) -> Ints:
    """Per row of GPU free shares, the GPU a share of `share` goes to: the fitting one
    with the least free (the first of equals); rows where none fits get the first GPU."""
    import numpy as np

    result: Ints = np.argmin(np.where(gpu_free >= share, gpu_free, MILLI + 1), axis=1)
    return result


class Placement:
    """The FGD state of a fixed set of nodes: their fragmentation and its terms, kept up
    to date by `update` after anything changes on a node."""

    def __init__(
        self,
        shapes: Sequence[Shape],
        names: Sequence[str],
        models: Sequence[str],
        gpu_free: Ints,
        cpu_free: Ints,
    ):
        import numpy as np

        self.frag = Fragmentation(shapes, models)
        self.rank: Ints = np.array([node_rank(n) for n in names], dtype=np.int64)
        self.gpu_free = gpu_free.copy()  # node × GPU: free share, in thousandths
        self.cpu_free = cpu_free.copy()
        self.counted, self.free_there = self.frag.gpu_terms(self.gpu_free)
        self.before: Floats = self.frag.of_nodes(self.gpu_free, self.cpu_free, self.frag.accepts)

    def update(self, node: int, gpu_free: Sequence[int], cpu_free: int) -> None:
        one = slice(node, node + 1)
        self.gpu_free[node] = gpu_free
        self.cpu_free[node] = cpu_free
        self.counted[one], self.free_there[one] = self.frag.gpu_terms(self.gpu_free[one])
        self.before[one] = self.frag.of_nodes(
            self.gpu_free[one], self.cpu_free[one], self.frag.accepts[one]
        )

    def keys(self, pod: PodShape, at: Ints) -> Ints:
        """Per node of `at` (nodes the pod fits), score · RANK_SPAN + rank: the highest
        key is the extender's choice."""
        import numpy as np

        weight = self.frag.cpu_weight(self.cpu_free[at] - pod.cpu_milli)
        free = self.gpu_free[at].sum(axis=1)
        counted, free_there = self.counted[at], self.free_there[at]
        request = pod.gpus * pod.gpu_milli
        if 0 < pod.gpu_milli < MILLI:
            rows = self.gpu_free[at]
            gpu = device_plugin_gpus(rows, pod.gpu_milli)
            was = rows[np.arange(len(at)), gpu][:, None]
            now = was - pod.gpu_milli
            enough_was, enough_now = was >= self.frag.share, now >= self.frag.share
            counted = counted - enough_was + enough_now
            free_there = free_there - was * enough_was + now * enough_now
        else:  # no GPU, or whole ones: each GPU taken had its whole share free in every group
            counted = counted - pod.gpus
            free_there = free_there - request
        after = self.frag.amount(free - request, weight, counted, free_there, self.frag.accepts[at])
        result: Ints = fgd_score(self.before[at], after) * RANK_SPAN + self.rank[at]
        return result


def priorities(keys: Ints, top: int = MAX_EXTENDER_PRIORITY) -> Ints:
    """The extender priorities of nodes with these keys: top, top−1, … 1 for the best
    `top`, 0 for the rest."""
    import numpy as np

    result: Ints = np.zeros(len(keys), dtype=np.int64)
    best = np.argsort(-keys, kind="stable")[:top]
    result[best] = np.arange(top, top - len(best), -1)
    return result
