"""Direct tests for each rule of gpuctl.batching.DynamicBatcher (property tests are beside)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import gc
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import weakref

import pytest

from gpuctl.batching import BatcherClosed, BatchResultError, DynamicBatcher
from tests import ROOT

# Timings are checked with slack for a loaded 2-core machine; the rules under test are off by
# far more than this when broken (a partial batch that waits for company waits forever).
TOL = 0.15

pytestmark = pytest.mark.asyncio


class Recorder:
    """A batch function (sync or async) that records each batch and can be held at a gate."""

    def __init__(self, fail_on=None, gate: asyncio.Event | None = None):
        self.batches: list[list] = []
        self.starts: list[float] = []
        self.fail_on = fail_on
        self.gate = gate

    def _results(self, items):
        self.batches.append(list(items))
        self.starts.append(time.monotonic())
        if self.fail_on is not None and self.fail_on in items:
            raise ValueError(f"model rejected {self.fail_on!r}")
        return [f"out-{x}" for x in items]

    def sync(self, items):
        return self._results(items)

    async def async_(self, items):
        results = self._results(items)
        if self.gate is not None:  # bounded, so a broken batcher fails the test, not hangs it
            await within(self.gate.wait(), 5)
        return results


def within(aw, seconds=5):
    return asyncio.wait_for(aw, seconds)


async def settle():
    """Let every ready task run (submits enqueue, cancellations land)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def queued_now():
    """One loop turn: tasks created just before have run (their submits are queued), and no
    timer has fired since, so what the caller does next lands before any deadline, however
    late a loaded machine runs the loop."""
    await asyncio.sleep(0)


async def test_lone_request_waits_max_wait_then_goes_alone():
    rec = Recorder()
    async with DynamicBatcher(rec.async_, max_batch_size=8, max_wait_ms=60) as b:
        t0 = time.monotonic()
        assert await within(b.submit(1)) == "out-1"
        elapsed = time.monotonic() - t0
    assert rec.batches == [[1]]
    assert 0.059 <= elapsed < 0.06 + TOL


async def test_full_batch_is_dispatched_without_waiting():
    rec = Recorder()
    async with DynamicBatcher(rec.sync, max_batch_size=4, max_wait_ms=60_000) as b:
        results = await within(asyncio.gather(*(b.submit(i) for i in range(4))), 5)
        assert results == [f"out-{i}" for i in range(4)]
        assert rec.batches == [[0, 1, 2, 3]]


async def test_deadline_runs_from_the_first_item_of_the_batch():
    # Requests every 30 ms with max_wait 100 ms: a batcher that restarts its timer on each
    # arrival (or waits for a full batch) would send one late batch instead of several.
    rec = Recorder()
    arrivals = {}

    async def one(b, i):
        arrivals[i] = time.monotonic()
        return await b.submit(i)

    async with DynamicBatcher(rec.async_, max_batch_size=100, max_wait_ms=100) as b:
        tasks = []
        for i in range(12):
            tasks.append(asyncio.create_task(one(b, i)))
            await asyncio.sleep(0.03)
        await within(asyncio.gather(*tasks))
    assert len(rec.batches) >= 3
    assert [x for batch in rec.batches for x in batch] == list(range(12))
    for batch, start in zip(rec.batches, rec.starts):
        waited = start - arrivals[batch[0]]
        assert 0.099 <= waited < 0.1 + TOL, (batch, waited)


async def test_max_wait_zero_sends_what_is_there_at_once():
    rec = Recorder()
    async with DynamicBatcher(rec.sync, max_batch_size=8, max_wait_ms=0) as b:
        t0 = time.monotonic()
        assert await within(b.submit("a")) == "out-a"
        assert time.monotonic() - t0 < TOL


