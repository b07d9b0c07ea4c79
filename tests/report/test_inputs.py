"""`gpuctl report`'s options and files are checked before anything is asked: a bad value
exits 2 with one line naming it, and the Prometheus named (a listening socket here) is
never connected to. Output paths follow `gpuctl init`'s rules (gpuctl.runtime.files)."""

from __future__ import annotations

import os
import socket
import stat
import time

import pytest

from tests.clirun import run_gpuctl

pytestmark = pytest.mark.integration  # a listening socket stands for Prometheus


@pytest.fixture
def listener():
    """A TCP port that records whether anything connected to it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    def connected() -> bool:
        time.sleep(0.05)
        try:
            sock.accept()[0].close()
            return True
        except BlockingIOError:
            return False

    yield url, connected
    sock.close()


def _refused(capsys, listener, *args) -> str:
    url, connected = listener
    code, out, err = run_gpuctl(capsys, "report", "--prometheus", url, *args)
    assert code == 2, (code, err)
    assert err.startswith("gpuctl: error: ") and out == "", err
    assert not connected(), "Prometheus was asked before the options were checked"
    return err


@pytest.mark.parametrize(
    "args, said",
    [
        (["--end", "12345678901234567890"], "--end: '12345678901234567890' is not between 1970"),
        (["--end", "99999999999999"], "is not between 1970 and the year 9999"),
        (["--end", "nan"], "--end: 'nan' is not a time"),
        (["--end", "1e9"], "--end: '1e9' is not a time"),
        (["--window", "6y"], "--window: '6y' is longer than"),
        (["--window", "0s"], "--window: '0s' must be longer than zero"),
        (["--step", "500ms"], "--step: '500ms' is shorter than a second"),
        (["--window", "1h", "--step", "2h"], "--step must not be longer than --window"),
        (["--window", "5y", "--step", "1m"], "over 1,000,000 steps"),
        (["--idle-threshold", "nan"], "--idle-threshold: nan is not a percentage"),
        (["--idle-threshold", "inf"], "--idle-threshold: inf is not a percentage"),
        (["--idle-threshold", "-1"], "--idle-threshold: -1 is not a percentage"),
        (["--teams", "0"], "--teams"),
        (["--teams", "1001"], "--teams"),
        (["--top", "0"], "--top"),
        (["--by", "label"], "--by label needs the label's key"),
    ],
)
def test_a_bad_option_exits_2_before_prometheus_is_asked(capsys, listener, args, said):
    assert said in _refused(capsys, listener, *args)


def _fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _link_to_stdout(tmp_path):
    path = tmp_path / "out.html"
    os.symlink("/dev/stdout", path)
    return path


def _link_to_file(tmp_path):
    (tmp_path / "elsewhere.txt").write_text("keep me\n")
    path = tmp_path / "out.html"
    os.symlink(tmp_path / "elsewhere.txt", path)
    return path


def _device(tmp_path):
    path = tmp_path / "null"
    try:  # a /dev/null of our own (1, 3): a broken check replaces this one, not the real
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


def _directory(tmp_path):
    path = tmp_path / "a-dir"
    path.mkdir()
    return path


@pytest.mark.parametrize("make", [_fifo, _link_to_stdout, _link_to_file, _device, _directory])
def test_html_is_never_written_over_what_is_not_a_regular_file(capsys, listener, tmp_path, make):
    path = make(tmp_path)
    before = os.lstat(path)
    err = _refused(capsys, listener, "--html", str(path))
    assert f"--html: {path} is not a regular file" in err
    after = os.lstat(path)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert sorted(os.listdir(tmp_path)) == sorted(
        n for n in os.listdir(tmp_path) if not n.startswith(".")
    )  # no temporary file left beside it


def test_html_in_a_missing_directory_is_a_clear_error(capsys, listener, tmp_path):
    err = _refused(capsys, listener, "--html", str(tmp_path / "no" / "such" / "page.html"))
    assert f"--html: directory {tmp_path}/no/such does not exist" in err and "bug" not in err


def test_html_under_a_file_is_a_clear_error(capsys, listener, tmp_path):
    (tmp_path / "file").write_text("")
    err = _refused(capsys, listener, "--html", str(tmp_path / "file" / "page.html"))
    assert "--html: cannot write" in err and "Not a directory" in err


BOMB = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_a_prices_file_with_aliases_is_refused_at_once(capsys, listener, tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(BOMB)
    began = time.monotonic()
    err = _refused(capsys, listener, "--prices", str(path))
    assert time.monotonic() - began < 5
    assert f"{path}:2: YAML aliases (*name) are not allowed" in err


def test_a_bad_price_names_its_file_line_and_model(capsys, listener, tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("currency: EUR\nprices:\n  H100: 9.5\n  A100: cheap\n")
    err = _refused(capsys, listener, "--prices", str(path))
    assert f"{path}:4: prices.A100: 'cheap' is not a price per GPU-hour" in err
