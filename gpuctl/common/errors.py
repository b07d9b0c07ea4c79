"""gpuctl's own error types. The CLI turns each into one line on stderr and an exit code."""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpuctl.common.text import printable, redact_secrets

# Exit codes scripts can rely on.
EXIT_FAILURE = 1  # an outside system failed or refused (cluster, cloud, GPU)
EXIT_USAGE = 2  # bad input: a spec file or an option
EXIT_ABORTED = 3  # the user declined a confirmation
EXIT_INTERRUPTED = 130


class GpuctlError(Exception):
    """An error with a message meant for the user, and optionally a hint to fix it.

    `details` are lines printed below the message (one per refused node, object left, …).
    Every text is made printable (gpuctl.common.text) and has credentials masked (see
    `redact`, `redact_secrets`)."""

    exit_code = EXIT_FAILURE
    uncertain = False  # the change it failed to make may have been made all the same

    def __init__(self, message: str, hint: str | None = None, details: Iterable[str] = ()):
        message = _shown(message)
        super().__init__(message)
        self.message = message
        self.hint = hint and _shown(hint)
        self.details = [_shown(d) for d in details]

    def __str__(self) -> str:
        return "\n".join([self.message, *self.details])


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


class Interrupted(GpuctlError):
    """Ctrl-C: what was stopped, and what was undone or is left."""

    exit_code = EXIT_INTERRUPTED


# user:password@ in any URL, and the values of query parameters that carry credentials
# (tokens, keys, AWS pre-signed URLs' signatures).
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s'\"?#<>]+@")
_SECRET_QUERY = re.compile(
    r"(?i)([?&](?:[a-z0-9_.-]*(?:token|password|passwd|secret|signature|credential|apikey|api_key)"
    r"|key|sig|auth|x-amz-[a-z-]+)=)[^&\s'\"#<>]+"
)


def redact(text: str) -> str:
    """`text` with the credentials of every URL in it masked: `https://***@host/?token=***`."""
    return _SECRET_QUERY.sub(r"\1***", _URL_USERINFO.sub(r"\1***@", text))


def carries_credentials(url: str) -> bool:
    """Whether URL holds what `redact` masks (user:password@, a token in its query)."""
    return redact(url) != url


def _shown(text: str) -> str:
    # Messages quote what the user wrote and what outside systems answered: neither may
    # split the one line, drive the terminal, or show a credential.
    return printable(redact_secrets(redact(text)))