async def test_every_request_gets_its_own_result_across_batches():
    async def fn(items):
        await asyncio.sleep(0.001)
        return [(x, x * x) for x in items]

    async with DynamicBatcher(fn, max_batch_size=5, max_wait_ms=2) as b:
        values = [7, 3, 3, 11, 0, 5, 2, 9, 1, 4, 8, 6, 10]  # a duplicate value too
        results = await within(asyncio.gather(*(b.submit(v) for v in values)))
        assert results == [(v, v * v) for v in values]
        assert b.metrics().batches == 3


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_fn_error_fails_its_whole_batch_and_batcher_keeps_serving(kind):
    rec = Recorder(fail_on="bad")
    fn = rec.sync if kind == "sync" else rec.async_
    async with DynamicBatcher(fn, max_batch_size=3, max_wait_ms=50) as b:
        outcomes = await within(
            asyncio.gather(b.submit("a"), b.submit("bad"), b.submit("c"), return_exceptions=True)
        )
        assert all(isinstance(o, ValueError) for o in outcomes), outcomes
        assert {str(o) for o in outcomes} == {"model rejected 'bad'"}
        assert await within(b.submit("d")) == "out-d"
        m = b.metrics()
    assert rec.batches == [["a", "bad", "c"], ["d"]]
    assert (m.batches, m.failed_batches) == (2, 1)


@pytest.mark.parametrize(
    "returned, message",
    [
        (lambda items: items[:-1], "returned 2 results for a batch of 3 items"),
        (lambda items: items + items, "returned 6 results for a batch of 3 items"),
        (lambda items: None, "returned a NoneType, not a sequence of 3 results"),
        (lambda items: {x: x for x in items}, "returned a dict, not a sequence of 3 results"),
        (lambda items: set(items), "returned a set, not a sequence of 3 results"),  # no order
        (lambda items: iter(items[:-1]), "returned 2 results for a batch of 3 items"),
        (lambda items: (x for x in items * 2), "returned more than 3 results for a batch of 3"),
        (lambda items: itertools.cycle(items), "returned more than 3 results for a batch of 3"),
    ],
)
async def test_wrong_number_of_results_fails_the_batch_clearly(returned, message):
    calls = []

    def fn(items):
        calls.append(items)
        return returned(items) if len(calls) == 1 else [x.upper() for x in items]

    async with DynamicBatcher(fn, max_batch_size=3, max_wait_ms=50) as b:
        outcomes = await within(
            asyncio.gather(*(b.submit(x) for x in "xyz"), return_exceptions=True)
        )
        assert all(isinstance(o, BatchResultError) for o in outcomes), outcomes
        assert message in str(outcomes[0])
        assert outcomes[0].expected == 3
        assert await within(b.submit("q")) == "Q"


async def test_sync_fn_raising_stopiteration_fails_its_batch_instead_of_hanging_it():
    def fn(items):
        return [next(iter([])) for _ in items]  # a model bug that raises StopIteration

    async with DynamicBatcher(fn, max_batch_size=2, max_wait_ms=1) as b:
        with pytest.raises(RuntimeError, match="raised StopIteration"):
            await within(b.submit(1))


# Task.cancelling() (3.11+) is what tells fn's own CancelledError from a cancelled batcher.
needs_cancelling = pytest.mark.skipif(sys.version_info < (3, 11), reason="needs Python 3.11+")


@pytest.mark.parametrize(
    "kind, exc",
    [
        pytest.param("async", asyncio.CancelledError, marks=needs_cancelling),
        pytest.param("async", None, marks=needs_cancelling, id="async-awaits-a-cancelled-future"),
        ("sync", asyncio.CancelledError),
        pytest.param("sync", concurrent.futures.CancelledError, id="sync-futures.CancelledError"),
        ("sync", GeneratorExit),
        ("async", GeneratorExit),
    ],
)
async def test_fn_raising_a_base_exception_fails_its_batch_only(kind, exc):
    # Such an exception from fn is fn's failure: it must not stop the batcher, nor reach the
    # callers (or the one leaving `async with`) as a cancellation of their own task.
    calls = []

    def sync_fn(items):
        calls.append(items)
        if len(calls) == 1:
            raise exc()
        return [x * 10 for x in items]

    async def async_fn(items):
        if exc is None and not calls:  # e.g. an HTTP call the model makes was cancelled
            calls.append(items)
            inner = asyncio.get_running_loop().create_future()
            inner.cancel()
            await inner
        return sync_fn(items)

    async with DynamicBatcher(
        sync_fn if kind == "sync" else async_fn, max_batch_size=2, max_wait_ms=1
    ) as b:
        outcomes = await within(asyncio.gather(b.submit(1), b.submit(2), return_exceptions=True))
        assert all(
            isinstance(o, RuntimeError) and "batch function raised" in str(o) for o in outcomes
        ), outcomes
        assert await within(b.submit(3)) == 30
        m = b.metrics()
    assert (m.batches, m.failed_batches) == (2, 1)
    assert calls == [[1, 2], [3]]


