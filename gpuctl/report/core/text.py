"""How the report writes its figures and the names it got from Prometheus, in every form
(table, HTML page). Pure."""

from __future__ import annotations

from datetime import datetime, timezone


def money(value: float | None, currency: str) -> str:
    return "unpriced" if value is None else f"{value:,.2f} {currency}"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def safe(text: str, limit: int | None = None) -> str:
    """A name from Prometheus as shown: printable, cut to LIMIT characters."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def when(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def dra_note(unlabelled: int) -> str:
    """What the report says when devices the cluster allocates through DRA are counted as
    unheld; "" when none are."""
    if not unlabelled:
        return ""
    devices = "1 device" if unlabelled == 1 else f"{unlabelled:,} devices"
    return (
        f"{devices} the cluster allocates through DRA now are counted as unheld: their DCGM "
        "series name no pod (run dcgm-exporter with --kubernetes-enable-dra; it names no pod "
        "for MIG devices even then, see docs/report.md)"
    )
