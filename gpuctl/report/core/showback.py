"""Per-team GPU showback from the answers of queries.py: GPU-hours held, busy, idle-held,
cost, and the cluster's allocation and busy fraction over time. Pure.

A device kind is a (modelName, GPU_I_PROFILE) pair: a whole GPU counts 1, a MIG device its
compute slices over the GPU's (gpuctl.gpus.geometry; 1g of 7 is 1/7). Cost is GPU-hours
held × the model's price per GPU-hour (a MIG slice at its fraction of it)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuctl.dcgm import busy
from gpuctl.gpus import geometry
from gpuctl.report.core.queries import TEAM

Series = tuple[dict[str, Any], list[tuple[float, float]]]
Kind = tuple[str, str]  # (modelName, GPU_I_PROFILE)
_SLICES = re.compile(r"^([0-9]+)g\.")


def fraction(model: str, profile: str) -> float:
    """How much of a GPU a device is: 1 for a whole GPU, a MIG device's compute slices
    over its GPU's (7 where the model is not known to gpuctl)."""
    if not profile:
        return 1.0
    known = geometry.known_model(model) if model else None
    if known is not None:
        for p in known.profiles:
            if profile == p.name or profile in p.aliases:
                return p.slices / known.compute_slices
    found = _SLICES.match(profile)
    return min(1.0, int(found.group(1)) / 7) if found else 1.0


def _tokens(text: str) -> set[str]:
    words = set(re.split(r"[^a-z0-9]+", text.lower())) - {"", "nvidia", "tesla"}
    return words


def price_of(model: str, prices: Mapping[str, float]) -> float | None:
    """A GPU model's price per GPU-hour: the price whose key is the model's name, else the
    one whose key's words are all in the name (the most words wins: "A100 80GB" over
    "A100"); None when none fits."""
    if model in prices:
        return prices[model]
    words = _tokens(model)
    fits = [(len(_tokens(k)), k) for k in prices if _tokens(k) and _tokens(k) <= words]
    return prices[max(fits)[1]] if fits else None


@dataclass
class TeamUsage:
    team: str
    held_gpu_hours: float = 0.0
    busy_gpu_hours: float = 0.0
    idle_held_gpu_hours: float = 0.0
    cost: float | None = 0.0  # None when a model it held has no price
    unpriced: set[str] = field(default_factory=set)
    busy_by_signal: dict[str, float] = field(default_factory=dict)  # GPU-hours per signal

    @property
    def busy_fraction(self) -> float | None:
        return self.busy_gpu_hours / self.held_gpu_hours if self.held_gpu_hours else None

    @property
    def idle_cost(self) -> float | None:
        """The cost of the hours held while idle."""
        if self.cost is None or not self.held_gpu_hours:
            return None if self.cost is None else 0.0
        return self.cost * self.idle_held_gpu_hours / self.held_gpu_hours


@dataclass
class IdleHolder:
    team: str
    namespace: str
    pod: str
    idle_gpu_hours: float


@dataclass
class Report:
    start: float
    end: float
    step_s: float
    teams: list[TeamUsage]  # most GPU-hours held first
    idle_holders: list[IdleHolder]  # most idle GPU-hours first
    times: list[float]  # evaluation times of the series below
    cluster_gpus: list[float]  # GPUs reporting a busy signal (MIG by fraction)
    cluster_held: list[float]
    cluster_busy: list[float]
    team_held: dict[str, list[float]]
    team_busy: dict[str, list[float]]
    signal: str  # the busy signals the devices were judged by (busy.summary_of device-steps)
    currency: str = "USD"

    @property
    def held_gpu_hours(self) -> float:
        return sum(t.held_gpu_hours for t in self.teams)

    @property
    def busy_gpu_hours(self) -> float:
        return sum(t.busy_gpu_hours for t in self.teams)

    @property
    def duty_cycle_only(self) -> bool:
        return self.signal != "none" and "sm_active" not in self.signal


def _kind(labels: Mapping[str, Any]) -> Kind:
    return (labels.get("modelName") or "", labels.get("GPU_I_PROFILE") or "")