@needs_cancelling
async def test_a_cancelled_close_does_not_cancel_another_closer():
    gate = asyncio.Event()  # never set: the model hangs until the batcher is cancelled
    b = DynamicBatcher(Recorder(gate=gate).async_, max_batch_size=1, max_wait_ms=0)
    await b.__aenter__()
    tasks = [asyncio.create_task(b.submit(i)) for i in range(2)]
    await settle()
    first, second = asyncio.create_task(b.close()), asyncio.create_task(b.close())
    await settle()
    first.cancel()
    await within(second)  # returns: its own task was not cancelled
    assert first.cancelled()
    outcomes = await within(asyncio.gather(*tasks, return_exceptions=True))
    assert all(isinstance(o, BatcherClosed) for o in outcomes), outcomes


async def test_results_may_be_a_lazy_iterable_unpacked_off_the_loop():
    threads = set()

    def lazy(items):
        for x in items:
            threads.add(threading.current_thread())
            yield x + 1

    async with DynamicBatcher(lazy, max_batch_size=2, max_wait_ms=1) as b:
        assert await within(asyncio.gather(b.submit(1), b.submit(2))) == [2, 3]
    assert threads and threading.main_thread() not in threads


async def test_sync_fn_runs_in_a_worker_thread_and_the_loop_keeps_accepting():
    threads = []
    release = threading.Event()

    def blocking(items):  # a blocking model call, until the test lets it finish
        threads.append(threading.current_thread())
        release.wait(5)
        return items

    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async with DynamicBatcher(blocking, max_batch_size=1, max_wait_ms=0) as b:
        t = asyncio.create_task(ticker())
        first = asyncio.create_task(b.submit(1))
        await asyncio.sleep(0.3)
        second = asyncio.create_task(b.submit(2))  # accepted while the first batch runs
        await settle()
        assert b.metrics().queue_depth == 1 and b.metrics().in_flight == 1
        t.cancel()
        release.set()
        assert await within(first) == 1 and await within(second) == 2
    assert ticks >= 5  # the loop kept running while the model call blocked (0 if inline)
    assert threads and all(th is not threading.main_thread() for th in threads)


async def test_async_fn_is_awaited_on_the_loop():
    class Model:  # an object whose __call__ is async counts as an async fn too
        async def __call__(self, items):
            self.thread = threading.current_thread()
            await asyncio.sleep(0)
            return [x * 2 for x in items]

    model = Model()
    before = set(threading.enumerate())
    async with DynamicBatcher(model, max_batch_size=2, max_wait_ms=1) as b:
        assert await within(b.submit(21)) == 42
        assert set(threading.enumerate()) <= before  # no worker thread started for it
    assert model.thread is threading.main_thread()


async def test_sync_wrapper_returning_a_coroutine_is_awaited():
    async def real(items):
        return [x + 1 for x in items]

    async with DynamicBatcher(lambda items: real(items), max_batch_size=2, max_wait_ms=1) as b:
        assert await within(b.submit(1)) == 2


async def test_bounded_queue_holds_back_extra_submitters():
    gate = asyncio.Event()
    rec = Recorder(gate=gate)
    async with DynamicBatcher(rec.async_, max_batch_size=1, max_wait_ms=0, max_queue=2) as b:
        first = asyncio.create_task(b.submit(0))  # dispatched, then held at the gate
        await settle()
        queued = [asyncio.create_task(b.submit(i)) for i in (1, 2)]
        await settle()
        held = asyncio.create_task(b.submit(3))
        gone = asyncio.create_task(b.submit(4))
        await asyncio.sleep(0.05)
        m = b.metrics()
        assert (m.queue_depth, m.in_flight) == (2, 1)
        assert not held.done() and rec.batches == [[0]]
        gone.cancel()  # giving up while held back frees nothing and breaks nothing
        await settle()
        gate.set()
        results = await within(asyncio.gather(first, *queued, held), 5)
    assert results == ["out-0", "out-1", "out-2", "out-3"]
    assert rec.batches == [[0], [1], [2], [3]]
    assert gone.cancelled()


