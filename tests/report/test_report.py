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


def test_chunk_sizes_stay_within_prometheus_limits():
    assert queries.max_steps(10**9) == 1 and queries.max_steps(1) == queries.MAX_POINTS - 1
    assert queries.max_steps(20_000) == 25  # 10,000 GPUs with two busy-signal fields


TIMED_OUT = json.dumps(
    {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}
)  # Prometheus's answer past its --query.timeout (web/api/v1: errorTimeout, HTTP 503)


def test_a_chunk_prometheus_cannot_finish_in_time_is_asked_again_in_halves(prom, fault_proxy):
    from tests.standins.faults import reply

    whole, _ = _report(prom)
    proxy = fault_proxy(prom.url)
    proxy.on("POST", "/api/v1/query_range", reply(503, TIMED_OUT), nth=1, times=1)
    request = service.Request(window="7d", step="1h", end=prom.end)
    halved = service.report(Prometheus(proxy.url, timeout=60), request, Exporter())
    assert [(t.team, t.held_gpu_hours, t.idle_held_gpu_hours) for t in halved.teams] == [
        (t.team, t.held_gpu_hours, t.idle_held_gpu_hours) for t in whole.teams
    ]
    assert halved.times == whole.times
    # the refused 168 steps, then two chunks of 84: six range queries each
    assert len(proxy.seen("POST", "/api/v1/query_range")) == 1 + 2 * 6


def test_a_step_prometheus_cannot_finish_in_time_is_a_clear_error(prom, fault_proxy, capsys):
    from tests.standins.faults import reply

    proxy = fault_proxy(prom.url)
    proxy.on("POST", "/api/v1/query_range", reply(503, TIMED_OUT), nth=None)
    code, _, err = run_gpuctl(
        capsys, "report", "--prometheus", proxy.url, "--window", "4h", "--step", "1h",
        "--end", str(prom.end),
    )  # fmt: skip
    assert code == 1 and "query timed out" in err and "(one 1h step" in err, err
    assert "--query.timeout" in err
    # 4 steps, 2, 1: then nothing shorter is left to ask
    assert len(proxy.seen("POST", "/api/v1/query_range")) == 3


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


def _screenshot(page, tmp_path, height: int) -> list[tuple[int, int, int]]:
    """The page as headless Chromium shows it in a window 1400 px wide: its pixels."""
    import subprocess

    from PIL import Image

    shot = tmp_path / f"shot-{page.stem}-{height}.png"
    proc = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--user-data-dir=" + str(tmp_path / "profile"),
            f"--window-size=1400,{height}",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), proc.stderr[-2000:]
    data = Image.open(shot).convert("RGB").tobytes()
    return list(zip(data[0::3], data[1::3], data[2::3]))


HEADLINE = (0xEE, 0xF3, 0xF8)  # the headline's background (gpuctl/report/page.py), only there


def test_the_html_page_a_manager_forwards(prom, capsys, tmp_path):
    page = tmp_path / "report.html"
    code, _, err = run_gpuctl(
        capsys, "report", "--prometheus", prom.url, "--end", str(prom.end), "--html", str(page)
    )
    assert code == 0, err
    text = page.read_text()
    # self-contained: no script, nothing fetched (the SVG namespace is a name, not a fetch)
    assert "<script" not in text and " src=" not in text and 'href="http' not in text
    assert text.count("<svg") == 2  # the cluster over the window, the teams' hours
    headline = text[text.index('<section id="headline"') : text.index("</section>")]
    held = sum(h for h, _, _ in week.EXPECTED.values())
    assert f">{held:,.0f}<" in headline and ">192<" in headline  # held, idle GPU-hours
    assert "2,187.62 USD" in headline  # the idle hours' cost: ml's 168 h of H100, infer's 24
    # above the fold at 1400 x 900: the headline's background fills a good part of it
    fold = _screenshot(page, tmp_path, 900)
    assert sum(1 for p in fold if p == HEADLINE) > 50_000
    # ... which a headline pushed below the fold does not
    pushed = tmp_path / "pushed.html"
    pushed.write_text(
        text.replace(
            '<section id="headline"', '<div style="height:900px"></div>\n<section id="headline"'
        )
    )
    assert sum(1 for p in _screenshot(pushed, tmp_path, 900) if p == HEADLINE) < 1_000
    # the charts are drawn: held (light blue), busy (green), idle (orange)
    pixels = _screenshot(page, tmp_path, 2400)
    held_px = sum(1 for p in pixels if p == (0x9E, 0xCA, 0xE1))
    busy_px = sum(1 for p in pixels if p == (0x2C, 0xA0, 0x2C))
    idle_px = sum(1 for p in pixels if p == (0xE6, 0x55, 0x0D))
    assert held_px > 20_000 and busy_px > 20_000 and idle_px > 5_000, (held_px, busy_px, idle_px)


def test_teams_beyond_teams_are_one_row_of_others(prom, capsys):
    code, out, err = run_gpuctl(
        capsys, "report", "--prometheus", prom.url, "--step", "1h", "--end", str(prom.end),
        "--teams", "2", "-o", "json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert [t["team"] for t in doc["teams"]] == [
        "ml",
        "chat",
    ]  # most held; chat before research by name
    assert doc["others"]["teams"] == 3 and doc["team_count"] == 5
    others = sum(week.EXPECTED[n][0] for n in ("research", "speech", "infer"))
    assert doc["others"]["held_gpu_hours"] == pytest.approx(others, rel=0.01)
    assert doc["cluster"]["held_gpu_hours"] == pytest.approx(
        sum(h for h, _, _ in week.EXPECTED.values()), rel=0.01
    )


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
