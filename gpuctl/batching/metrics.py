"""Counters a batcher keeps, and the immutable snapshot it hands out for export."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuctl.common.batcher_metrics import TIME_BUCKETS


@dataclass(frozen=True)
class BatcherMetrics:
    """What a server would export (e.g. as Prometheus counters and gauges).

    Sums and counts are cumulative since the batcher started, so rates and means over any
    window can be derived from two snapshots; `mean_*` fields are over the whole lifetime.
    """

    batches: int  # calls made to fn
    requests: int  # requests sent to fn
    failed_batches: int  # batches where fn raised or returned the wrong number of results
    cancelled: int  # requests cancelled while queued: never sent to fn
    queue_depth: int  # requests waiting for dispatch right now
    max_queue: int
    in_flight: int  # requests inside the batch fn is running now
    mean_batch_size: float
    wait_seconds_sum: float  # queued -> dispatched (not time held by back-pressure), summed
    wait_seconds_max: float
    mean_wait_ms: float
    run_seconds_sum: float  # time spent inside fn, summed over batches
    mean_run_ms: float
    batch_sizes: dict[int, int] = field(default_factory=dict)  # batch size -> number of batches
    # per bucket of TIME_BUCKETS (and one past the last): how many waits, runs and request
    # latencies (queued -> result) fell in it, not cumulative
    wait_buckets: tuple[int, ...] = ()
    run_buckets: tuple[int, ...] = ()
    latency_buckets: tuple[int, ...] = ()
    latency_seconds_sum: float = 0.0
    latencies: int = 0  # requests answered (their result or their batch's error)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (batch_sizes keys become strings, as JSON requires)."""
        out = asdict(self)
        out["batch_sizes"] = {str(k): v for k, v in sorted(self.batch_sizes.items())}
        return out


class MetricsRecorder:
    """Mutable counters, updated by the batcher on its event loop only."""

    def __init__(self) -> None:
        self.batches = 0
        self.requests = 0
        self.failed_batches = 0
        self.cancelled = 0
        self.wait_sum = 0.0
        self.wait_max = 0.0
        self.run_sum = 0.0
        self.batch_sizes: dict[int, int] = {}
        self.wait_buckets = [0] * (len(TIME_BUCKETS) + 1)
        self.run_buckets = [0] * (len(TIME_BUCKETS) + 1)
        self.latency_buckets = [0] * (len(TIME_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.latencies = 0

    def dispatched(self, waits: list[float]) -> None:
        self.batches += 1
        self.requests += len(waits)
        self.batch_sizes[len(waits)] = self.batch_sizes.get(len(waits), 0) + 1
        self.wait_sum += sum(waits)
        self.wait_max = max(self.wait_max, *waits)
        for wait in waits:
            self.wait_buckets[_bucket(wait)] += 1

    def finished(self, run_seconds: float, ok: bool, latencies: Sequence[float] = ()) -> None:
        self.run_sum += run_seconds
        self.run_buckets[_bucket(run_seconds)] += 1
        if not ok:
            self.failed_batches += 1
        for latency in latencies:
            self.latency_buckets[_bucket(latency)] += 1
        self.latency_sum += sum(latencies)
        self.latencies += len(latencies)

    def snapshot(self, *, queue_depth: int, max_queue: int, in_flight: int) -> BatcherMetrics:
        # One batch runs at a time: requests in flight means exactly one unfinished batch.
        finished = self.batches - (1 if in_flight else 0)
        return BatcherMetrics(
            batches=self.batches,
            requests=self.requests,
            failed_batches=self.failed_batches,
            cancelled=self.cancelled,
            queue_depth=queue_depth,
            max_queue=max_queue,
            in_flight=in_flight,
            mean_batch_size=self.requests / self.batches if self.batches else 0.0,
            wait_seconds_sum=self.wait_sum,
            wait_seconds_max=self.wait_max,
            mean_wait_ms=1000 * self.wait_sum / self.requests if self.requests else 0.0,
            run_seconds_sum=self.run_sum,
            mean_run_ms=1000 * self.run_sum / finished if finished else 0.0,
            batch_sizes=dict(self.batch_sizes),
            wait_buckets=tuple(self.wait_buckets),
            run_buckets=tuple(self.run_buckets),
            latency_buckets=tuple(self.latency_buckets),
            latency_seconds_sum=self.latency_sum,
            latencies=self.latencies,
        )


def _bucket(seconds: float) -> int:
    """The index of the first bucket whose upper bound (le) holds SECONDS."""
    return bisect.bisect_left(TIME_BUCKETS, seconds)