async def test_freed_slot_goes_to_the_submitter_held_longest_not_to_a_newcomer():
    gate = asyncio.Event()
    rec = Recorder(gate=gate)
    async with DynamicBatcher(rec.async_, max_batch_size=2, max_wait_ms=0, max_queue=2) as b:
        running = asyncio.create_task(b.submit("running"))  # dispatched, held at the gate
        await settle()
        queued = [asyncio.create_task(b.submit(x)) for x in ("q1", "q2")]  # fill the queue
        await settle()
        held = asyncio.create_task(b.submit("held"))  # waits for room
        await settle()
        for t in queued:  # frees both slots, and in the same loop turn a newcomer arrives
            t.cancel()
        late = asyncio.create_task(b.submit("late"))
        await settle()
        assert b.metrics().queue_depth == 2  # both in: the spare slot was passed on
        gate.set()
        await within(asyncio.gather(running, held, late))
    assert rec.batches == [["running"], ["held", "late"]]


async def test_submitter_cancelled_right_after_getting_a_slot_passes_it_on():
    gate = asyncio.Event()
    rec = Recorder(gate=gate)
    async with DynamicBatcher(rec.async_, max_batch_size=1, max_wait_ms=0, max_queue=1) as b:
        running = asyncio.create_task(b.submit("running"))  # dispatched, held at the gate
        await settle()
        queued = asyncio.create_task(b.submit("queued"))  # fills the queue
        await settle()
        w1, w2 = (asyncio.create_task(b.submit(x)) for x in ("w1", "w2"))  # wait for room
        await settle()
        queued.cancel()  # its slot goes to w1...
        asyncio.get_running_loop().call_soon(w1.cancel)  # ...cancelled before it runs
        await settle()
        assert w1.cancelled() and b.metrics().queue_depth == 1  # w2 has the slot
        gate.set()
        assert await within(asyncio.gather(running, w2)) == ["out-running", "out-w2"]
    assert rec.batches == [["running"], ["w2"]]


async def test_request_cancelled_while_queued_is_not_sent_and_batch_still_goes():
    rec = Recorder()
    async with DynamicBatcher(rec.async_, max_batch_size=10, max_wait_ms=80) as b:
        a, c, d = (asyncio.create_task(b.submit(x)) for x in "acd")
        await queued_now()
        c.cancel()
        assert await within(asyncio.gather(a, d), 5) == ["out-a", "out-d"]
        assert b.metrics().cancelled == 1
    assert rec.batches == [["a", "d"]]


async def test_request_cancelled_in_the_turn_its_full_batch_is_taken_is_not_sent():
    rec = Recorder()
    async with DynamicBatcher(rec.async_, max_batch_size=3, max_wait_ms=50) as b:
        a, c, d = (asyncio.create_task(b.submit(x)) for x in "acd")
        await queued_now()  # the batch is full: the dispatcher takes it in the next turn...
        c.cancel()  # ...before the cancellation's callbacks run
        assert await within(asyncio.gather(a, d)) == ["out-a", "out-d"]
    assert rec.batches == [["a", "d"]]


async def test_batch_whose_requests_all_cancelled_never_reaches_fn():
    rec = Recorder()
    async with DynamicBatcher(rec.sync, max_batch_size=4, max_wait_ms=20) as b:
        tasks = [asyncio.create_task(b.submit(i)) for i in range(3)]
        await queued_now()
        assert b.metrics().queue_depth == 3
        for t in tasks:
            t.cancel()
        await asyncio.sleep(0.06)  # past the deadline: a batch of cancelled requests would go
        assert rec.batches == []
        assert b.metrics().queue_depth == 0
        assert await within(b.submit(9)) == "out-9"
    assert rec.batches == [[9]]


async def test_cancel_while_batch_runs_leaves_the_others_their_results():
    gate = asyncio.Event()
    rec = Recorder(gate=gate)
    errors = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx))
    async with DynamicBatcher(rec.async_, max_batch_size=3, max_wait_ms=1) as b:
        tasks = [asyncio.create_task(b.submit(i)) for i in range(3)]
        await asyncio.sleep(0.02)
        assert rec.batches == [[0, 1, 2]]
        tasks[1].cancel()
        gate.set()
        assert await within(tasks[0]) == "out-0" and await within(tasks[2]) == "out-2"
        assert await within(b.submit(5)) == "out-5"
    assert tasks[1].cancelled()
    assert errors == []


