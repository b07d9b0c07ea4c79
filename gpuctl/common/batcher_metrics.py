"""The Prometheus metrics gpuctl's request batcher exports (gpuctl.batching.prometheus) and
a service's autoscaler reads (gpuctl.jobs.core.autoscale): one list of names, so the two
cannot drift apart. Pure.

Names follow Prometheus' conventions: base units (seconds), `_total` for counters, a
histogram's `_bucket`/`_sum`/`_count` series under its family name."""

from __future__ import annotations

PREFIX = "gpuctl_batcher_"
QUEUE_DEPTH = PREFIX + "queue_depth"  # gauge: requests waiting for a batch now
IN_FLIGHT = PREFIX + "in_flight"  # gauge: requests inside the batch being run now
REQUESTS = PREFIX + "requests_total"  # counter: requests sent to the batch function
BATCHES = PREFIX + "batches_total"  # counter: calls of the batch function
FAILED_BATCHES = PREFIX + "failed_batches_total"  # counter: calls that raised
CANCELLED = PREFIX + "cancelled_total"  # counter: requests cancelled while queued
BATCH_SIZE = PREFIX + "batch_size"  # histogram: requests per batch
WAIT = PREFIX + "wait_seconds"  # histogram, per request: queued -> its batch dispatched
RUN = PREFIX + "run_seconds"  # histogram, per batch: time inside the batch function
LATENCY = PREFIX + "latency_seconds"  # histogram, per request: queued -> its result

# Bucket bounds (seconds) of the time histograms: from a fraction of a millisecond (a
# batcher's added wait) to the 10 s that an overloaded GPU model can reach.
TIME_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
