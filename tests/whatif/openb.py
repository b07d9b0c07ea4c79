"""Where the openb trace is: GPUCTL_OPENB_DIR, else shared/data/openb beside the checkout or
beside any folder above it (../shared from the main checkout, ../../shared from a worktree
under wt/). It is not in the repository: Alibaba publishes it for research and study
(alibaba/clusterdata, cluster-trace-gpu-v2023/csv; SOURCE.md beside it)."""

import os
from pathlib import Path

import pytest

from gpuctl.whatif.core.trace import Node, Pod, parse_nodes, parse_pods
from tests import ROOT

NODES = "openb_node_list_gpu_node.csv"
PODS = "openb_pod_list_default.csv"


def openb_dir() -> str | None:
    above = Path(ROOT).resolve().parents
    candidates = [os.environ.get("GPUCTL_OPENB_DIR")] + [
        str(folder / "shared" / "data" / "openb") for folder in above
    ]
    for path in candidates:
        if path and os.path.isfile(os.path.join(path, PODS)):
            return os.path.abspath(path)
    return None


def load() -> tuple[list[Node], list[Pod]]:
    """The default trace, or the test is skipped: it is data that cannot be installed (not a
    stand-in), so a checkout without it skips these tests even where stand-ins are required."""
    path = openb_dir()
    if path is None:
        pytest.skip("the openb trace is not there (set GPUCTL_OPENB_DIR to its csv folder)")
    with open(os.path.join(path, NODES)) as f:
        nodes = parse_nodes(f.read(), NODES)
    with open(os.path.join(path, PODS)) as f:
        pods = parse_pods(f.read(), PODS)
    return nodes, pods