async def test_leaving_async_with_flushes_queued_requests():
    rec = Recorder()
    b = DynamicBatcher(rec.sync, max_batch_size=2, max_wait_ms=60_000)
    async with b:
        tasks = [asyncio.create_task(b.submit(i)) for i in range(5)]
        await settle()
        other_closer = asyncio.create_task(b.close())  # closing twice at once is fine
        t0 = time.monotonic()
    assert time.monotonic() - t0 < TOL + 0.5  # not the 60 s max_wait
    await within(other_closer)
    await within(b.close())  # and once more, after the fact
    assert [t.result() for t in tasks] == [f"out-{i}" for i in range(5)]
    assert rec.batches == [[0, 1], [2, 3], [4]]


async def test_submit_after_close_or_before_start_raises_clear_error():
    b = DynamicBatcher(lambda items: items)
    with pytest.raises(BatcherClosed, match="async with"):
        await within(b.submit(1))
    async with b:
        assert await within(b.submit(1)) == 1
    with pytest.raises(BatcherClosed, match="closed"):
        await within(b.submit(2))
    with pytest.raises(BatcherClosed, match="runs once"):
        async with b:
            pass


async def test_close_turns_away_submitters_held_by_back_pressure():
    gate = asyncio.Event()
    rec = Recorder(gate=gate)
    b = DynamicBatcher(rec.async_, max_batch_size=1, max_wait_ms=0, max_queue=1)
    await b.__aenter__()
    running = asyncio.create_task(b.submit(0))
    await settle()
    queued = asyncio.create_task(b.submit(1))
    await settle()
    held = asyncio.create_task(b.submit(2))
    await settle()
    closing = asyncio.create_task(b.close())
    await settle()
    with pytest.raises(BatcherClosed):
        await within(held, 5)
    gate.set()
    await within(closing, 5)
    assert (running.result(), queued.result()) == ("out-0", "out-1")


async def test_cancelled_close_fails_what_is_left_instead_of_hanging():
    gate = asyncio.Event()  # never set: the model hangs
    rec = Recorder(gate=gate)
    b = DynamicBatcher(rec.async_, max_batch_size=1, max_wait_ms=0)
    await b.__aenter__()
    tasks = [asyncio.create_task(b.submit(i)) for i in range(3)]
    await settle()
    closing = asyncio.create_task(b.close())
    await asyncio.sleep(0.02)
    closing.cancel()
    outcomes = await within(asyncio.gather(*tasks, return_exceptions=True), 5)
    assert all(isinstance(o, BatcherClosed) for o in outcomes), outcomes
    assert rec.batches == [[0]]  # the queued ones were never sent


async def test_metrics_snapshot_for_export():
    gate = asyncio.Event()
    rec = Recorder(gate=gate)
    async with DynamicBatcher(rec.async_, max_batch_size=3, max_wait_ms=20, max_queue=10) as b:
        full = [asyncio.create_task(b.submit(i)) for i in range(3)]
        await settle()
        waiting = [asyncio.create_task(b.submit(i)) for i in (3, 4)]
        await settle()
        live = b.metrics()
        assert (live.queue_depth, live.in_flight, live.max_queue) == (2, 3, 10)
        waiting[1].cancel()
        gate.set()
        await within(asyncio.gather(*full, waiting[0]))
        m = b.metrics()
    assert (m.batches, m.requests, m.cancelled, m.failed_batches) == (2, 4, 1, 0)
    assert (m.queue_depth, m.in_flight, m.mean_batch_size) == (0, 0, 2.0)
    assert m.batch_sizes == {3: 1, 1: 1}
    assert m.wait_seconds_max >= 0.019  # the lone request waited out max_wait
    assert m.mean_wait_ms == pytest.approx(1000 * m.wait_seconds_sum / 4)
    assert m.run_seconds_sum > 0 and m.mean_run_ms > 0
    exported = json.loads(json.dumps(m.as_dict()))
    assert exported["batch_sizes"] == {"1": 1, "3": 1} and exported["batches"] == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.batches = 0


