"""Credentials that change while gpuctl runs (the scheduler extender and `submit --wait` run
for hours), renewed as client-go renews them: a kubeconfig's tokenFile is read again once a
minute (a pod's projected service-account token is rewritten by the kubelet long before it
expires), and an exec plugin runs again when its credential expires or the API server
refuses it. The clocks are arguments: tests move them instead of waiting."""

from __future__ import annotations

import base64
import math
import os
import stat
import threading
import time
from collections.abc import Callable
from datetime import datetime

from gpuctl.common.errors import BackendError, GpuctlError, UsageError


def read_token_file(path: str) -> str:
    """The bearer token in a kubeconfig's tokenFile, without the whitespace around it (a
    file written by `echo` ends in a newline), as client-go reads it; an empty one is an
    error there too. The Python client would send the newline in the header."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise UsageError(f"kubeconfig tokenFile {path}: not a regular file")
        with open(path, encoding="utf-8", errors="replace") as f:
            token = f.read().strip()
    except OSError as e:
        raise UsageError(f"kubeconfig tokenFile {path}: {e.strerror or e}") from None
    if not token:
        raise UsageError(f"kubeconfig tokenFile {path}: empty, no token in it")
    return token


class TokenFile:
    """A user's tokenFile as client-go reads it (transport/token_source.go: a
    cachingTokenSource over a fileTokenSource): the token read last, read again once it
    is PERIOD - LEEWAY seconds old. A read that fails keeps the last token; until one
    succeeds, the user's `token`, when it has one (then the file is not needed at the
    start either). Called for each request, from any thread."""

    PERIOD = 60.0  # client-go's: half the time the kubelet leaves a projected token
    LEEWAY = 10.0

    def __init__(self, path: str, token: str | None, now: Callable[[], float] = time.monotonic):
        self.path, self._now = path, now
        self._lock = threading.Lock()
        self._token, self._read_at = token or "", -math.inf
        if not token:
            self._read()  # no token without it: its errors are the kubeconfig's

    def __call__(self) -> str:
        with self._lock:
            if self._now() >= self._read_at + self.PERIOD - self.LEEWAY:
                try:
                    self._read()
                except GpuctlError:
                    pass  # client-go logs "Unable to rotate token" and sends the last one
            return self._token

    def _read(self) -> None:
        self._token, self._read_at = read_token_file(self.path), self._now()


def credential(status: dict) -> dict[str, str]:
    """The kubeconfig user fields that carry an ExecCredential STATUS's credential."""
    if isinstance(status.get("token"), str) and status["token"]:
        return {"token": status["token"]}
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if isinstance(cert, str) and isinstance(key, str) and cert and key:
        return {
            "client-certificate-data": base64.b64encode(cert.encode()).decode(),
            "client-key-data": base64.b64encode(key.encode()).decode(),
        }
    raise GpuctlError("the kubeconfig's credential plugin returned neither a token nor a key")


def expiry(status: dict) -> float | None:
    """When an ExecCredential STATUS's credential expires (its expirationTimestamp, an
    RFC 3339 time), in seconds since the epoch; None when it does not say."""
    stamp = status.get("expirationTimestamp")
    if stamp is None:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise BackendError(
            f"the kubeconfig's credential plugin printed expirationTimestamp "
            f"{str(stamp)[:40]!r}, not an RFC 3339 time"
        ) from None


class Plugin:
    """A user's exec plugin as client-go's exec Authenticator runs it: for the first
    request, again once the credential's expirationTimestamp has passed, and after the API
    server answered 401 to it (that request is not sent again: the next one carries the
    new credential). RUN runs the plugin and returns its ExecCredential's status."""

    def __init__(self, run: Callable[[], dict], now: Callable[[], float] = time.time):
        self._run, self._now = run, now
        self._lock = threading.Lock()
        self._fields: dict[str, str] | None = None
        self._expires: float | None = None

    def __call__(self) -> dict[str, str]:
        """The credential's kubeconfig fields (credential()): the same object until it
        is renewed."""
        with self._lock:
            if self._fields is None or (self._expires is not None and self._now() > self._expires):
                status = self._run()
                self._fields, self._expires = credential(status), expiry(status)
            return self._fields

    def rejected(self, fields: dict[str, str]) -> None:
        """The API server answered 401 to FIELDS: renew them, unless that was done."""
        with self._lock:
            if fields is self._fields:
                self._fields = None
