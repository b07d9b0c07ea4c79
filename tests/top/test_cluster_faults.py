"""`gpuctl top --prometheus` against a real Prometheus behind a fault-injecting proxy:
malformed answers, a server that trickles, redirects, credentials in the URL. Every failure
is one error line (plus a hint), never a traceback, and never shows a password."""

import json
import os
import time
from dataclasses import replace

import pytest

from tests.clirun import run_gpuctl as gpuctl
from tests.cluster_data import gpu
from tests.standins.faults import redirect, reply, stall_midway, trickle
from tests.standins.prometheus import free_port

QUERY = "/api/v1/query"

pytestmark = pytest.mark.integration  # Prometheus, the proxy, free ports


@pytest.fixture
def prom(prometheus_with):
    return prometheus_with(gpu("Hostname", "node-a", 0, 90, pod="train-0", namespace="ml"))


def one_error_line(code, out, err, exit_code, *fragments):
    assert code == exit_code, err
    assert "Traceback" not in err and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("gpuctl: error: ") and len(lines) <= 2, err
    assert all(line.startswith("  hint: ") for line in lines[1:]), err
    for f in fragments:
        assert f in lines[0], err


def vector(result) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


@pytest.mark.parametrize(
    "body, fragment",
    [
        (vector([1, 2]), "malformed sample: expected an object, got int"),
        (vector([{"metric": {"gpu": 3}, "value": [1, "5"]}]), "label gpu is int, not text"),
        (vector([{"metric": ["gpu"], "value": [1, "5"]}]), "labels are list, not an object"),
        (vector([{"metric": {}, "value": "5"}]), "value is not a [time, value] pair"),
        (vector([{"metric": {}, "value": [1, {"a": 1}]}]), "value is dict, not a number"),
        (vector([{"metric": {}, "value": [1, "lots"]}]), "value 'lots' is not a number"),
        (vector({"gpu": "0"}), "malformed sample"),
        ('{"status": "success", "data": [1]}', "unexpected answer"),
        ('{"status": "success", "data": {"resultType": {"x": [1]}}}', "unexpected answer"),
        ('{"status": "error", "errorType": {"a": 1}, "error": [1]}', "rejected a query"),
        ("[" * 100_000 + "]" * 100_000, "did not answer like a Prometheus server"),
        ('"success"', "did not answer like a Prometheus server"),
        ("null", "did not answer like a Prometheus server"),
        ("<html><body>Sign in</body></html>", "did not answer like a Prometheus server"),
    ],
    ids=[
        "non-object-results",
        "non-string-label",
        "labels-not-object",
        "value-not-pair",
        "value-object",
        "value-text",
        "result-not-list",
        "data-not-object",
        "result-type-object",
        "error-of-odd-types",
        "deeply-nested",
        "a-string",
        "null",
        "html",
    ],
)
def test_malformed_answers_are_one_error_line(prom, fault_proxy, capsys, body, fragment):
    proxy = fault_proxy(prom.url)
    proxy.on("POST", QUERY, reply(200, body), nth=None)
    code, out, err = gpuctl(capsys, "top", "--prometheus", proxy.url, "--once", "-o", "json")
    one_error_line(code, out, err, 1, fragment)


@pytest.mark.parametrize(
    "status, kind, said, hint",
    [
        (400, "bad_data", "1:5: parse error: unexpected <EOF>", "a bug in gpuctl"),
        # what Prometheus answers while its TSDB closes (seen shutting down under load)
        (422, "execution", "open block querier for block 01J: mmap files", "see its log"),
    ],
    ids=["bad-query", "storage"],
)
def test_a_refused_query_says_whose_fault_it_may_be(
    prom, fault_proxy, capsys, status, kind, said, hint
):
    """Prometheus's API errors (web/api/v1 errorType): bad_data is gpuctl's query; an
    execution error may be Prometheus's own (its storage) or the data's shape."""
    proxy = fault_proxy(prom.url)
    body = json.dumps({"status": "error", "errorType": kind, "error": said})
    proxy.on("POST", QUERY, reply(status, body), nth=None)
    code, out, err = gpuctl(capsys, "top", "--prometheus", proxy.url, "--once", "-o", "json")
    one_error_line(code, out, err, 1, f"HTTP {status}", said)
    assert hint in err.splitlines()[1]


def test_a_server_that_trickles_its_answer_is_cut_off_at_the_deadline(
    prom, fault_proxy, capsys, monkeypatch
):
    proxy = fault_proxy(prom.url)
    proxy.on("POST", QUERY, trickle(forward=True, every_s=2), nth=None)
    monkeypatch.setenv("GPUCTL_REQUEST_TIMEOUT", "3")
    started = time.monotonic()
    code, out, err = gpuctl(capsys, "top", "--prometheus", proxy.url, "--once")
    took = time.monotonic() - started
    one_error_line(code, out, err, 1, f"Prometheus at {proxy.url} did not answer within 3 s")
    assert took < 6, took  # three queries in parallel, each cut off after 3 s
    assert len(proxy.seen("POST", QUERY)) == 3


