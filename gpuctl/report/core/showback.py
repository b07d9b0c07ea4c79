"""Per-team GPU showback from the answers of queries.py: GPU-hours held, busy, idle-held,
cost, and the cluster's allocation and busy fraction over time. Pure.

Bounded whatever the cluster: a team is a handful of running totals (no series of its own),
the cluster's series have one point per step of the window, and the report keeps the
`teams` teams that held the most GPU-hours one by one and sums the rest as `others`.

A device kind is a (modelName, GPU_I_PROFILE) pair: a whole GPU counts 1, a MIG device its
compute slices over the GPU's (gpuctl.gpus.geometry; 1g of 7 is 1/7). Cost is GPU-hours
held × the model's price per GPU-hour (a MIG slice at its fraction of it), the idle cost
its idle-held GPU-hours so priced."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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
    idle_cost: float | None = 0.0  # the idle-held hours at their model's price
    unpriced: set[str] = field(default_factory=set)
    busy_by_signal: dict[str, float] = field(default_factory=dict)  # GPU-hours per signal
    teams: int = 1  # how many teams these figures sum (more than 1: the others)

    @property
    def busy_fraction(self) -> float | None:
        return self.busy_gpu_hours / self.held_gpu_hours if self.held_gpu_hours else None


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
    teams: list[TeamUsage]  # the teams that held the most GPU-hours, most first
    others: TeamUsage | None  # the sum of the teams beyond those (None: there were none)
    idle_holders: list[IdleHolder]  # most idle GPU-hours first
    times: list[float]  # evaluation times of the series below, inside (start, end]
    cluster_gpus: list[float]  # GPUs reporting a busy signal (MIG by fraction)
    cluster_held: list[float]
    cluster_busy: list[float]
    signal: str  # the busy signals the devices were judged by (busy.summary_of device-steps)
    currency: str = "USD"
    idle_threshold: float = 5.0  # percent
    device_steps: dict[str, int] = field(default_factory=dict)  # by busy signal
    # devices the cluster's ResourceClaims allocate now whose series name no pod (dcgm-exporter
    # without --kubernetes-enable-dra; MIG devices): counted as unheld
    dra_unlabelled: int = 0

    @property
    def every_team(self) -> list[TeamUsage]:
        """The teams shown one by one, then the others' sum."""
        return self.teams + ([self.others] if self.others else [])

    @property
    def team_count(self) -> int:
        return sum(t.teams for t in self.every_team)

    @property
    def held_gpu_hours(self) -> float:
        return sum(t.held_gpu_hours for t in self.every_team)

    @property
    def busy_gpu_hours(self) -> float:
        return sum(t.busy_gpu_hours for t in self.every_team)

    @property
    def idle_held_gpu_hours(self) -> float:
        return sum(t.idle_held_gpu_hours for t in self.every_team)

    @property
    def idle_cost(self) -> float | None:
        """The cost of every idle-held hour; None when a team held an unpriced model."""
        costs = [t.idle_cost for t in self.every_team]
        return None if None in costs else sum(c or 0.0 for c in costs)

    @property
    def gpu_hours(self) -> float:
        """GPU-hours of every device that reported a busy signal, held or not."""
        return sum(self.cluster_gpus) * self.step_s / 3600

    @property
    def duty_cycle_only(self) -> bool:
        return self.signal != "none" and "sm_active" not in self.signal


def others_of(teams: list[TeamUsage]) -> TeamUsage | None:
    """One TeamUsage summing TEAMS (None for none): cost unknown if any is."""
    if not teams:
        return None
    out = TeamUsage(f"{sum(t.teams for t in teams):,} other teams", teams=0)
    for t in teams:
        out.teams += t.teams
        out.held_gpu_hours += t.held_gpu_hours
        out.busy_gpu_hours += t.busy_gpu_hours
        out.idle_held_gpu_hours += t.idle_held_gpu_hours
        out.unpriced |= t.unpriced
        out.cost = _plus(out.cost, t.cost)
        out.idle_cost = _plus(out.idle_cost, t.idle_cost)
        for name, hours in t.busy_by_signal.items():
            out.busy_by_signal[name] = out.busy_by_signal.get(name, 0.0) + hours
    return out


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _kind(labels: Mapping[str, Any]) -> Kind:
    return (labels.get("modelName") or "", labels.get("GPU_I_PROFILE") or "")


