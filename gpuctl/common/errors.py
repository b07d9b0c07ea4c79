"""gpuctl's own error types. The CLI turns each into one line on stderr and an exit code."""

from __future__ import annotations

# Exit codes scripts can rely on.
EXIT_FAILURE = 1  # an outside system failed or refused (cluster, cloud, GPU)
EXIT_USAGE = 2  # bad input: a spec file or an option
EXIT_ABORTED = 3  # the user declined a confirmation
EXIT_INTERRUPTED = 130


class GpuctlError(Exception):
    """An error with a message meant for the user, and optionally a hint to fix it."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, hint: str | None = None):
        message, hint = _printable(message), hint and _printable(hint)
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class SpecError(GpuctlError):
    """Bad input in a spec file: names the file, the line and the field."""

    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ):
        self.file, self.line, self.field = file, line, field
        prefix = location(file, line, field)
        super().__init__(f"{prefix}: {message}" if prefix else message, hint)


def location(file: str | None, line: int | None = None, field: str | None = None) -> str:
    """Where in a spec file: "job.yaml:8: volumes[0].pvc" (the parts that are known)."""
    where = ":".join(str(p) for p in (file, line) if p is not None)
    return ": ".join(p for p in (where, field) if p)


class UsageError(GpuctlError):
    """A bad option or combination of options."""

    exit_code = EXIT_USAGE


class Aborted(GpuctlError):
    exit_code = EXIT_ABORTED


class BackendError(GpuctlError):
    """An outside system (Kubernetes, AWS, NVML, Prometheus, Terraform) failed."""

    exit_code = EXIT_FAILURE


def _printable(text: str) -> str:
    # Messages quote what the user wrote (a field name, a file name, an option): a newline,
    # a control character or a terminal escape in it must neither split the one line nor
    # drive the terminal. Shown as Python escapes (\x1b, \n), as repr() would.
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )
