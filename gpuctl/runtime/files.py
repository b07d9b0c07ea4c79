"""Writing the files gpuctl keeps (simulator state, Terraform variables, caches) and the
files a user asks for (`init -f`, `report --html`) safely.

A reader sees the old content or the new one, never half of it, and a symlink planted where
gpuctl writes (or beside it, under a guessable temporary name) is never followed: the new
content goes to a temporary file created exclusively in the same directory, which then
replaces the target path itself with rename(2). A file a user names is checked before any
work (`check_output`) and again as it is written (`write_output`): only a regular file is
ever replaced, never a device, a FIFO, a socket, a directory or a symlink (to /dev/stdout,
to a file elsewhere), and a missing directory is named.
"""

from __future__ import annotations

import os
import stat
import tempfile

from gpuctl.common.errors import UsageError

# What gpuctl writes can hold account ids, cluster endpoints and Terraform state.
PRIVATE = 0o600
PRIVATE_DIR = 0o700


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int = PRIVATE) -> None:
    """Replace the file at `path` with `data` (text is written as UTF-8) in one step."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    # mkstemp: O_CREAT | O_EXCL with a random name, mode 0600
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)  # replaces a symlink at `path` itself, never its target
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def open_lock(path: str | os.PathLike[str]) -> int:
    """A descriptor on the lock file at `path` (created if missing), for fcntl.flock. A
    symlink there is refused (ELOOP), not followed to a file somewhere else."""
    return os.open(os.fspath(path), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE)


def make_private_dir(path: str | os.PathLike[str]) -> None:
    """Create `path` and its parents (mode 0700 for those created)."""
    os.makedirs(path, mode=PRIVATE_DIR, exist_ok=True)


def own_private_dir(path: str | os.PathLike[str]) -> None:
    """Create `path` (mode 0700) and its parents, and make sure that `path` is a directory of
    this user that no one else may write to: not a symlink, not another user's, not group-
    or world-writable. OSError names what is wrong; nothing in it is changed."""
    path = os.fspath(path)
    try:
        os.makedirs(os.path.dirname(path) or ".", mode=PRIVATE_DIR, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(f"a part of {path} is a file, not a directory") from None
    try:
        os.mkdir(path, PRIVATE_DIR)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise PermissionError(f"{path} is a symbolic link, not a directory of its own")
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"{path} is a file, not a directory")
    if st.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user (uid {st.st_uid})")
    if st.st_mode & 0o022:
        raise PermissionError(
            f"{path} may be written by others (mode {stat.S_IMODE(st.st_mode):04o}, not 0700)"
        )


def open_new(path: str | os.PathLike[str], mode: int = PRIVATE) -> int:
    """A descriptor on a new, empty file at `path`, for writing (a log): what was there is
    removed first, a symlink itself and never its target, and the file is created
    exclusively, so one planted meanwhile is refused rather than followed."""
    path = os.fspath(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(path, flags, mode)


def check_output(path: str, option: str, replace: str | None = None) -> None:
    """A UsageError, before any work, for an output PATH gpuctl will not write: anything
    but a regular file there, a directory that is missing or is not one, or (with REPLACE,
    the option that allows it, e.g. "--force") an existing file."""
    if not path or "\0" in path:
        raise UsageError(f"{option}: {path!r} is not a file name")
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        found = None
    except OSError as e:  # ENOTDIR: a file where a directory is named; ENAMETOOLONG, EACCES
        raise UsageError(f"{option}: cannot write {path}: {e.strerror}") from None
    if found is not None and not stat.S_ISREG(found.st_mode):
        # a FIFO, a device, a directory or a symlink (to /dev/stdout, to a file elsewhere)
        raise UsageError(
            f"{option}: {path} is not a regular file; gpuctl replaces only a file",
            hint="name a new file, or remove what is there first",
        )
    if found is not None and replace:
        raise UsageError(f"{option}: {path} exists", hint=f"{replace} replaces it")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(
            f"{option}: directory {os.path.dirname(path) or '.'} does not exist",
            hint="create it first, or name a file in a directory that exists",
        )


def write_output(path: str, data: str | bytes, option: str, mode: int = 0o644) -> None:
    """Write a file the user asked for (a page, a spec: mode 0644), by check_output's rules
    checked again now, atomically."""
    check_output(path, option)
    try:
        write_atomic(path, data, mode)
    except OSError as e:
        raise UsageError(f"{option}: cannot write {path}: {e.strerror}") from None
