"""The cluster view's data from Prometheus: every GPU at once (`snapshot`, decoded as the
answers stream in), or live frames (`LiveFrames`: the cluster figures computed by
Prometheus and refreshed in the background, the rows on screen fetched every frame) and
the live loop that shows them (`watch`)."""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpuctl.common.errors import BackendError
from gpuctl.common.keys import View
from gpuctl.dcgm import metrics
from gpuctl.dcgm.holders import Exporter
from gpuctl.gpus.vendors import NVIDIA
from gpuctl.runtime.terminal import KeyReader
from gpuctl.top.cluster.core import keys, live, usage
from gpuctl.top.cluster.core.keys import KEYS

# The cluster figures cost Prometheus a pass over every GPU's series (seconds at 40,000
# GPUs): after each refresh the next waits PAUSE times as long as it took, so gpuctl keeps
# Prometheus busy at most 1/(1 + PAUSE) of the time; small clusters refresh every frame.
PAUSE = 4
# A live view whose cluster has other vendors' devices beside dcgm-exporter's reads every
# device whole each frame (as --once does: the figures are dcgm-exporter's alone) up to this
# many NVIDIA devices; beyond, its rows and figures are NVIDIA's and it says so.
EVERY_DEVICE_ROWS = 2000
# Evaluating the figures takes Prometheus seconds at 40,000 GPUs (25 s on a busy 2-core
# machine): their background query may take this long; the rows keep the client's timeout.
FIGURES_TIMEOUT = 120.0


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    # A large cluster's answers are ~10^5 small acyclic objects (dicts, lists, strings);
    # letting the cycle collector rescan them while they are built costs a third of a frame.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class NoDcgmMetrics(BackendError):
    """No dcgm-exporter device in Prometheus (the live figures have none to count)."""


def _no_metrics(client) -> BackendError:
    return NoDcgmMetrics(
        f"no DCGM-exporter metrics in Prometheus at {client.url} "
        f"(no {metrics.UTIL} or other DCGM_FI_* series in the last 5 minutes), "
        "nor another vendor's exporter's",
        hint="deploy dcgm-exporter (the NVIDIA GPU Operator does), or your accelerators' "
        "exporter (docs/top.md lists them), and make sure this Prometheus scrapes it",
    )


def _rows(client, queries: usage.Queries, exporter: Exporter) -> usage.FrameBuilder:
    # Evaluated at Prometheus's own "now": a client clock running ahead would otherwise
    # look past the 5-minute lookback and find no GPUs at all.
    builder = usage.FrameBuilder(exporter)
    client.query_all(
        [queries.current, queries.attributes, queries.window_util],
        [builder.add_current, builder.add_attributes, builder.add_means],
    )
    return builder


def snapshot(
    client, window: str, idle_threshold: float, exporter: Exporter, sort: str = "index"
) -> usage.ClusterFrame:
    """Every GPU: three concurrent queries, each folded into the frame as it is decoded;
    ordered by `sort`."""
    with cyclic_gc_paused():
        frame = _rows(client, usage.queries(window, others=True), exporter).frame(idle_threshold)
        if not frame.rows:
            raise _no_metrics(client)
    if sort != "index":
        frame.rows = live.page_rows(frame.rows, sort, len(frame.rows))
    return frame


def figures(
    client, window: str, idle_threshold: float, exporter: Exporter, sort: str, rows: int
) -> live.Figures:
    """The cluster figures of a live frame: one query, aggregated by Prometheus."""
    query = live.figures_query(window, idle_threshold, exporter, sort, rows)
    try:
        found = client.query(query, functools.partial(live.read_figures, claimed=exporter.claimed))
    except (KeyError, ValueError, OverflowError) as e:  # a count that is no count
        raise BackendError(
            f"Prometheus at {client.url} answered the cluster figures with a sample gpuctl "
            f"cannot read ({type(e).__name__}: {e})"
        ) from None
    if not found.node_gpus:
        raise _no_metrics(client)
    return found