def test_an_answer_that_stalls_halfway_is_a_timeout_not_a_malformed_answer(
    prom, fault_proxy, capsys, monkeypatch
):
    """Decoded as it arrives, an answer cut off by the deadline looks cut short: the error
    must still say the deadline passed."""
    proxy = fault_proxy(prom.url)
    proxy.on("POST", QUERY, stall_midway(), nth=None)
    monkeypatch.setenv("GPUCTL_REQUEST_TIMEOUT", "2")
    code, out, err = gpuctl(capsys, "top", "--prometheus", proxy.url, "--once", "-o", "json")
    one_error_line(code, out, err, 1, f"Prometheus at {proxy.url} did not answer within 2 s")


def test_the_default_deadline_bounds_a_trickle_too(prom, fault_proxy, capsys):
    proxy = fault_proxy(prom.url)
    proxy.on("POST", QUERY, trickle(forward=True, every_s=2), nth=None)
    started = time.monotonic()
    code, out, err = gpuctl(capsys, "top", "--prometheus", proxy.url, "--once", "-o", "json")
    assert time.monotonic() - started < 20
    one_error_line(code, out, err, 1, "did not answer within 10 s")


def huge(series: list) -> list:
    """A device whose readings are near the float maximum (a broken exporter)."""
    big = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"}
    return [replace(s, value=1.7e308) if s.name in big else s for s in series]


def test_values_near_float_max_never_make_json_print_infinity(prometheus_with, capsys):
    """Sums of readings near the float maximum (used + free memory, a namespace's GPUs)
    overflow to infinity: -o json must stay JSON (null there), not print Infinity."""
    server = prometheus_with(
        huge(gpu("Hostname", "node-a", 0, 50, pod="a", namespace="ml"))
        + huge(gpu("Hostname", "node-a", 1, 50, pod="b", namespace="ml"))
    )
    code, out, err = gpuctl(capsys, "top", "--prometheus", server.url, "--once", "-o", "json")
    assert code == 0, err
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON output"))
    gpus = {g["gpu"]: g for g in doc["gpus"]}
    assert gpus["0"]["memory_used_mib"] == int(1.7e308)  # big but finite: kept
    assert gpus["0"]["memory_total_mib"] is None  # used + free overflowed: null
    code, out, err = gpuctl(capsys, "top", "--prometheus", server.url, "--once")
    assert code == 0 and "node-a" in out, err  # the table copes too


def test_credentials_in_the_url_never_appear_in_a_message(capsys):
    port = free_port()
    code, out, err = gpuctl(
        capsys, "top", "--prometheus", f"http://admin:s3cr3t@127.0.0.1:{port}", "--once"
    )
    one_error_line(code, out, err, 1, f"cannot reach Prometheus at http://127.0.0.1:{port}")
    code, out, err = gpuctl(capsys, "top", "--prometheus", "http://admin:s3cr3t@h:99999", "--once")
    one_error_line(code, out, err, 2, "bad Prometheus URL 'http://***@h:99999'")
    for text in (out, err):
        assert "s3cr3t" not in text


def test_basic_auth_is_never_sent_to_a_redirect_target_on_another_host(prom, fault_proxy, capsys):
    target = fault_proxy(prom.url)  # reached as "localhost": another host name
    front = fault_proxy(None)
    front.on(
        "POST", QUERY, redirect(f"http://localhost:{target.url.rsplit(':', 1)[1]}{QUERY}"), nth=None
    )
    url = front.url.replace("http://", "http://admin:s3cr3t@")
    code, out, err = gpuctl(capsys, "top", "--prometheus", url, "--once", "-o", "json")
    assert code == 0, err  # the query followed the redirect, as a POST
    assert json.loads(out)["gpus"][0]["node"] == "node-a"
    assert all(h.get("Authorization", "").startswith("Basic ") for h in front.seen("POST", QUERY))
    sent_on = target.seen("POST", QUERY)
    assert len(sent_on) == 3 and not [h for h in sent_on if "Authorization" in h]


def test_basic_auth_follows_a_redirect_on_the_same_origin(prom, fault_proxy, capsys):
    proxy = fault_proxy(prom.url)
    proxy.on("POST", QUERY, redirect(f"{proxy.url}/moved{QUERY}"), nth=None)
    proxy.on("POST", f"/moved{QUERY}", reply(200, vector([])), nth=None)
    url = proxy.url.replace("http://", "http://admin:s3cr3t@")
    code, out, err = gpuctl(capsys, "top", "--prometheus", url, "--once")
    one_error_line(code, out, err, 1, "no DCGM-exporter metrics")  # the canned empty answer
    moved = proxy.seen("POST", f"/moved{QUERY}")
    assert len(moved) == 3 and all(h["Authorization"].startswith("Basic ") for h in moved)


def test_ctrl_c_while_prometheus_is_slow_is_one_line(prom, fault_proxy):
    import subprocess
    import sys

    from tests import ROOT, children

    proxy = fault_proxy(prom.url)
    rule = proxy.on("POST", QUERY, trickle(forward=True, every_s=2), nth=None)
    # a deadline far past what a loaded machine can take to answer Ctrl-C
    env = dict(os.environ, GPUCTL_REQUEST_TIMEOUT="120")
    proc = children.start(
        [sys.executable, "-m", "gpuctl", "top", "--prometheus", proxy.url, "--once"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert rule.fired.wait(120)  # a loaded machine starts Python slowly
    started = time.monotonic()
    assert children.interrupt(proc, 150) == (130, "", "gpuctl: interrupted\n")
    assert time.monotonic() - started < 60  # not after the 120 s deadline
