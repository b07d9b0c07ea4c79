"""The Prometheus adapter cut off by Ctrl-C: every query of a concurrent batch ends at once,
also one whose connection was not made yet when the interrupt came (under load its thread
may not have connected, or started, by then)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest

from gpuctl.adapters.prometheus import Prometheus
from tests import children

pytestmark = pytest.mark.integration


def test_ctrl_c_ends_queries_whose_connection_is_still_being_made():
    # A server whose accept queue is full: the kernel drops further SYNs, so each query's
    # connect waits (as towards a host that does not answer) until its deadline
    with socket.create_server(("127.0.0.1", 0), backlog=0) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):  # the queue's one place
            prometheus = Prometheus(f"http://127.0.0.1:{port}", timeout=60)
            ctrl_c = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
            started = time.monotonic()
            with children.sigint_raises(), pytest.raises(KeyboardInterrupt):
                ctrl_c.start()
                prometheus.query_all(["up", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"])
            took = time.monotonic() - started
            ctrl_c.join()
    assert took < 10  # not the 60 s a connect may take


def test_after_an_interrupted_batch_the_next_one_queries_again(prometheus_with):
    prometheus = Prometheus(prometheus_with([]).url, timeout=10)
    landed = threading.Event()

    def interrupted(samples):  # in a query's thread: the main thread gets the SIGINT
        os.kill(os.getpid(), signal.SIGINT)
        assert landed.wait(60), "the SIGINT never reached the main thread"

    with children.sigint_raises(landed), pytest.raises(KeyboardInterrupt):
        prometheus.query_all(["vector(1)"], [interrupted])
    assert prometheus.query_all(["vector(1)", "vector(2)"]) == [[({}, 1.0)], [({}, 2.0)]]