def rows_on_screen(
    client,
    window: str,
    idle_threshold: float,
    exporter: Exporter,
    found: live.Figures,
    sort: str,
    rows: int,
) -> list[usage.ClusterGpuRow]:
    """The rows a screen of `rows` lines shows: every value of the GPUs of the nodes
    holding them (three queries), nothing of the other nodes."""
    nodes = live.page_nodes(found, sort, rows)
    if not nodes:
        return []
    builder = _rows(client, usage.queries(window, usage.on_nodes(nodes)), exporter)
    return live.page_rows(builder.frame(idle_threshold).rows, sort, rows)


def rows_matching(
    client,
    window: str,
    idle_threshold: float,
    exporter: Exporter,
    wanted: str,
    sort: str,
    rows: int,
) -> tuple[list[usage.ClusterGpuRow], int]:
    """The rows a screen of `rows` lines shows under the filter `wanted` (cluster.core.keys),
    and how many GPUs it matches: the values of the GPUs it may match (three queries)."""
    builder = _rows(client, usage.queries(window, keys.matchers(wanted)), exporter)
    found = [r for r in builder.frame(idle_threshold).rows if keys.row_matches(r, wanted)]
    return live.page_rows(found, sort, rows), len(found)


def reads_whole(nvidia: int, others: int) -> bool:
    """Whether a live frame reads every device whole, as --once does (snapshot): the live
    figures are dcgm-exporter's alone, so a cluster is read whole where it has no NVIDIA
    GPU (no dcgm-exporter series), or other vendors' devices (OTHERS) beside NVIDIA GPUs
    (NVIDIA) that fit in EVERY_DEVICE_ROWS."""
    return nvidia == 0 or (others > 0 and nvidia <= EVERY_DEVICE_ROWS)


class LiveFrames:
    """Frames of the live view. The figures are refreshed by a background thread (the
    first frame waits for them); each frame fetches the rows on screen."""

    def __init__(
        self, client, window: str, idle_threshold: float, exporter: Exporter, sort: str, delay
    ):
        import copy

        self.client, self.window, self.threshold = client, window, idle_threshold
        self._figures_client = copy.copy(client)
        self._figures_client.timeout = max(client.timeout, FIGURES_TIMEOUT)
        self.exporter, self.sort, self.delay = exporter, sort, delay
        self.filter = ""  # the rows shown: those the filter matches (cluster.core.keys)
        self.rows = 0  # rows on screen, as the last frame asked
        self.refreshes = 0  # figures refreshed so far
        self._figures: live.Figures | None = None
        self._figures_rows = 0  # rows the figures' page was chosen for
        self._figures_sort = sort  # ... and the sort
        self._figures_at = 0.0
        self._whole = False  # each frame reads every device (snapshot): no figures asked
        self._error: Exception | None = None  # raised by the next frame
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _refresh(self) -> None:
        while not self._stop.is_set():
            if self._whole:  # the frames read every device: figures nobody shows, unasked
                self._wake.wait()
                self._wake.clear()
                continue
            start, rows, sort = time.monotonic(), self.rows, self.sort
            try:
                found = figures(
                    self._figures_client, self.window, self.threshold, self.exporter, sort, rows
                )
                with self._lock:
                    self._figures, self._figures_rows, self._error = found, rows, None
                    self._figures_sort = sort
                    self._figures_at = time.monotonic()
                    self.refreshes += 1
            except Exception as e:  # any: a first frame waiting for figures must not hang
                with self._lock:
                    self._error = e
            self._ready.set()
            took = time.monotonic() - start
            self._wake.wait(max(self.delay, PAUSE * took))
            self._wake.clear()

    def frame(self, rows: int) -> tuple[usage.ClusterFrame, float]:
        """The frame for a screen of `rows` GPU rows, and the figures' age in seconds.
        Raises BackendError when Prometheus fails (the caller keeps the last frame)."""
        self.rows = rows
        if self._whole:
            return self._every_device(rows), 0.0
        if self._thread is None:
            self._thread = threading.Thread(target=self._refresh, daemon=True)
            self._thread.start()
        self._ready.wait()
        with self._lock:
            found, error, at = self._figures, self._error, self._figures_at
            if self.sort != "index" and rows > self._figures_rows:
                self._wake.set()  # a taller screen: choose its rows now
            stale = found is not None and self._figures_sort != self.sort
        if isinstance(error, NoDcgmMetrics):  # other vendors' devices only (or none at all)
            self._whole = True
            return self._every_device(rows), 0.0
        if error is not None:
            raise error
        assert found is not None  # set before _ready, unless an error was
        if reads_whole(sum(found.node_gpus.values()), found.others):
            self._whole = True
            return self._every_device(rows), 0.0  # every vendor's, as --once shows them
        if stale:  # sorted otherwise since (a key): the page that sort ranks first, now
            found = figures(self.client, self.window, self.threshold, self.exporter, self.sort,
                            rows)  # fmt: skip
            at = time.monotonic()
            self._wake.set()
        args = (self.client, self.window, self.threshold, self.exporter)
        matched = None
        if self.filter:
            page, matched = rows_matching(*args, self.filter, self.sort, rows)
        else:
            page = rows_on_screen(*args, found, self.sort, rows)
        frame = usage.ClusterFrame(page, found.namespaces, found.summary, matched)
        frame.others_left_out = found.others > 0
        return frame, time.monotonic() - at

    def _every_device(self, rows: int) -> usage.ClusterFrame:
        """A frame of every vendor's devices, read whole (snapshot): the live figures are
        computed from dcgm-exporter's series alone, which this cluster has none or few of,
        and are not asked while the frames are read whole; a cluster grown past
        reads_whole has them asked again for the next frame. The error of a Prometheus
        with no device of any vendor's."""
        frame = snapshot(self.client, self.window, self.threshold, self.exporter)
        found = frame.rows
        nvidia = sum(1 for r in found if r.vendor == NVIDIA.name)
        if not reads_whole(nvidia, len(found) - nvidia):
            with self._lock:
                self._whole = False
                self._ready.clear()
            self._wake.set()
        if self.filter:
            found = [r for r in found if keys.row_matches(r, self.filter)]
            frame.matched = len(found)
        frame.rows = live.page_rows(found, self.sort, rows)
        return frame

    def close(self) -> None:
        self._stop.set()
        self._wake.set()


