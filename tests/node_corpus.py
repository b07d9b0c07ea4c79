"""Real accelerator node objects (tests/data/nodes/*.yaml), each from the public source its
header cites: NVIDIA's GFD whole GPUs (old and new product names), MIG single, mixed and
invalid, time-slicing with and without renaming, Karpenter, a plain instance type, GKE (whole
and partitioned), AKS and gpuctl's own label; AMD (the node labeller's labels with and without
a product name, a VF, mixed partitions, a plugin advertising nothing), AWS Neuron (inf1, an
inf2 known by its instance type, a Karpenter trn2), a GKE TPU v5e host and Intel Gaudi (old and
current feature discovery)."""

from __future__ import annotations

import glob
import os

import yaml

from tests import ROOT

DIR = os.path.join(ROOT, "tests", "data", "nodes")


def corpus() -> dict[str, dict]:
    """File stem → node object."""
    out = {}
    for path in sorted(glob.glob(os.path.join(DIR, "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            out[os.path.basename(path)[: -len(".yaml")]] = yaml.safe_load(f)
    return out


def by_node_name() -> dict[str, str]:
    """Node name → file stem."""
    return {n["metadata"]["name"]: stem for stem, n in corpus().items()}
