"""The showback's aggregation and its HTML page, on Reports built from answers shaped as
Prometheus gives them (queries.py's labels): teams beyond --teams summed as others, only
the window's points counted, the page bounded and hostile names drawn as text."""

from __future__ import annotations

import re
import time

import pytest

from gpuctl.report import page
from gpuctl.report.core import showback
from gpuctl.report.core.queries import TEAM

H100 = "NVIDIA H100 80GB HBM3"
PRICES = {"H100": 12.0}
STEP = 300.0
START, END = 1_796_083_200.0, 1_796_083_200.0 + 86400  # a day, 288 steps


def _series(team: str, value: float, times, model: str = H100, **extra):
    labels = {TEAM: team, "modelName": model, "GPU_I_PROFILE": "", **extra}
    return labels, [(t, value) for t in times]


def _report(teams: dict[str, tuple[float, float, float]], keep=20, times=None, top=10, **kw):
    """A Report from per-team (GPUs held, busy, idle-held) constant over TIMES."""
    times = times if times is not None else [START + STEP * (k + 1) for k in range(288)]
    b = showback.Builder(START, END, STEP, kw.pop("prices", PRICES))
    b.add_held([_series(n, h, times) for n, (h, _, _) in teams.items()])
    b.add_busy([_series(n, busy, times, signal="sm_active") for n, (_, busy, _) in teams.items()])
    b.add_idle_held([_series(n, i, times) for n, (_, _, i) in teams.items()])
    gpus = sum(h for h, _, _ in teams.values()) + 2
    b.add_devices([({"modelName": H100, "GPU_I_PROFILE": ""}, [(t, gpus) for t in times])])
    b.add_cluster_busy([_series("-", sum(x for _, x, _ in teams.values()), times)])
    b.add_signals([({"signal": "sm_active"}, [(t, gpus) for t in times])])
    for name, (_, _, idle) in teams.items():
        if idle:
            b.add_idle_holders(
                [({TEAM: name, "ns": name, "pod": "p", "modelName": H100}, 288 * idle)]
            )
    return b.report(top, teams=keep, **kw)


def test_teams_beyond_the_limit_are_summed_as_others():
    teams = {f"team-{i:02d}": (float(i + 1), i / 2, 0.5) for i in range(30)}
    r = _report(teams, keep=5)
    assert [t.team for t in r.teams] == [f"team-{i:02d}" for i in (29, 28, 27, 26, 25)]
    assert r.others is not None and r.others.teams == 25 and r.team_count == 30
    assert r.others.held_gpu_hours == pytest.approx(sum(range(1, 26)) * 24)
    assert r.held_gpu_hours == pytest.approx(sum(range(1, 31)) * 24)  # nothing lost
    assert r.idle_cost == pytest.approx(30 * 0.5 * 24 * 12.0)
    doc = showback.to_dict(r)
    assert len(doc["teams"]) == 5 and doc["others"]["teams"] == 25 and doc["team_count"] == 30
    rows = showback.csv_rows(r)
    assert len(rows) == 6 and rows[-1][0] == "25 other teams"
    assert showback.to_dict(_report(dict(list(teams.items())[:20])))["others"] is None


def test_an_unpriced_team_leaves_the_others_and_the_idle_cost_unpriced():
    teams = {"a": (1.0, 0.5, 0.2), "b": (0.5, 0.0, 0.5)}
    r = _report(teams, keep=1, prices={})
    assert r.others is not None and r.others.cost is None and r.idle_cost is None
    assert r.others.unpriced == {H100}


def test_only_the_window_is_counted():
    inside = [START + STEP * (k + 1) for k in range(288)]
    before = [START - STEP * k for k in range(24)]  # history before the window
    after = [END + STEP * (k + 1) for k in range(3)]
    r = _report({"a": (1.0, 0.5, 0.0)}, times=before + inside + after)
    assert r.teams[0].held_gpu_hours == pytest.approx(24.0)
    assert r.times[0] > r.start and r.times[-1] <= r.end and len(r.times) == 288