@dataclass
class Screen:
    """What the live loop hands its `show`: a frame and how it came."""

    frame: usage.ClusterFrame
    rows: int  # the GPU rows the screen has room for
    error: str | None  # why the frame is stale (the last good one, kept), or None
    age: float  # seconds since the cluster figures were computed


def watch(
    frames: LiveFrames,
    rows: Callable[[usage.ClusterFrame | None], int],
    show: Callable[[Screen, View], None],
    until: Callable[[], bool] = lambda: False,
) -> None:
    """A frame every `frames.delay` seconds until `q` (or Ctrl-C, or `until()`), each shown
    with the view's state on a screen of `rows(last frame)` GPU rows. A key redraws at once
    (cluster.core.keys: help, sort, filter); a new sort or filter gets its frame at once.
    When Prometheus fails the last frame is shown again with why it is stale; when the
    first frame fails the loop ends with the error."""
    state: View | None = View(sort=frames.sort)
    screen: Screen | None = None
    try:
        with KeyReader() as reader:
            while state is not None and not until():
                started = time.monotonic()
                frames.sort, frames.filter = state.sort, state.filter
                screen = _next_screen(frames, rows, screen)
                show(screen, state)
                state = _keys(reader, frames, state, functools.partial(show, screen), started)
    finally:
        frames.close()


def _next_screen(
    frames: LiveFrames, rows: Callable[[usage.ClusterFrame | None], int], last: Screen | None
) -> Screen:
    room = rows(None if last is None else last.frame)
    try:
        frame, age = frames.frame(room)
    except BackendError as e:
        if last is None:
            raise
        return Screen(last.frame, room, e.message, last.age)
    return Screen(frame, room, None, age)


def _keys(
    reader: KeyReader,
    frames: LiveFrames,
    state: View,
    redraw: Callable[[View], None],
    started: float,
) -> View | None:
    """The view's state after the keys pressed until the next frame is due (None: quit);
    each key redraws at once, a new sort or filter ends the wait."""
    while (wait := started + frames.delay - time.monotonic()) > 0:
        pressed = reader.within(wait)
        for key in pressed:
            after = KEYS.press(state, key)
            if after is None:
                return None
            state = after
        if not pressed:
            continue
        if not state.typing and (state.sort, state.filter) != (frames.sort, frames.filter):
            return state
        redraw(state)
    return state
