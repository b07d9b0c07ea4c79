"""The `integration` marker: `pytest -m "not integration"` is the fast half, with no stand-in.

A test is an integration test when it uses a fixture of a server stand-in module (kmock,
moto, Prometheus/promtool), which marks it here at collection, or when its module or the
test itself is marked because it starts processes (gpuctl, Terraform's worker, nvitop…).
So that the marking cannot rot, a test left unmarked that starts a process, opens a
server port, loads the Terraform engine or sets up a stand-in fixture anyway fails.
The guard is a Python audit hook: it sees those operations whichever library makes them.
"""

from __future__ import annotations

import contextlib
import socket
import sys

import pytest
import urllib3.util.connection  # noqa: F401  probes for IPv6 by binding ::1 when imported

STAND_IN_MODULES = (
    "tests.standins.kube",
    "tests.standins.aws",
    "tests.standins.prometheus",
    "tests.standins.faults",
)


class StandInStarted(RuntimeError):
    """Raised when a test of the fast half starts what only integration tests may."""


_refused: list[str] | None = None  # what the running fast test tried; None when unguarded


def _what(event: str, args: tuple) -> str | None:
    if event == "subprocess.Popen":
        return f"started a process: {' '.join(map(str, args[1] or [args[0]]))[:100]}"
    if event in ("os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system"):
        return f"started a process ({event})"
    if event == "socket.bind" and args[0].family in (socket.AF_INET, socket.AF_INET6):
        return f"opened a server port {args[1]}"
    if event == "ctypes.dlopen" and "terraform" in str(args[0]):
        return "loaded the Terraform engine"
    return None


def _audit(event: str, args: tuple) -> None:
    if _refused is None:
        return
    what = _what(event, args)
    if what:
        _refused.append(what)
        raise StandInStarted(f"{what} in a test not marked integration")


sys.addaudithook(_audit)


def _is_stand_in(fixturedef) -> bool:
    return fixturedef.func.__module__ in STAND_IN_MODULES


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items):
    for item in items:
        defs = item._fixtureinfo.name2fixturedefs
        if any(_is_stand_in(d) for name in item.fixturenames for d in defs.get(name, ())):
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef, request):
    """A stand-in fixture reached at run time (request.getfixturevalue) in a fast test."""
    if _refused is not None and _is_stand_in(fixturedef):
        what = f"set up the stand-in fixture {fixturedef.argname!r}"
        _refused.append(what)
        error = StandInStarted(f"{what} in a test not marked integration")
        # Recorded as pytest records a fixture's own error, so that its teardown resets the
        # fixture (pytest >= 9.1 otherwise keeps a stale finalizer, and the next test using
        # this fixture fails with a bare AssertionError: pytest-dev/pytest#14800).
        fixturedef.cached_result = (None, fixturedef.cache_key(request), (error, None))
        raise error


def _guarded(item):
    """Wraps a fast test's setup or call: fails it if it tried anything refused, even when
    the code under test caught the StandInStarted."""
    global _refused
    if item.get_closest_marker("integration"):
        return (yield)
    _refused = []
    try:
        result = yield
    finally:
        refused, _refused = _refused, None
    if refused:
        pytest.fail(
            f"{item.nodeid}: {'; '.join(refused)}, but it is not marked integration "
            "(add @pytest.mark.integration, or pytestmark to its module)",
            pytrace=False,
        )
    return result


pytest_runtest_setup = pytest.hookimpl(wrapper=True)(_guarded)
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_guarded)


@contextlib.contextmanager
def refused():
    """For the guard's own tests: what runs inside must be refused; it is then forgiven."""
    assert _refused is not None, "refused() is for tests of the fast half"
    seen = len(_refused)
    with pytest.raises(StandInStarted):
        yield
    del _refused[seen:]
