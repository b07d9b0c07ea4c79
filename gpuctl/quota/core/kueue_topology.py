"""The Kueue Topology a team's quota is given on, so that Kueue's Topology Aware Scheduling
can keep a gang within one block or spine: its levels are the topology labels the flavor's
nodes carry, widest first, `kubernetes.io/hostname` last (gpuctl.gpus.topology.levels), and
each ResourceFlavor names it in `topologyName`. Pure.

Kueue's rules that shape this (kubernetes-sigs/kueue v0.19.2, the CRDs'
x-kubernetes-validations): a Topology's levels never change, so a Topology is named after
its levels (other levels, another Topology); a flavor with a topologyName needs nodeLabels,
and once it has one its topologyName, nodeLabels and tolerations never change. A
ClusterQueue that mixes flavors with and without a topology admits a pod set that asks for
none only onto those without (tas_flavorassigner.go: "supports only
TopologyAwareScheduling"), so when any flavor gets a topology every flavor with nodes does:
one whose nodes carry no network label gets the levels they have (at least the hostname).
Which apiVersion serves Topology: gpuctl.k8s.apis.kueue_topology_api_version."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from gpuctl.gpus import topology
from gpuctl.k8s.labels import MANAGED
from gpuctl.k8s.objects import labels_of, name_of


def levels_of(nodes: Iterable[dict[str, Any]]) -> list[str]:
    """The topology labels NODES carry, widest first, the hostname last."""
    return topology.levels(labels_of(n) for n in nodes)


def network_levels(levels: Iterable[str]) -> list[str]:
    """LEVELS less the zone and the hostname: the switches' layers, cliques and blocks."""
    return [k for k in levels if k in topology.NETWORK]


def name_for(levels: list[str]) -> str:
    """gpuctl's name for a Topology of LEVELS: it changes when the levels do."""
    return "gpuctl-" + hashlib.sha256("\n".join(levels).encode()).hexdigest()[:10]


def topology_object(levels: list[str], api_version: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "Topology",
        "metadata": {"name": name_for(levels), "labels": dict(MANAGED)},
        "spec": {"levels": [{"nodeLabel": k} for k in levels]},
    }


def same_levels(existing: list[dict[str, Any]], levels: list[str]) -> dict[str, Any] | None:
    """The Topology of EXISTING with exactly LEVELS (gpuctl's own first, then by name)."""
    mine = name_for(levels)
    for t in sorted(existing, key=lambda t: (name_of(t) != mine, name_of(t))):
        if topology.kueue_levels(t) == levels:
            return t
    return None


def flat(obj: dict[str, Any]) -> dict[str, str]:
    """A Topology's levels, for a plan a person reads."""
    return {"levels": ", ".join(topology.kueue_levels(obj))}
