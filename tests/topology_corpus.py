"""Topology-labelled node sets (tests/data/topology/*.yaml), each from the public sources its
header cites: EKS p4de nodes with EC2's network-node layers (a block of 2 in a spine of 3),
GKE A3 Ultra nodes with GCE's block/sub-block/host, GB200 trays with GFD's NVLink clique."""

from __future__ import annotations

import os

import yaml

from tests import ROOT

DIR = os.path.join(ROOT, "tests", "data", "topology")


def layout(name: str) -> list[dict]:
    """The Node objects of tests/data/topology/NAME.yaml."""
    with open(os.path.join(DIR, f"{name}.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def labels(name: str) -> dict[str, dict[str, str]]:
    """Node name → labels of layout NAME."""
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in layout(name)}