class Builder:
    """Folds the answers of every chunk of the window into a Report. A point outside the
    window, (start, end], is not counted: the report is the window's and nothing else."""

    def __init__(self, start: float, end: float, step_s: float, prices: Mapping[str, float]):
        self.start, self.end, self.step_s, self.prices = start, end, step_s, prices
        self.teams: dict[str, TeamUsage] = {}
        self.series: dict[str, dict[float, float]] = {"gpus": {}, "held": {}, "busy": {}}
        self.idle: dict[tuple[str, str, str], float] = {}
        self.signal_steps: dict[str, float] = {}
        self._prices: dict[str, float | None] = {}  # price_of, once per model

    def _team(self, labels: Mapping[str, Any]) -> TeamUsage:
        name = labels.get(TEAM) or "-"
        return self.teams.get(name) or self.teams.setdefault(name, TeamUsage(name))

    def _price(self, model: str) -> float | None:
        if model not in self._prices:
            self._prices[model] = price_of(model, self.prices)
        return self._prices[model]

    def _gpus(
        self, series: Iterable[Series], over_time: dict[float, float] | None = None
    ) -> list[tuple[dict[str, Any], float]]:
        """Each series' labels and its GPUs summed over the window's steps (a MIG device
        by its fraction), its GPUs added to OVER_TIME at each step."""
        start, end = self.start, self.end
        out = []
        for labels, points in series:
            weight = fraction(*_kind(labels))
            total = 0.0
            for t, v in points:
                if start < t <= end:
                    total += v
                    if over_time is not None:
                        over_time[t] = over_time.get(t, 0.0) + v * weight
            out.append((labels, total * weight))
        return out

    def add_held(self, series: Iterable[Series]) -> None:
        hours = self.step_s / 3600
        for labels, gpus in self._gpus(series, self.series["held"]):
            team = self._team(labels)
            team.held_gpu_hours += gpus * hours
            model = _kind(labels)[0]
            price = self._price(model)
            if price is None:
                team.unpriced.add(model or "?")
            elif team.cost is not None:
                team.cost += gpus * hours * price

    def add_busy(self, series: Iterable[Series]) -> None:
        hours = self.step_s / 3600
        for labels, gpus in self._gpus(series):
            team = self._team(labels)
            team.busy_gpu_hours += gpus * hours
            name = labels.get(busy.LABEL) or "?"
            team.busy_by_signal[name] = team.busy_by_signal.get(name, 0.0) + gpus * hours

    def add_idle_held(self, series: Iterable[Series]) -> None:
        hours = self.step_s / 3600
        for labels, gpus in self._gpus(series):
            team = self._team(labels)
            team.idle_held_gpu_hours += gpus * hours
            price = self._price(_kind(labels)[0])
            if price is not None and team.idle_cost is not None:
                team.idle_cost += gpus * hours * price

    def add_devices(self, series: Iterable[Series]) -> None:
        self._gpus(series, self.series["gpus"])

    def add_cluster_busy(self, series: Iterable[Series]) -> None:
        self._gpus(series, self.series["busy"])

    def add_signals(self, series: Iterable[Series]) -> None:
        """Device-steps judged by each busy signal."""
        for labels, points in series:
            name = labels.get(busy.LABEL) or ""
            steps = sum(v for t, v in points if self.start < t <= self.end)
            self.signal_steps[name] = self.signal_steps.get(name, 0.0) + steps

    def add_idle_holders(self, samples: Iterable[tuple[dict[str, Any], float]]) -> None:
        hours = self.step_s / 3600
        for labels, value in samples:
            key = (labels.get(TEAM) or "-", labels.get("ns") or "-", labels.get("pod") or "-")
            self.idle[key] = self.idle.get(key, 0.0) + value * hours * fraction(*_kind(labels))

    def report(
        self, top: int, currency: str = "USD", teams: int = 20, idle_threshold: float = 5.0
    ) -> Report:
        """The Report: TEAMS teams one by one (those that held the most), the rest summed."""
        for team in self.teams.values():
            if team.unpriced:
                team.cost = team.idle_cost = None
        ranked = sorted(self.teams.values(), key=lambda t: (-t.held_gpu_hours, t.team))
        times = sorted(set().union(*(set(s) for s in self.series.values())))
        holders = [IdleHolder(t, ns, pod, h) for (t, ns, pod), h in self.idle.items() if h > 0]
        holders.sort(key=lambda h: (-h.idle_gpu_hours, h.team, h.namespace, h.pod))
        counts = {k: int(round(v)) for k, v in self.signal_steps.items()}
        return Report(
            start=self.start,
            end=self.end,
            step_s=self.step_s,
            teams=ranked[:teams],
            others=others_of(ranked[teams:]),
            idle_holders=holders[:top],
            times=times,
            cluster_gpus=[self.series["gpus"].get(t, 0.0) for t in times],
            cluster_held=[self.series["held"].get(t, 0.0) for t in times],
            cluster_busy=[self.series["busy"].get(t, 0.0) for t in times],
            signal=busy.summary_of(counts),
            currency=currency,
            idle_threshold=idle_threshold,
            device_steps=counts,
        )


def _add(into: dict[float, float], t: float, value: float) -> None:
    into[t] = into.get(t, 0.0) + value


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _team_dict(t: TeamUsage) -> dict[str, Any]:
    return {
        "held_gpu_hours": _r(t.held_gpu_hours),
        "busy_gpu_hours": _r(t.busy_gpu_hours),
        "idle_held_gpu_hours": _r(t.idle_held_gpu_hours),
        "busy_fraction": _r(t.busy_fraction, 4),
        "cost": _r(t.cost),
        "idle_cost": _r(t.idle_cost),
        "unpriced_models": sorted(t.unpriced),
        "busy_gpu_hours_by_signal": {k: _r(v) for k, v in sorted(t.busy_by_signal.items())},
    }


def to_dict(r: Report) -> dict[str, Any]:
    """The `-o json` document."""
    gpus = r.gpu_hours
    return {
        "window": {"start": r.start, "end": r.end, "step_seconds": r.step_s},
        "signal": r.signal,
        "duty_cycle_only": r.duty_cycle_only,
        "idle_threshold_percent": r.idle_threshold,
        "currency": r.currency,
        "dra_devices_unlabelled": r.dra_unlabelled,
        "team_count": r.team_count,
        "teams": [{"team": t.team, **_team_dict(t)} for t in r.teams],
        "others": None if r.others is None else {"teams": r.others.teams, **_team_dict(r.others)},
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
            "idle_held_gpu_hours": _r(r.idle_held_gpu_hours),
            "idle_cost": _r(r.idle_cost),
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
    """The `-o csv` table: one row per team, then one for the others (named "N other
    teams", which no namespace or label value can be)."""
    return [[t.team, *(_team_dict(t)[c] for c in CSV_COLUMNS[1:])] for t in r.every_team]
