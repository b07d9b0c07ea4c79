"""The cluster view's live loop (service.watch) over frames that succeed or fail as told:
a failure after the first frame keeps the last frame with why it is stale, a failing
first frame ends the loop with its error, and the frames are closed either way."""

import pytest

from gpuctl.common.errors import BackendError
from gpuctl.top.cluster import service as cluster


class Frames:
    """LiveFrames' interface; each answer a frame (here a name) or an error to raise."""

    delay = 0.0
    sort, filter = "index", ""

    def __init__(self, answers):
        self.answers, self.asked, self.closed = list(answers), [], False

    def frame(self, rows):
        self.asked.append(rows)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer, 1.5

    def close(self):
        self.closed = True


def test_a_failed_refresh_keeps_the_last_frame_and_says_why():
    frames = Frames(["first", BackendError("HTTP 503"), "third"])
    shown = []

    def rows(last):  # the room a screen has depends on the last frame shown
        return 40 if last is None else 40 + len(last)

    cluster.watch(
        frames, rows, lambda screen, view: shown.append(screen), until=lambda: not frames.answers
    )
    assert [(s.frame, s.rows, s.error, s.age) for s in shown] == [
        ("first", 40, None, 1.5),
        ("first", 45, "HTTP 503", 1.5),
        ("third", 45, None, 1.5),
    ]
    assert frames.asked == [40, 45, 45] and frames.closed


def test_a_failed_first_frame_ends_the_loop():
    frames = Frames([BackendError("cannot reach Prometheus")])
    with pytest.raises(BackendError, match="cannot reach"):
        cluster.watch(frames, lambda last: 10, lambda screen, view: pytest.fail("shown"))
    assert frames.closed
