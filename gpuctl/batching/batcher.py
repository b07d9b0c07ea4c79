"""DynamicBatcher: gathers concurrent single requests into batches for one batch function."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import itertools
import math
import numbers
import operator
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Set, Sized
from typing import Any, Generic, TypeVar, cast

from gpuctl.batching.metrics import BatcherMetrics, MetricsRecorder
from gpuctl.common.errors import GpuctlError

T = TypeVar("T")
R = TypeVar("R")

BatchFn = Callable[[list[T]], Iterable[R] | Awaitable[Iterable[R]]]


class BatchingError(GpuctlError):
    """Base of the errors the batcher itself raises."""


class BatcherClosed(BatchingError, RuntimeError):
    """submit() on a batcher that is closed, closing, or not started."""


class BatchResultError(BatchingError):
    """fn returned something that cannot be matched one-to-one with the batch's requests."""

    def __init__(self, message: str, *, expected: int, got: int | None):
        # got: how many results fn returned; None when it returned no sequence, or an
        # iterator that ran past the batch (it is read no further)
        super().__init__(message, hint="fn(items) must return one result per item, in order")
        self.expected, self.got = expected, got


# Life of a request: QUEUED, then either TAKEN into a batch or DROPPED (cancelled while queued).
_QUEUED, _TAKEN, _DROPPED = range(3)


class _Request:
    __slots__ = ("item", "future", "enqueued_at", "state")

    def __init__(self, item: Any, future: asyncio.Future, enqueued_at: float):
        self.item, self.future, self.enqueued_at, self.state = item, future, enqueued_at, _QUEUED


