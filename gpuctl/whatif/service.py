"""What `gpuctl whatif` reads: trace files, or a cluster's nodes and pods through the
Kubernetes adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuctl.common.errors import SpecError
from gpuctl.whatif.snapshot import nodes_from_api, pods_from_api
from gpuctl.whatif.trace import Node, Pod, parse_nodes, parse_pods

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube

MAX_BYTES = 256 << 20


def read_trace(nodes_path: str, pods_path: str) -> tuple[list[Node], list[Pod]]:
    return (
        parse_nodes(_read_text(nodes_path), nodes_path),
        parse_pods(_read_text(pods_path), pods_path),
    )


def snapshot(kube: Kube, label_key: str) -> tuple[list[Node], list[Pod]]:
    """The cluster's nodes and its pods not yet finished, in all namespaces."""
    nodes = nodes_from_api(kube.list_objects("Node"), label_key)
    pods = pods_from_api(kube.unfinished_pods(), label_key)
    return nodes, pods


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise SpecError(f"cannot read file: {e.strerror}", file=path) from None
    if len(raw) > MAX_BYTES:
        raise SpecError(f"file is larger than {MAX_BYTES >> 20} MiB", file=path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise SpecError("not UTF-8 text", file=path, line=line) from None
