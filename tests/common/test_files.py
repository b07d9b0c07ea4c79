"""Every file gpuctl keeps is written atomically and never through a planted symlink."""

import os
import stat

import pytest

from gpuctl.runtime.files import open_lock, write_atomic


@pytest.fixture
def here(tmp_path):
    (tmp_path / "files").mkdir()
    return tmp_path / "files"  # beside nothing else (conftest puts a home in tmp_path)


def test_write_replaces_the_file_in_one_step(here):
    path = here / "state.json"
    path.write_text("old")
    before = os.stat(path).st_ino
    write_atomic(path, '{"new": true}')
    assert path.read_text() == '{"new": true}'
    assert os.stat(path).st_ino != before  # a new file took the name: readers saw old or new
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert sorted(os.listdir(here)) == ["state.json"]  # no temporary file left


def test_a_planted_symlink_is_replaced_not_followed(here):
    victim = here / "victim"
    victim.write_text("precious")
    path = here / "state.json"
    path.symlink_to(victim)
    write_atomic(path, b"gpuctl's")
    assert victim.read_text() == "precious"
    assert not path.is_symlink() and path.read_text() == "gpuctl's"


def test_a_failed_write_leaves_the_old_content_and_no_temporary_file(here):
    path = here / "state.json"
    path.write_text("old")
    with pytest.raises(TypeError):
        write_atomic(path, 42)
    assert path.read_text() == "old" and os.listdir(here) == ["state.json"]


def test_a_lock_file_that_is_a_symlink_is_refused(here):
    victim = here / "victim"
    (here / "state.json.lock").symlink_to(victim)
    with pytest.raises(OSError):
        open_lock(here / "state.json.lock")
    assert not victim.exists()
    fd = open_lock(here / "other.lock")
    os.close(fd)
    assert (here / "other.lock").is_file()
