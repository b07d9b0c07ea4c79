"""The Prometheus of the reclaim tests: a week of DCGM-exporter series, backfilled with
promtool, started once per module (its samples are relative to the time it starts)."""

import time

import pytest

from tests.reclaim.test_reclaim_cluster import series
from tests.standins.prometheus import load_blocks, start_prometheus


@pytest.fixture(scope="module")
def prom():
    server = start_prometheus(load_blocks(series(), time.time()))
    yield server
    server.stop()
