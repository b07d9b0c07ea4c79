"""`gpuctl report` against a real Prometheus holding a week of DCGM series (backfilled with
promtool) for several teams: whole GPUs, MIG slices, a time-sliced GPU, nodes with and
without the profiling fields. The figures are checked against tests/report/week.py's
hand-computed ones, within 1 %."""

from __future__ import annotations

import datetime
import json
import math
import time

import pytest

from gpuctl.adapters.prometheus import Prometheus
from gpuctl.dcgm.holders import Exporter
from gpuctl.report import service
from gpuctl.report.core import queries
from tests.clirun import run_gpuctl
from tests.report import week
from tests.standins.prometheus import load_blocks, start_prometheus

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prom():
    real = time.time()
    now = math.floor((real - 150) / week.SAMPLE_S) * week.SAMPLE_S + 150  # on the grid, past
    end = math.floor(now / week.HOUR) * week.HOUR
    data, now = week.series(end, now)
    server = start_prometheus(load_blocks(data, now))
    server.end = end
    yield server
    server.stop()


def _report(prom, **kw):
    request = service.Request(window="7d", step="1h", end=prom.end, **kw)
    client = Prometheus(prom.url, timeout=60)
    return service.report(client, request, Exporter()), client


def test_each_teams_figures_match_the_hand_computed_ones(prom):
    r, _ = _report(prom)
    teams = {t.team: t for t in r.teams}
    assert set(teams) == set(week.EXPECTED)
    for name, (held, busy, idle) in week.EXPECTED.items():
        t = teams[name]
        assert t.held_gpu_hours == pytest.approx(held, rel=0.01), name
        assert t.busy_gpu_hours == pytest.approx(busy, rel=0.01, abs=0.01), name
        assert t.idle_held_gpu_hours == pytest.approx(idle, rel=0.01, abs=0.01), name
        assert t.cost == pytest.approx(week.COST[name], rel=0.01), name
    # ml's H100 on SM_ACTIVE 0.02 reads 100 % GPU_UTIL: by the duty cycle it would be busy
    assert teams["ml"].busy_by_signal["sm_active"] == pytest.approx(
        (0.6 + 0.02) * 168 + 0.3 * 72, rel=0.01
    )
    assert set(teams["research"].busy_by_signal) == {"gpu_util"}
    assert set(teams["infer"].busy_by_signal) == {"gr_engine_active"}
    assert [t.team for t in r.teams][:1] == ["ml"]  # most GPU-hours held first


def test_cluster_allocation_and_busy_over_time(prom):
    r, _ = _report(prom)
    assert len(r.times) == 168
    gpu_hours = sum(r.cluster_gpus) * r.step_s / 3600
    assert gpu_hours == pytest.approx(week.CLUSTER_GPU_HOURS, rel=0.01)
    held = sum(h for h, _, _ in week.EXPECTED.values())
    assert r.held_gpu_hours == pytest.approx(held, rel=0.01)
    # before research lets its GPU go, and after
    first, last = r.cluster_held[0], r.cluster_held[-1]
    assert first == pytest.approx(2 + 1 + 5 / 7 + 1, rel=0.01)
    assert last == pytest.approx(2 + 5 / 7 + 1, rel=0.01)
    # device-steps: 3 devices by SM activity, 2 MIG devices by engine activity, 3 by GPU_UTIL
    assert r.signal == f"sm_active {3 * 168}, gr_engine_active {2 * 168}, gpu_util {3 * 168}"


def test_teams_by_a_pod_label_from_kube_state_metrics(prom):
    r, _ = _report(prom, by=queries.grouping("label", "team"))
    held = {t.team: t.held_gpu_hours for t in r.teams}
    assert held == pytest.approx(week.BY_LABEL, rel=0.01)


def test_the_top_idle_holders(prom):
    r, _ = _report(prom, top=3)
    found = [(h.namespace, h.pod, round(h.idle_gpu_hours, 1)) for h in r.idle_holders]
    assert found == [("ml", "train-1", 168.0), ("infer", "b", 24.0)]


def test_the_window_is_cut_under_the_sample_limit(prom):
    # 18 raw busy-signal series now: a budget of 1,152 points is 32 steps a query (twice
    # the series, for those that come and go), 168 steps in 6 chunks of 7 queries each
    whole, client = _report(prom)
    sent = client.queries_sent
    cut, client = _report(prom, sample_budget=1152)
    assert (sent, client.queries_sent) == (1 + 7, 1 + 6 * 7)  # the series count once
    assert [t.held_gpu_hours for t in cut.teams] == pytest.approx(
        [t.held_gpu_hours for t in whole.teams]
    )