async def test_metrics_numbers_match_a_hand_computed_account():
    # The test times each submit and each fn call itself and works out every metric from
    # those: an async fn starts in the loop turn that dispatches it, so both clocks agree to
    # well under a millisecond per request (slack: 2 ms).
    submitted, calls = {}, []  # item -> submit time; (start, end, items) per fn call
    release = {"z": asyncio.Event(), "a": asyncio.Event()}  # batches held until looked at

    async def fn(items):
        start = time.monotonic()
        if items[0] in release:
            await within(release[items[0]].wait())
        await asyncio.sleep(0.01)
        calls.append((start, time.monotonic(), list(items)))
        if "bad" in items:
            raise ValueError("bad input")
        return items

    async def submit(b, x):
        submitted[x] = time.monotonic()
        return await b.submit(x)

    async def until(cond):
        while not cond():
            await asyncio.sleep(0.002)

    async with DynamicBatcher(fn, max_batch_size=3, max_wait_ms=30) as b:
        z = asyncio.create_task(submit(b, "z"))  # alone: goes after max_wait, then held
        await within(until(lambda: b.metrics().in_flight == 1))
        abc = []
        for x in "abc":  # queue behind it 20 ms apart, so each waits differently
            abc.append(asyncio.create_task(submit(b, x)))
            await asyncio.sleep(0.02)
        live = b.metrics()
        assert (live.batches, live.requests, live.in_flight, live.queue_depth) == (1, 1, 1, 3)
        assert live.mean_run_ms == 0.0  # no batch has finished yet
        release["z"].set()
        await within(until(lambda: b.metrics().batches == 2))  # [a, b, c] runs, held
        live = b.metrics()
        z_run = calls[0][1] - calls[0][0]
        assert (live.in_flight, live.queue_depth) == (3, 0)
        assert live.mean_run_ms == pytest.approx(1000 * z_run, abs=2)  # the finished one only
        release["a"].set()
        await within(asyncio.gather(z, *abc))
        with pytest.raises(ValueError):
            await within(submit(b, "bad"))  # alone again: waits max_wait, then fails
        m = b.metrics()

    assert [items for _s, _e, items in calls] == [["z"], ["a", "b", "c"], ["bad"]]
    waits = [start - submitted[x] for start, _end, items in calls for x in items]
    runs = [end - start for start, end, _items in calls]
    assert (m.batches, m.requests, m.failed_batches, m.cancelled) == (3, 5, 1, 0)
    assert (m.queue_depth, m.in_flight, m.max_queue) == (0, 0, 1024)
    assert m.batch_sizes == {1: 2, 3: 1} and m.mean_batch_size == pytest.approx(5 / 3)
    assert m.wait_seconds_sum == pytest.approx(sum(waits), abs=0.002 * 5)
    assert m.wait_seconds_max == pytest.approx(max(waits), abs=0.002)
    assert m.mean_wait_ms == pytest.approx(1000 * sum(waits) / 5, abs=2)
    assert m.run_seconds_sum == pytest.approx(sum(runs), abs=0.002 * 3)
    assert m.mean_run_ms == pytest.approx(1000 * sum(runs) / 3, abs=2)


async def test_batcher_keeps_no_item_or_result_once_answered():
    class Obj:  # weakly referenceable, unlike ints and strings
        def __init__(self, n):
            self.n = n

    def fn(items):
        if any(it.n == 5 for it in items):
            raise ValueError("model rejected 5")  # its batch fails: that path too
        return [Obj(-it.n) for it in items]

    refs = []

    async def one(b, n):
        item = Obj(n)
        refs.append(weakref.ref(item))
        try:
            refs.append(weakref.ref(await b.submit(item)))
        except ValueError:
            pass

    async with DynamicBatcher(fn, max_batch_size=4, max_wait_ms=1, max_queue=4) as b:
        await within(asyncio.gather(*(one(b, n) for n in range(20))))
        gc.collect()
        assert len(refs) == 20 + 16 and [r() for r in refs if r() is not None] == []


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"max_batch_size": 0}, "max_batch_size must be an integer >= 1"),
        ({"max_batch_size": 2.5}, "max_batch_size must be an integer >= 1"),
        ({"max_wait_ms": -1}, "max_wait_ms must be a finite number >= 0"),
        ({"max_wait_ms": float("inf")}, "max_wait_ms must be a finite number >= 0"),
        ({"max_wait_ms": float("nan")}, "max_wait_ms must be a finite number >= 0"),
        ({"max_wait_ms": "5"}, "max_wait_ms must be a finite number >= 0"),
        ({"max_batch_size": True}, "max_batch_size must be an integer >= 1"),
        ({"max_queue": 0}, "max_queue must be an integer >= 1"),
        ({"max_batch_size": 8, "max_queue": 4}, r"max_queue \(4\) must be >= max_batch_size \(8\)"),
    ],
)
async def test_bad_settings_are_refused(kwargs, error):
    with pytest.raises(ValueError, match=error):
        DynamicBatcher(lambda items: items, **kwargs)


