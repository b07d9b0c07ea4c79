"""Times as the Kubernetes API writes them (RFC 3339, UTC, whole seconds: creationTimestamp,
lastTransitionTime, an Event's timestamps). Pure."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def timestamp(t: float) -> str:
    """Seconds since the epoch as the API writes them."""
    return datetime.fromtimestamp(t, timezone.utc).strftime(FORMAT)


def seconds(text: Any) -> float | None:
    """A timestamp the API wrote, as seconds since the epoch; None if it is not one."""
    try:
        return datetime.strptime(str(text), FORMAT).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def age(created: Any, now: float) -> str:
    """How long ago a creationTimestamp was, as kubectl shows it in AGE: 45s, 12m, 5h, 3d;
    '-' when it is not one."""
    then = seconds(created)
    if then is None:
        return "-"
    ago = max(0, int(now - then))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if ago >= size:
            return f"{ago // size}{unit}"
    return f"{ago}s"


def any_seconds(text: str) -> float | None:
    """RFC 3339 / ISO 8601 text with any offset or fraction (UTC when it names none), as
    seconds since the epoch; None if it is not such a time."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