def test_a_bad_end_time_is_a_usage_error(prom, capsys):
    code, _, err = run_gpuctl(capsys, "report", "--prometheus", prom.url, "--end", "monday")
    assert code == 2 and "--end: 'monday' is not a time" in err
    assert service.end_time("2026-12-01T00:00:00Z") == service.end_time("1796083200")


def test_no_series_at_the_end_time_says_so(prom, capsys):
    code, _, err = run_gpuctl(
        capsys, "report", "--prometheus", prom.url, "--end", str(prom.end - 30 * 86400)
    )
    assert code == 1 and "no busy-signal series" in err and "at --end" in err


def test_chunks_cover_every_step_once():
    assert queries.chunks(0, 10, 1, 4) == [(1, 4), (5, 8), (9, 10)]
    assert queries.chunks(0, 10, 1, 100) == [(1, 10)]
    assert queries.max_steps(10**9) == 1 and queries.max_steps(1) == queries.MAX_POINTS - 1


def test_the_cli_json_and_csv(prom, capsys):
    code, out, err = run_gpuctl(
        capsys,
        "report",
        "--prometheus",
        prom.url,
        "--window",
        "7d",
        "--step",
        "1h",
        "--end",
        str(prom.end),
        "-o",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert {t["team"] for t in doc["teams"]} == set(week.EXPECTED)
    assert doc["signal"].startswith("sm_active") and doc["duty_cycle_only"] is False
    assert doc["cluster"]["allocation_fraction"] == pytest.approx(
        sum(h for h, _, _ in week.EXPECTED.values()) / week.CLUSTER_GPU_HOURS, rel=0.02
    )
    # the window pinned as RFC 3339: the series were written up to the fixture's start, and
    # an xdist worker may come to this test long after (Prometheus looks back 5 minutes)
    iso = datetime.datetime.fromtimestamp(prom.end, datetime.timezone.utc).isoformat()
    code, out, err = run_gpuctl(
        capsys, "report", "--prometheus", prom.url, "--step", "1h", "--end", iso, "-o", "csv"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("team,held_gpu_hours,busy_gpu_hours")
    assert len(lines) == 1 + len(week.EXPECTED)


def test_the_table_names_the_signal(prom, capsys):
    code, out, err = run_gpuctl(
        capsys, "report", "--prometheus", prom.url, "--step", "1h", "--end", str(prom.end)
    )
    assert code == 0, err
    assert "busy signal: sm_active" in out and "train-1" in out


def _chromium() -> str:
    import shutil

    from tests.standins import missing

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        missing("chromium not installed (Debian: apt-get install chromium; `make system-deps`)")
    return path


def test_the_html_page_opens_in_headless_chromium_and_shows_the_plots(prom, capsys, tmp_path):
    import subprocess

    from PIL import Image

    page = tmp_path / "report.html"
    code, _, err = run_gpuctl(
        capsys,
        "report",
        "--prometheus",
        prom.url,
        "--step",
        "1h",
        "--end",
        str(prom.end),
        "--html",
        str(page),
    )
    assert code == 0, err
    text = page.read_text()
    # self-contained: no script, nothing fetched (the SVG namespace is a name, not a fetch)
    assert "<script" not in text and " src=" not in text and 'href="http' not in text
    assert text.count("<svg") == 1 + len(week.EXPECTED)  # the cluster's plot, one per team
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--user-data-dir=" + str(tmp_path / "profile"),
            "--window-size=1200,2400",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), proc.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    data = image.tobytes()
    pixels = list(zip(data[0::3], data[1::3], data[2::3]))
    white = sum(1 for p in pixels if p == (255, 255, 255))
    assert white < 0.95 * len(pixels)  # not blank
    # the plots' lines are drawn: matplotlib's blue (held) and green (busy)
    held = sum(1 for r, g, b in pixels if abs(r - 31) < 40 and abs(g - 119) < 40 and b > 150)
    busy = sum(1 for r, g, b in pixels if r < 90 and g > 130 and b < 90)
    assert held > 500 and busy > 200, (held, busy)


def test_only_html_imports_the_plotting_library(prom):
    import subprocess
    import sys

    from tests import ROOT

    code = (
        "import sys; from gpuctl.app import entry; sys.argv = ['gpuctl', 'report', "
        f"'--prometheus', {prom.url!r}, '--step', '1h', '--end', '{prom.end}', '-o', 'json']\n"
        "try:\n    entry()\nexcept SystemExit:\n    pass\n"
        "print('matplotlib' in sys.modules, file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.stderr.strip().splitlines()[-1] == "False", proc.stderr
    assert '"teams"' in proc.stdout
