"""The FGD fragmentation measure and its score, against a shape-by-shape transcription of the
paper artifact's NodeGpuShareFragAmount (pkg/utils/frag.go)."""

import random

import numpy as np
import pytest

from gpuctl.gpus.fragmentation import Fragmentation, Shape, fgd_score, typical_shapes
from gpuctl.whatif.core.trace import Pod


def artifact_fragmentation(shapes, gpu_free, cpu_free, model):
    """Per typical shape: all the node's free GPU is fragmented unless the shape fits (its
    model, its CPU, enough GPUs with its share free); then only the GPUs below its share."""
    total = sum(gpu_free)
    out = 0.0
    for t in shapes:
        if t.gpu_milli == 0 or (t.models and model not in t.models):
            out += t.frequency * total
            continue
        hosts = sum(1 for f in gpu_free if f >= t.gpu_milli) >= t.gpus
        if hosts and cpu_free >= t.cpu_milli:
            out += t.frequency * sum(f for f in gpu_free if f < t.gpu_milli)
        else:
            out += t.frequency * total
    return out


SHAPES = [
    Shape(4000, 500, 1, (), 0.3),
    Shape(8000, 1000, 1, (), 0.2),
    Shape(16000, 1000, 2, ("A",), 0.1),
    Shape(2000, 250, 1, ("B",), 0.1),
    Shape(12000, 1000, 8, (), 0.1),
    Shape(6000, 0, 0, (), 0.2),
]


def test_a_node_by_hand():
    # GPUs with 1000 and 300 free, plenty of CPU, model A:
    # 500-share fits, 300 below it: 0.3·300; 1-GPU fits, 300 below: 0.2·300;
    # 2 whole GPUs do not fit: 0.1·1300; model B only: 0.1·1300; 8 GPUs: 0.1·1300;
    # no GPU: 0.2·1300
    frag = Fragmentation(SHAPES, ["A"])
    got = frag.of_nodes(np.array([[1000, 300]]), np.array([64000]), frag.accepts)
    assert got.tolist() == pytest.approx([0.5 * 300 + 0.5 * 1300])


def test_matches_the_artifact_on_random_nodes():
    rng = random.Random(7)
    models = ["A", "B", "C"]
    frag = Fragmentation(SHAPES, models)
    for _ in range(500):
        gpus = rng.choice([1, 2, 4, 8])
        free = [rng.choice([0, 1000, rng.randrange(1001)]) for _ in range(gpus)] + [0] * (8 - gpus)
        cpu, m = rng.randrange(20000), rng.randrange(3)
        got = frag.of_nodes(np.array([free]), np.array([cpu]), frag.accepts[m : m + 1])[0]
        assert got == pytest.approx(artifact_fragmentation(SHAPES, free[:gpus], cpu, models[m]))


def test_typical_shapes_cover_95_percent_most_common_first():
    pods = (
        [Pod(f"a{i}", 1000, 1, 1, 500) for i in range(50)]
        + [Pod(f"b{i}", 2000, 1, 1, 1000) for i in range(30)]
        + [Pod(f"c{i}", 0, 1, 0, 0) for i in range(15)]  # no CPU counts as 100m
        + [Pod(f"d{i}", 9000, 1, 8, 1000, ("X", "Y")) for i in range(3)]
        + [Pod(f"e{i}", 3000, 1, 2, 1000) for i in range(2)]
    )
    shapes = typical_shapes(pods)
    # 50 + 30 + 15 = 95 of 100: the rest is left out and the frequencies renormalised
    assert [(s.cpu_milli, s.gpu_milli, s.gpus, s.models) for s in shapes] == [
        (1000, 500, 1, ()),
        (2000, 1000, 1, ()),
        (100, 0, 0, ()),
    ]
    assert [s.frequency for s in shapes] == pytest.approx([50 / 95, 30 / 95, 15 / 95])
    # equal counts: the larger shape first, as the artifact sorts
    tied = typical_shapes([Pod("x", 1000, 1, 1, 500), Pod("y", 2000, 1, 1, 500)], 100)
    assert [s.cpu_milli for s in tied] == [2000, 1000]


def test_fgd_score_is_the_sigmoid_of_the_change_in_gpus():
    before = np.array([1000.0, 1000.0, 1000.0])
    after = np.array([1000.0, 0.0, 3000.0])
    # ⌊100·σ(0)⌋, ⌊100·σ(1)⌋, ⌊100·σ(−2)⌋
    assert fgd_score(before, after).tolist() == [50, 73, 11]