class Builder:
    """Folds the answers of every chunk of the window into a Report."""

    def __init__(self, start: float, end: float, step_s: float, prices: Mapping[str, float]):
        self.start, self.end, self.step_s, self.prices = start, end, step_s, prices
        self.teams: dict[str, TeamUsage] = {}
        self.series: dict[str, dict[float, float]] = {"gpus": {}, "held": {}, "busy": {}}
        self.team_held: dict[str, dict[float, float]] = {}
        self.team_busy: dict[str, dict[float, float]] = {}
        self.idle: dict[tuple[str, str, str], float] = {}
        self.signal_steps: dict[str, float] = {}

    def _team(self, labels: Mapping[str, Any]) -> TeamUsage:
        name = labels.get(TEAM) or "-"
        return self.teams.get(name) or self.teams.setdefault(name, TeamUsage(name))

    def _hours(
        self, series: Iterable[Series], each: Callable[[Any, float, float, float], None]
    ) -> None:
        hours = self.step_s / 3600
        for labels, points in series:
            weight = fraction(*_kind(labels))
            for t, v in points:
                each(labels, t, v * weight, v * weight * hours)

    def add_held(self, series: Iterable[Series]) -> None:
        def each(labels: dict[str, Any], t: float, gpus: float, hours: float) -> None:
            team = self._team(labels)
            team.held_gpu_hours += hours
            model = _kind(labels)[0]
            price = price_of(model, self.prices)
            if price is None:
                team.unpriced.add(model or "?")
            elif team.cost is not None:
                team.cost += hours * price
            _add(self.team_held.setdefault(team.team, {}), t, gpus)
            _add(self.series["held"], t, gpus)

        self._hours(series, each)

    def add_busy(self, series: Iterable[Series]) -> None:
        def each(labels: dict[str, Any], t: float, gpus: float, hours: float) -> None:
            team = self._team(labels)
            team.busy_gpu_hours += hours
            name = labels.get(busy.LABEL) or "?"
            team.busy_by_signal[name] = team.busy_by_signal.get(name, 0.0) + hours
            _add(self.team_busy.setdefault(team.team, {}), t, gpus)

        self._hours(series, each)

    def add_idle_held(self, series: Iterable[Series]) -> None:
        def each(labels: dict[str, Any], t: float, gpus: float, hours: float) -> None:
            self._team(labels).idle_held_gpu_hours += hours

        self._hours(series, each)

    def add_devices(self, series: Iterable[Series]) -> None:
        self._hours(series, lambda labels, t, gpus, hours: _add(self.series["gpus"], t, gpus))

    def add_cluster_busy(self, series: Iterable[Series]) -> None:
        self._hours(series, lambda labels, t, gpus, hours: _add(self.series["busy"], t, gpus))

    def add_signals(self, series: Iterable[Series]) -> None:
        """Device-steps judged by each busy signal."""
        for labels, points in series:
            name = labels.get(busy.LABEL) or ""
            self.signal_steps[name] = self.signal_steps.get(name, 0.0) + sum(v for _, v in points)

    def add_idle_holders(self, samples: Iterable[tuple[dict[str, Any], float]]) -> None:
        hours = self.step_s / 3600
        for labels, value in samples:
            key = (labels.get(TEAM) or "-", labels.get("ns") or "-", labels.get("pod") or "-")
            self.idle[key] = self.idle.get(key, 0.0) + value * hours * fraction(*_kind(labels))

    def report(self, top: int, currency: str = "USD") -> Report:
        for team in self.teams.values():
            if team.unpriced:
                team.cost = None
        teams = sorted(self.teams.values(), key=lambda t: (-t.held_gpu_hours, t.team))
        times = sorted(set().union(*(set(s) for s in self.series.values())))
        holders = [IdleHolder(t, ns, pod, h) for (t, ns, pod), h in self.idle.items() if h > 0]
        holders.sort(key=lambda h: (-h.idle_gpu_hours, h.team, h.namespace, h.pod))
        counts = {k: int(round(v)) for k, v in self.signal_steps.items()}
        return Report(
            start=self.start,
            end=self.end,
            step_s=self.step_s,
            teams=teams,
            idle_holders=holders[:top],
            times=times,
            cluster_gpus=[self.series["gpus"].get(t, 0.0) for t in times],
            cluster_held=[self.series["held"].get(t, 0.0) for t in times],
            cluster_busy=[self.series["busy"].get(t, 0.0) for t in times],
            team_held={k: [v.get(t, 0.0) for t in times] for k, v in self.team_held.items()},
            team_busy={k: [v.get(t, 0.0) for t in times] for k, v in self.team_busy.items()},
            signal=busy.summary_of(counts),
            currency=currency,
        )


def _add(into: dict[float, float], t: float, value: float) -> None:
    into[t] = into.get(t, 0.0) + value


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def to_dict(r: Report) -> dict[str, Any]:
    """The `-o json` document."""
    gpus = sum(r.cluster_gpus) * r.step_s / 3600
    return {
        "window": {"start": r.start, "end": r.end, "step_seconds": r.step_s},
        "signal": r.signal,
        "duty_cycle_only": r.duty_cycle_only,
        "currency": r.currency,
        "teams": [
            {
                "team": t.team,
                "held_gpu_hours": _r(t.held_gpu_hours),
                "busy_gpu_hours": _r(t.busy_gpu_hours),
                "idle_held_gpu_hours": _r(t.idle_held_gpu_hours),
                "busy_fraction": _r(t.busy_fraction, 4),
                "cost": _r(t.cost),
                "idle_cost": _r(t.idle_cost),
                "unpriced_models": sorted(t.unpriced),
                "busy_gpu_hours_by_signal": {k: _r(v) for k, v in sorted(t.busy_by_signal.items())},
            }
            for t in r.teams
        ],
        "top_idle_holders": [
            {
                "team": h.team,
                "namespace": h.namespace,
                "pod": h.pod,
                "idle_gpu_hours": _r(h.idle_gpu_hours),
            }
            for h in r.idle_holders
        ],
        "cluster": {
            "gpu_hours": _r(gpus),
            "held_gpu_hours": _r(r.held_gpu_hours),
            "busy_gpu_hours": _r(r.busy_gpu_hours),
            "allocation_fraction": _r(r.held_gpu_hours / gpus, 4) if gpus else None,
            "busy_fraction": _r(sum(r.cluster_busy) * r.step_s / 3600 / gpus, 4) if gpus else None,
            "over_time": [
                {"time": t, "gpus": _r(g, 3), "held": _r(h, 3), "busy": _r(b, 3)}
                for t, g, h, b in zip(r.times, r.cluster_gpus, r.cluster_held, r.cluster_busy)
            ],
        },
    }


CSV_COLUMNS = (
    "team",
    "held_gpu_hours",
    "busy_gpu_hours",
    "idle_held_gpu_hours",
    "busy_fraction",
    "cost",
    "idle_cost",
)


def csv_rows(r: Report) -> list[list[Any]]:
    """The `-o csv` table: one row per team."""
    doc = to_dict(r)
    return [[team[c] for c in CSV_COLUMNS] for team in doc["teams"]]
