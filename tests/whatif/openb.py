"""Where the openb trace is: GPUCTL_OPENB_DIR, else shared/data/openb beside the checkout
(../shared from the main checkout, ../../shared from a worktree under wt/). It is not in the
repository: Alibaba publishes it for research and study (alibaba/clusterdata,
cluster-trace-gpu-v2023/csv; SOURCE.md beside it)."""

import os

from gpuctl.whatif.trace import Node, Pod, parse_nodes, parse_pods
from tests import ROOT

NODES = "openb_node_list_gpu_node.csv"
PODS = "openb_pod_list_default.csv"


def openb_dir() -> str | None:
    candidates = [os.environ.get("GPUCTL_OPENB_DIR")] + [
        os.path.join(ROOT, up, "shared", "data", "openb") for up in ("..", os.path.join("..", ".."))
    ]
    for path in candidates:
        if path and os.path.isfile(os.path.join(path, PODS)):
            return os.path.abspath(path)
    return None


def load() -> tuple[list[Node], list[Pod]]:
    """The default trace, or the test is skipped (failed where stand-ins are required)."""
    from tests.standins import missing

    path = openb_dir()
    if path is None:
        missing("the openb trace is not there (set GPUCTL_OPENB_DIR to its csv folder)")
    with open(os.path.join(path, NODES)) as f:
        nodes = parse_nodes(f.read(), NODES)
    with open(os.path.join(path, PODS)) as f:
        pods = parse_pods(f.read(), PODS)
    return nodes, pods
