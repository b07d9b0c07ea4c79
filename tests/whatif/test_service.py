"""`whatif`'s comparison: every policy once per seed, told before each run, summarised as
the replay itself would be."""

from gpuctl.gpus.fragmentation import typical_shapes
from gpuctl.whatif import service
from gpuctl.whatif.core import replay as rp
from gpuctl.whatif.core.summary import summarise
from gpuctl.whatif.core.trace import Node, Pod

NODES = [Node("a", 64000, 262144, 8, "V100"), Node("b", 32000, 131072, 2, "T4")]
PODS = [Pod(f"p{i}", 4000, 8192, 1, r) for i, r in enumerate((250, 500, 1000, 1000))]


def test_each_policy_is_replayed_once_per_seed_and_summarised():
    told = []
    result = service.compare(
        NODES, PODS, ["fgd", "best-fit"], [7, 8], 1300, 20, lambda p, s: told.append((p, s))
    )
    assert told == [("fgd", 7), ("fgd", 8), ("best-fit", 7), ("best-fit", 8)]
    shapes = typical_shapes(PODS)
    runs = [rp.replay(NODES, PODS, p, s, 1300, 20, shapes) for p, s in told]
    assert result == summarise(runs)
    assert [p["policy"] for p in result["policies"]] == ["fgd", "best-fit"]
