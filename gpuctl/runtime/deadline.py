"""An overall deadline for a blocking call.

Socket timeouts bound each read, not a whole answer: a server that trickles one byte every
two seconds keeps a request alive forever under a 10-second timeout. `call` runs the request
in a helper thread and stops waiting for it when its time is up; Ctrl-C stops the wait too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


_workers: set[threading.Thread] = set()  # every helper thread started, until it ends


def abandoned() -> bool:
    """Whether a call that ran out of time still holds its helper thread. Such a thread
    waking while the interpreter shuts down aborts the process (SIGABRT, exit 134): the
    program should then end without the interpreter's teardown."""
    return any(worker.is_alive() for worker in _workers)


class DeadlineExceeded(Exception):
    """The call did not finish in time (it may still be running, unseen)."""


def call(
    fn: Callable[[], T],
    seconds: float,
    *,
    on_expiry: Callable[[], None] | None = None,
    settle_on_interrupt: bool = False,
) -> T:
    """fn(), or DeadlineExceeded after `seconds`; `on_expiry` then gets a chance to stop
    it (e.g. close its socket). With `settle_on_interrupt`, Ctrl-C still waits (up to the
    deadline) for fn to finish before it propagates: a change sent to a server has then been
    answered, or timed out, before anyone reads back what it did."""
    outcome: list = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as e:  # handed to the waiting thread
            outcome.append((False, e))
        finally:
            done.set()
            _workers.discard(worker)

    worker = threading.Thread(target=run, name="gpuctl-deadline", daemon=True)
    _workers.add(worker)
    worker.start()
    try:
        finished = done.wait(seconds)
    except KeyboardInterrupt:
        if settle_on_interrupt:
            done.wait(seconds)
        raise
    if not finished:
        if on_expiry is not None:
            on_expiry()
        raise DeadlineExceeded(f"no answer within {seconds:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
