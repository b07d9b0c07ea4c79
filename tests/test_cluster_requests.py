"""Each cluster command asks the API server for each thing once (issue 24: commands at the
client's floor): counted on the emulator, through the real client."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.gpu_cluster import daemonset, node, pod, seed

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(kube, kube_api, tmp_path):
    objects = [node(f"gpu-{i}") for i in range(3)]
    objects += [daemonset("nvidia-device-plugin-daemonset", "gpu-operator")]
    objects += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}]
    objects += [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpuctl-gpus", "namespace": "team-a"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
        },
        pod("w-0", "team-a", 1, node_name="gpu-0"),
    ]
    seed(kube_api, *objects)
    (tmp_path / "job.yaml").write_text(
        "apiVersion: gpuctl/v1\nkind: Job\nname: train\nimage: pytorch:24.05\ngpus: 1\n"
        "namespace: team-a\n"
    )
    return kube


@pytest.mark.parametrize(
    "args",
    [
        ["jobs", "list", "-A"],
        ["quota", "list"],
        ["doctor"],
        ["submit", "job.yaml", "--dry-run"],
    ],
)
def test_a_command_reads_each_kind_once(cli, cluster, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    before = len(cluster.requests())
    r = cli(*args)
    assert r.code in (0, 1), r  # doctor: 1 when a check fails
    # each kind read once, in one scope: a namespace's pods are among the cluster's
    read = Counter(
        path.rstrip("/").rsplit("/", 1)[-1] for _, path, _ in cluster.requests()[before:]
    )
    assert read and max(read.values()) == 1, read
