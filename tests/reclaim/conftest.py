"""The Prometheus of the reclaim tests: a week of DCGM-exporter series, backfilled with
promtool, started once per module (its samples are relative to the time it starts, and go
on past it: tests/reclaim/test_reclaim_cluster.py LIVE); the cluster they describe, seeded,
with the policy file that covers it."""

import time

import pytest

from tests.reclaim.test_reclaim_cluster import POLICY, seed, series
from tests.standins.prometheus import load_blocks, start_prometheus


@pytest.fixture(scope="module")
def prom():
    server = start_prometheus(load_blocks(series(), time.time()))
    yield server
    server.stop()


@pytest.fixture
def policy(kube, kube_api, tmp_path):
    seed(kube, kube_api)
    f = tmp_path / "policy.yaml"
    f.write_text(POLICY)
    return str(f)
