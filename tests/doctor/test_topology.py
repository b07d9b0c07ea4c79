"""`gpuctl doctor`'s topology check: the nodes of a multi-node accelerator pool should carry
network topology labels, on node sets from tests/data/topology (EKS p4de with EC2's
network-node layers, GFD's NVLink clique on GB200; each file cites its sources)."""

from __future__ import annotations

import copy
import json

from gpuctl.doctor.core.topology_checks import check_topology
from tests.gpu_cluster import node, seed
from tests.topology_corpus import layout

LAYERS = tuple(f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3))


def _without_topology(nodes):
    out = copy.deepcopy(nodes)
    for n in out:
        for key in LAYERS:
            n["metadata"]["labels"].pop(key, None)
    return out


def test_a_labelled_multi_node_pool_passes_naming_its_levels():
    c = check_topology(layout("eks-p4de"))
    assert c.status == "pass", c
    assert c.detail.startswith("multi-node pools with network topology labels: p4de.24xlarge (")
    assert all(key in c.detail for key in LAYERS)
    c = check_topology(layout("gfd-gb200-clique"))
    assert c.status == "pass" and "nvidia.com/gpu.clique" in c.detail, c


def test_a_pool_whose_nodes_lack_topology_labels_warns_naming_them():
    nodes = layout("eks-p4de")
    nodes[2:] = _without_topology(nodes[2:])  # one node lost its labels
    c = check_topology(nodes)
    assert c.status == "warn", c
    assert f"p4de.24xlarge: 1 of 3 ({nodes[2]['metadata']['name']})" in c.detail
    assert "topology.k8s.aws/network-node-layer-N" in c.fix
    # a zone is not a network position: zone-only nodes still warn
    c = check_topology(_without_topology(layout("eks-p4de")))
    assert c.status == "warn" and "3 of 3" in c.detail, c


def test_single_node_pools_and_cpu_nodes_need_no_topology():
    cpu = node("cpu-1", gpus=0, gfd=False)
    c = check_topology([node("gpu-1"), cpu, cpu])
    assert c.status == "pass" and "no multi-node accelerator pool" in c.detail, c


def test_doctor_reports_the_check(cli, kube_api):
    seed(kube_api, *_without_topology(layout("eks-p4de")))
    r = cli("doctor", "-o", "json")
    (check,) = [c for c in json.loads(r.out)["checks"] if c["name"] == "topology"]
    assert check["status"] == "warn" and "p4de.24xlarge: 3 of 3" in check["detail"], check
