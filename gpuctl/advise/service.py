"""Ask Prometheus the advice's five queries at once, then decide."""

from __future__ import annotations

from gpuctl.advise.core import decide
from gpuctl.common.errors import BackendError
from gpuctl.dcgm.holders import Exporter
from gpuctl.dcgm.metrics import FB_USED


def advise(
    client, window: str, idle_threshold: float, namespace: str | None, exporter: Exporter
) -> decide.Advice:
    queries = decide.queries(window)  # checks --window before anything is sent
    now, peak, p95, top, owner_samples = client.query_all(queries.all())
    if not now:
        raise BackendError(
            f"no DCGM-exporter metrics in Prometheus at {client.url} "
            f"(no {FB_USED} series of a whole GPU in the last 5 minutes)",
            hint="deploy dcgm-exporter (the NVIDIA GPU Operator does) and make "
            "sure this Prometheus scrapes it",
        )
    advice = decide.advise(now, peak, p95, top, owner_samples, idle_threshold, namespace, exporter)
    if "sm_active" in advice.signal:
        # How much SM activity changed the advice: the same, by the duty cycles alone.
        p95, top = client.query_all([queries.p95_duty_cycle, queries.max_duty_cycle])
        duty = decide.advise(
            now, peak, p95, top, owner_samples, idle_threshold, namespace, exporter
        )
        advice.duty_cycle_totals = duty.totals
    return advice