def test_the_idle_cost_prices_the_idle_hours_of_each_model():
    b = showback.Builder(START, END, STEP, {"H100": 12.0, "L4": 2.0})
    times = [START + STEP * (k + 1) for k in range(288)]
    b.add_held([_series("a", 1, times), _series("a", 1, times, model="NVIDIA L4")])
    b.add_idle_held([_series("a", 1, times)])  # the H100 idle, the L4 busy
    t = b.report(10).teams[0]
    assert t.cost == pytest.approx(24 * 14.0) and t.idle_cost == pytest.approx(24 * 12.0)


HOSTILE = ["a$\\macro$b", "$x^2$", "<script>alert(1)</script>", "&amp;", "a\x1b[31mred", "_hidden"]


@pytest.mark.integration  # matplotlib runs fc-list to find its fonts
def test_hostile_team_names_are_drawn_as_text_and_escaped():
    teams = {name: (1.0 + i, 0.5, 0.5) for i, name in enumerate(HOSTILE)}
    r = _report(teams)
    text = page.html_page(r)  # mathtext would raise on \macro
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "a$\\macro$b" in text  # in the table and as the bar's label, a dollar sign
    assert len(re.findall(r"<text[^>]*>[^<]*a\$\\macro\$b", text)) == 1
    assert "\x1b" not in text


@pytest.mark.integration  # matplotlib runs fc-list to find its fonts
def test_the_page_stays_under_1_mb_for_10000_teams_and_long_names():
    names = [f"team-{i:05d}-" + "&" * 200 for i in range(10_000)]
    teams = {n: (1.0 + i % 7, 0.5, 0.25) for i, n in enumerate(names)}
    r = _report(teams, keep=1000, top=1000)
    began = time.perf_counter()
    text = page.html_page(r)
    took = time.perf_counter() - began
    assert len(text.encode()) < 1 << 20, len(text)
    assert took < 30, took  # about 2 s here; matplotlib's import included
    assert (
        text.count("<tr") == 1 + 1000 + 1 + 1 + 1 + page.PAGE_HOLDERS
    )  # heads, rows, others, total
    assert "9,000 other teams" in text


def test_a_week_of_steps_is_drawn_with_a_bounded_line():
    times = [START + 60 * (k + 1) for k in range(1440)]  # a day at 1-minute steps
    b = showback.Builder(START, END, 60, PRICES)
    b.add_devices([({"modelName": H100, "GPU_I_PROFILE": ""}, [(t, 4) for t in times])])
    r = b.report(10)
    assert len(r.times) == 1440
    assert len(page.downsampled(r.cluster_gpus)) <= page.CHART_POINTS
    assert page.downsampled([1, 2, 3, 4], 2) == [1.5, 3.5]


@pytest.mark.integration  # matplotlib runs fc-list to find its fonts
def test_the_body_speaks_plain_words_and_the_footnote_names_the_metric():
    text = page.html_page(_report({"ml": (2.0, 1.0, 0.5), "web": (1.0, 1.0, 0.0)}))
    body, _, notes = text.partition("<footer>")
    assert re.search(r"<text[^>]*>no idle hours<", body) and "0.0 h idle" not in body
    for word in ("DCGM_", "sm_active", "gpu_util", "gr_engine", "SM_ACTIVE"):
        assert word not in body, word
    assert "DCGM_FI_PROF_SM_ACTIVE" in notes and "SM activity" in notes
    assert body.index('id="headline"') < body.index("<table")  # headline totals first


@pytest.mark.integration  # matplotlib runs fc-list to find its fonts
def test_the_headline_says_when_dra_devices_count_unheld():
    r = _report({"ml": (2.0, 1.0, 0.5)})
    assert "through DRA" not in page.html_page(r)
    r.dra_unlabelled = 2
    headline = page.html_page(r).partition('id="headline"')[2].partition("</section>")[0]
    assert "2 devices the cluster allocates through DRA now are counted as unheld" in headline