class DynamicBatcher(Generic[T, R]):
    """Micro-batches concurrent `await submit(item)` calls into `fn(items) -> results`.

    A batch goes to fn when it holds `max_batch_size` requests, or `max_wait_ms` after its
    first request arrived, whichever is first. One batch runs at a time; requests that arrive
    meanwhile form the next one. A sync fn runs in a worker thread (one, so a GPU model keeps
    a single host thread), an async fn is awaited on the loop.
    """

    def __init__(
        self,
        fn: BatchFn[T, R],
        *,
        max_batch_size: int = 32,
        max_wait_ms: float = 5.0,
        max_queue: int = 1024,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        max_batch_size = _positive_int("max_batch_size", max_batch_size)
        max_queue = _positive_int("max_queue", max_queue)
        max_wait_ms = _non_negative_number("max_wait_ms", max_wait_ms)
        if max_queue < max_batch_size:
            raise ValueError(
                f"max_queue ({max_queue}) must be >= max_batch_size ({max_batch_size}),"
                " or no batch could ever fill"
            )
        self._fn = fn
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            type(fn).__call__
        )
        self.max_batch_size = max_batch_size
        self.max_wait_ms = max_wait_ms
        self.max_queue = max_queue
        self._max_wait = self.max_wait_ms / 1000.0
        self._own_executor = executor is None
        self._executor = executor
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._closed = False
        self._queue: deque[_Request] = deque()  # may hold cancelled requests until popped
        self._queued = 0  # requests in _queue that are still QUEUED
        self._in_flight = 0
        self._wakeup: asyncio.Future | None = None  # set while the dispatcher sleeps
        self._room_waiters: deque[asyncio.Future] = deque()  # submitters held by back-pressure
        self._reserved = 0  # queue slots promised to woken submitters that have not run yet
        self._metrics = MetricsRecorder()

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> DynamicBatcher[T, R]:
        self.start()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:  # noqa: V107 (the protocol's parameters)
        await self.close()

    def start(self) -> None:
        """Start dispatching on the running event loop (done by `async with`)."""
        if self._task is not None or self._closed:
            raise BatcherClosed(
                "a DynamicBatcher runs once: this one was already started or "
                "closed; create a new one"
            )
        self._loop = asyncio.get_running_loop()
        if self._executor is None and not self._is_async:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="gpuctl-batcher"
            )
        self._task = self._loop.create_task(self._dispatch_loop(), name="gpuctl-batcher")
        if self._own_executor and self._executor is not None:
            executor = self._executor
            self._task.add_done_callback(lambda _t: executor.shutdown(wait=False))

    async def close(self) -> None:
        """Refuse new requests, run every queued one through fn, then stop. Idempotent.

        If the task awaiting close() is cancelled, the batcher stops at once: what is still
        queued, and the batch inside fn, fail with BatcherClosed (an async fn is cancelled; a
        sync fn's thread cannot be, and runs on with its result dropped).
        """
        self._check_loop("close()")
        self._closed = True
        self._wake_dispatcher()
        self._wake_room(everyone=True)
        if self._task is None:
            return
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if self._task.done() and not _cancel_requested(asyncio.current_task()):
                return  # the dispatcher was cancelled (another close() was), not our caller
            self._task.cancel()
            raise

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def _started_loop(self) -> asyncio.AbstractEventLoop:
        """The loop start() bound the batcher to; only called once it started."""
        assert self._loop is not None, "the DynamicBatcher has not started"
        return self._loop

    # -- requests ------------------------------------------------------------------------------

    async def submit(self, item: T) -> R:
        """Queue one item and wait for its own result (or the exception of its batch).

        Waits for room while `max_queue` requests are already waiting (back-pressure).
        Cancelling the call while queued removes the item from its batch before dispatch.
        """
        self._check_open()
        # Newcomers queue behind earlier waiters, even those woken but not yet run: FIFO.
        held = bool(self._room_waiters or self._reserved or self._queued >= self.max_queue)
        if held:
            await self._wait_for_room()
            self._check_open()
        loop = self._started_loop
        req = _Request(item, loop.create_future(), loop.time())
        req.future.add_done_callback(lambda _f: self._drop_if_cancelled(req))
        self._queue.append(req)
        self._queued += 1
        if held:
            self._wake_room()  # room beyond this caller's slot goes to the next in line
        if self._queued == 1 or self._queued >= self.max_batch_size:
            self._wake_dispatcher()
        return await req.future

    def metrics(self) -> BatcherMetrics:
        """A snapshot of the counters. May be called from another thread (an exporter's): it
        takes no lock, so one snapshot's fields can be a batch apart."""
        return self._metrics.snapshot(
            queue_depth=self._queued, max_queue=self.max_queue, in_flight=self._in_flight
        )

    def _check_open(self) -> None:
        if self._closed:
            raise BatcherClosed(
                "submit() on a closed DynamicBatcher: it stopped accepting requests"
                " when its `async with` block ended or close() was called"
            )
        if self._task is None:
            raise BatcherClosed(
                "submit() before the DynamicBatcher started: use "
                "`async with DynamicBatcher(...) as batcher:` (or call start())"
            )
        self._check_loop("submit(item)")

    def _check_loop(self, call: str) -> None:
        if self._loop is not None and asyncio.get_running_loop() is not self._loop:
            raise RuntimeError(
                f"{call} from another event loop than the one the batcher runs on;"
                f" from another thread use asyncio.run_coroutine_threadsafe("
                f"batcher.{call}, loop)"
            )

    def _drop_if_cancelled(self, req: _Request) -> None:
        if req.state == _QUEUED and req.future.cancelled():
            req.state = _DROPPED
            self._queued -= 1
            self._metrics.cancelled += 1
            self._wake_room()

    async def _wait_for_room(self) -> None:
        """Wait, first come first served, until a queue slot is reserved for this caller."""
        waiter = self._started_loop.create_future()
        self._room_waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.cancelled():
                try:
                    self._room_waiters.remove(waiter)
                except ValueError:  # already popped by a wake-up
                    pass
            else:  # woken, then cancelled before running: pass the reserved slot on
                self._reserved -= 1
                self._wake_room()
            raise
        self._reserved -= 1

    def _wake_room(self, everyone: bool = False) -> None:
        # A woken waiter runs later; its slot stays reserved until then, so that a newcomer
        # submitting in between cannot take it.
        free = (
            len(self._room_waiters) if everyone else self.max_queue - self._queued - self._reserved
        )
        while free > 0 and self._room_waiters:
            waiter = self._room_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._reserved += 1
                free -= 1

    # -- dispatch ------------------------------------------------------------------------------

    def _wake_dispatcher(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _sleep(self, until: float | None) -> None:
        """Sleep until the loop time `until` (None: forever), or until woken."""
        loop = self._started_loop
        self._wakeup = wakeup = loop.create_future()
        timer = None
        if until is not None:
            timer = loop.call_at(until, self._wake_dispatcher)
        try:
            await wakeup
        finally:
            self._wakeup = None
            if timer is not None:
                timer.cancel()

    def _head(self) -> _Request | None:
        """The oldest request still queued; cancelled ones in front are discarded."""
        while self._queue:
            req = self._queue[0]
            if req.state == _QUEUED and not req.future.cancelled():
                return req
            self._queue.popleft()
            self._drop_if_cancelled(req)
        return None

    async def _dispatch_loop(self) -> None:
        try:
            while True:
                head = self._head()
                if head is None:
                    if self._closed:
                        return
                    await self._sleep(None)
                    continue
                if not self._closed and self._queued < self.max_batch_size:
                    deadline = head.enqueued_at + self._max_wait
                    if self._started_loop.time() < deadline:
                        await self._sleep(deadline)
                        continue  # look again: full, past the deadline, closing, or cancelled
                await self._run(self._take())
        finally:
            self._closed = True
            self._fail_queued(
                BatcherClosed("the DynamicBatcher stopped before this request was dispatched")
            )
            self._wake_room(everyone=True)

    def _take(self) -> list[_Request]:
        batch: list[_Request] = []
        while len(batch) < self.max_batch_size and self._head() is not None:
            req = self._queue.popleft()
            req.state = _TAKEN
            batch.append(req)
        self._queued -= len(batch)
        self._wake_room()
        return batch

    async def _run(self, batch: list[_Request]) -> None:
        loop = self._started_loop
        self._metrics.dispatched([loop.time() - r.enqueued_at for r in batch])
        self._in_flight = len(batch)
        items = [r.item for r in batch]
        started = time.perf_counter()
        ok = False
        try:
            if self._is_async:
                results = await cast(Awaitable[Iterable[R]], self._fn(items))
            else:  # the thread also unpacks the results: a lazy generator runs there, too
                results = await loop.run_in_executor(self._executor, _call, self._fn, items)
            if inspect.isawaitable(results):  # an async callable inspect did not recognise
                results = await results
            results = _one_per_item(results, len(batch))
        except BaseException as e:  # noqa: BLE001 - fn's failure belongs to its batch's requests
            if _stops_batcher(e):
                self._settle(
                    batch,
                    BatcherClosed(
                        f"the DynamicBatcher stopped "
                        f"({type(e).__name__}) while this "
                        f"request's batch ran"
                    ),
                )
                raise
            self._settle(batch, e if isinstance(e, Exception) else _from_fn(e))
        else:
            ok = True
            self._settle(batch, results)
        finally:
            self._in_flight = 0
            now = loop.time()
            self._metrics.finished(
                time.perf_counter() - started, ok=ok, latencies=[now - r.enqueued_at for r in batch]
            )

    def _settle(self, batch: list[_Request], outcome: list[Any] | BaseException) -> None:
        """Each request gets its own result, or all of them the batch's exception."""
        for i, req in enumerate(batch):
            if req.future.done():  # its caller cancelled while the batch ran
                continue
            if isinstance(outcome, BaseException):
                req.future.set_exception(outcome)
            else:
                req.future.set_result(outcome[i])

    def _fail_queued(self, error: BaseException) -> None:
        while self._head() is not None:
            req = self._queue.popleft()
            req.state = _TAKEN
            self._queued -= 1
            req.future.set_exception(error)


def _positive_int(name: str, value: Any) -> int:
    number: int | None
    try:
        number = operator.index(value)  # int, numpy integer...; not float or str
    except TypeError:
        number = None
    if isinstance(value, bool) or number is None or number < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return number


def _non_negative_number(name: str, value: object) -> float:
    # `object`, not float: the check is for callers that pass anything
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _call(fn: Callable, items: list) -> Any:
    """Run a sync fn in the worker thread (results unpacked there too)."""
    try:
        results = fn(items)
        return results if inspect.isawaitable(results) else _one_per_item(results, len(items))
    except (
        StopIteration,
        GeneratorExit,
        asyncio.CancelledError,
        concurrent.futures.CancelledError,
    ) as e:
        # Passed on as they are, the loop's future would refuse a StopIteration (the batch would
        # hang), turn a CancelledError into a cancellation of the batcher itself, and a
        # GeneratorExit escapes the coroutines awaiting the future even when caught.
        raise _from_fn(e) from e


def _stops_batcher(e: BaseException) -> bool:
    """Whether an exception out of fn's call stops the batcher rather than fails the batch."""
    if isinstance(e, asyncio.CancelledError):  # the batcher's own task cancelled, or fn's doing?
        return _cancel_requested(asyncio.current_task())
    return isinstance(e, (KeyboardInterrupt, SystemExit))


def _cancel_requested(task: asyncio.Task | None) -> bool:
    """Whether `task` was asked to cancel. Python 3.10 cannot tell: there, assume it was."""
    cancelling = getattr(task, "cancelling", None)
    return cancelling() > 0 if cancelling is not None else True


def _from_fn(e: BaseException) -> RuntimeError:
    """fn's exception, for its callers, when raising it as is would mislead them (a
    CancelledError would read as their own task's cancellation)."""
    error = RuntimeError(f"batch function raised {e!r}")
    error.__cause__ = e
    return error


def _one_per_item(results: Any, expected: int) -> list:
    if isinstance(results, (str, bytes, Mapping, Set)) or not _iterable(results):
        raise BatchResultError(
            f"batch function returned a {type(results).__name__}, not a sequence of {expected} "
            f"results (one per item)",
            expected=expected,
            got=None,
        )
    # Read no further than one past the batch: an endless iterator must not hang it.
    out = results if type(results) is list else list(itertools.islice(results, expected + 1))
    if len(out) != expected:
        got: int | None = len(out)
        if len(out) > expected and out is not results:  # cut short: how many did fn return?
            got = len(results) if isinstance(results, Sized) else None
        raise BatchResultError(
            f"batch function returned {f'more than {expected}' if got is None else got} "
            f"results for a batch of {expected} items; every request of this batch failed",
            expected=expected,
            got=got,
        )
    return out


def _iterable(obj: Any) -> bool:
    try:
        iter(obj)
    except TypeError:
        return False
    return True