async def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        DynamicBatcher("model.pt")


PROBE = """
import sys, runpy
if sys.argv[1] == "import":
    import gpuctl.batching, gpuctl.batching.tensors
else:
    sys.argv = ["gpuctl"] + sys.argv[1:]
    try:
        runpy.run_module("gpuctl", run_name="__main__")
    except SystemExit:
        pass
print("LOADED:" + ",".join(sorted(m for m in sys.modules if m.split(".")[0] in
      ("torch", "numpy", "typer", "rich", "click") or m.startswith("gpuctl.batching"))))
"""


@pytest.mark.integration
@pytest.mark.parametrize("how", ["import", "--help"])
async def test_library_stays_light_and_help_does_not_load_it(how):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, how],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=60,
    )
    loaded = [ln for ln in proc.stdout.splitlines() if ln.startswith("LOADED:")][-1][7:].split(",")
    if how == "import":  # no CLI framework, no numpy/torch until a tensor helper is called
        assert set(loaded) == {
            "gpuctl.batching",
            "gpuctl.batching.batcher",
            "gpuctl.batching.metrics",
            "gpuctl.batching.tensors",
        }
    else:
        assert "Usage:" in proc.stdout
        assert not [m for m in loaded if m.startswith("gpuctl.batching")]


INTERRUPT_PROBE = """
import asyncio, sys
from gpuctl.batching import DynamicBatcher
exc = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit}[sys.argv[1]]
seen = []
async def fn(items):
    raise exc
async def serve():
    async with DynamicBatcher(fn, max_batch_size=1, max_wait_ms=0) as b:
        try:
            await b.submit(1)
        except BaseException as e:
            seen.append(type(e).__name__)
            raise
try:
    asyncio.run(serve())
except BaseException as e:
    print("RAISED:" + type(e).__name__, "CALLER_SAW:" + ",".join(seen))
"""


@pytest.mark.integration
@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "SystemExit"])
async def test_interrupt_raised_in_fn_stops_the_program_not_just_its_batch(exc):
    # Ctrl-C lands in whatever the loop runs, fn included: it must reach asyncio.run, as it
    # would without the batcher, not be handed to the batch's callers as a failure. (In a
    # process of its own: an interrupt that escapes asyncio.run leaves a task behind whose
    # late "exception never retrieved" log can upset a later compile in pytest's process.)
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPT_PROBE, exc],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=60,
    )
    outcome = [ln for ln in proc.stdout.splitlines() if ln.startswith("RAISED:")]
    assert outcome and outcome[0].split()[0] == f"RAISED:{exc}", proc.stdout + proc.stderr
    assert "RuntimeError" not in outcome[0]


async def test_calls_from_another_thread_s_loop_are_refused_without_harm():
    rec = Recorder()
    loop = asyncio.get_running_loop()

    def from_another_loop(call):
        with pytest.raises(RuntimeError, match="another event loop"):
            asyncio.run(call())

    async with DynamicBatcher(rec.sync, max_batch_size=2, max_wait_ms=1) as b:
        await asyncio.to_thread(from_another_loop, lambda: b.submit(1))
        await asyncio.to_thread(from_another_loop, b.close)
        assert not b.closed and b.metrics().queue_depth == 0
        assert await within(b.submit(2)) == "out-2"
        # the way in from another thread: hand the call to the batcher's own loop
        threadsafe = await asyncio.to_thread(
            lambda: asyncio.run_coroutine_threadsafe(b.submit(3), loop).result(5)
        )
        assert threadsafe == "out-3"
    assert rec.batches == [[2], [3]]
