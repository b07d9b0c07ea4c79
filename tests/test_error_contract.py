"""The error contract (docs/errors.md), command by command: one error line (plus a hint), the exit
codes it lists, credentials never shown, and output a script can rely on."""

import json
import math

import pytest

from gpuctl.cli.output import dump
from gpuctl.common.errors import GpuctlError, redact


@pytest.mark.parametrize(
    "args, message, usage",
    [
        (["top", "--delay", "x"], "Invalid value for '-d' / '--delay'", "gpuctl top [OPTIONS]"),
        (["nosuch"], "No such command 'nosuch'.", "gpuctl [OPTIONS] COMMAND [ARGS]..."),
        (["submit"], "Missing job spec: -f FILE (or as an argument).", "gpuctl submit [OPTIONS]"),
        (["jobs", "list", "-o", "xml"], "Invalid value for '-o' / '--output'", "gpuctl jobs list"),
        (["quota", "set", "team-a"], "Missing option '--gpus'.", "gpuctl quota set"),
        (["mig", "plan", "--bogus"], "No such option: --bogus", "gpuctl mig plan [OPTIONS]"),
    ],
)
def test_usage_errors_are_one_line_and_the_usage(cli, args, message, usage):
    r = cli(*args)
    assert r.code == 2 and r.out == ""
    first, hint = r.err.splitlines()
    assert first.startswith("gpuctl: error: ") and message in first
    assert hint.startswith(f"  hint: usage: {usage}") and f"see '{hint.split()[2]}" in hint


def test_a_group_without_a_command_shows_its_help(cli):
    r = cli("jobs")
    assert r.code == 2 and "Usage: gpuctl jobs" in r.err and "delete" in r.err


def test_json_output_never_holds_infinity_or_nan():
    text = dump({"a": math.inf, "b": [-math.inf, math.nan, 1.5], "c": {"d": 1e308 * 10}}, "json")
    assert json.loads(text) == {"a": None, "b": [None, None, 1.5], "c": {"d": None}}
    assert "Infinity" not in text and "NaN" not in text


@pytest.mark.parametrize(
    "text, shown",
    [
        ("cannot reach https://admin:s3cr3t@prom:9090/x", "cannot reach https://***@prom:9090/x"),
        ("at 'http://u:p@ss:w@h:1'", "at 'http://***@h:1'"),
        ("GET http://h/q?token=abc&x=1", "GET http://h/q?token=***&x=1"),
        (
            "http://h/?X-Amz-Signature=ff&X-Amz-Credential=k",
            "http://h/?X-Amz-Signature=***&X-Amz-Credential=***",
        ),
        ("no url here: user@example.com", "no url here: user@example.com"),
    ],
)
def test_credentials_in_urls_are_masked(text, shown):
    assert redact(text) == shown
    e = GpuctlError(text, hint=text, details=[text])
    assert (e.message, e.hint, e.details) == (shown, shown, [shown])


# ---- against stand-ins ----------------------------------------------------------------

MANAGED = {"app.kubernetes.io/managed-by": "gpuctl"}


def test_tables_written_to_a_pipe_keep_every_cell_whole(cli, kube_api, monkeypatch):
    """As kubectl does: only a terminal gets cells cut to its width."""
    from kubernetes import client

    monkeypatch.setenv("COLUMNS", "40")  # a narrow terminal's setting, irrelevant to a pipe
    core = client.CoreV1Api(kube_api)
    namespace = "research-team-with-a-rather-long-namespace-name"
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {
                "name": "notebook-of-someone",
                "namespace": namespace,
                "labels": {**MANAGED, "gpuctl.io/job": "notebook-of-someone"},
            },
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "x",
                        "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}},
                    }
                ]
            },
        },
    )
    r = cli("jobs", "list", "-A")
    assert r.code == 0, r
    row = r.out.splitlines()[1].split()
    assert row[:2] == [namespace, "notebook-of-someone"] and "nvidia.com/mig-1g.10gb" in r.out
    assert "…" not in r.out


@pytest.mark.integration  # takes a free port to find nothing listening there
def test_credentials_in_the_kubeconfig_server_are_masked(cli, tmp_path, monkeypatch):
    import socket

    from tests.standins.kube import write_kubeconfig

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = f"http://admin:s3cr3t@127.0.0.1:{port}"
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kc", server))
    r = cli("jobs", "list")
    assert r.code == 1 and f"http://***@127.0.0.1:{port}" in r.err, r
    assert "s3cr3t" not in r.err + r.out


@pytest.mark.parametrize(
    "point, details",
    [
        ("create Job/train in namespace team-a", ()),
        ("trailing spaces go   ", ()),
        ("  indented, [not markup] and :smile: as typed", ()),
        ("wide: 日本語のノード名 and an emoji 🚀", ()),
        ("a tab\there, a bell \a and a line\nbreak", ()),
        ("the point", ("first detail", "second [detail]  ")),
    ],
)
@pytest.mark.parametrize("debug", [False, True])
def test_messages_in_a_pipe_are_what_rich_writes(capsys, point, details, debug):
    """`inform` writes plain prose to a pipe itself (rich costs ~50 ms to import and run):
    byte for byte what gpuctl's rich console writes for the same lines."""
    from gpuctl.cli.output import err_console, inform

    inform(point, details, debug=debug)
    mine = capsys.readouterr().err
    lines = [point + ("" if debug or not details else " (--debug for the details)")]
    lines += [f"  {d}" for d in details] if debug else []
    for line in lines:
        err_console().print(line, markup=False, highlight=False)
    assert mine == capsys.readouterr().err


def test_the_debug_traceback_masks_credentials_in_urls(capsys):
    from gpuctl import app
    from gpuctl.cli import application

    application.reset().debug = True
    try:
        raise RuntimeError("a library's surprise: GET http://admin:s3cr3t@prom:9090/api failed")
    except RuntimeError:
        app._debug_traceback()
    err = capsys.readouterr().err
    assert "Traceback" in err and "http://***@prom:9090/api" in err and "s3cr3t" not in err


def test_printouts_mask_credentials_in_urls(capsys):
    from gpuctl.cli.output import echo, inform, new_table, out_console

    url = "https://admin:s3cr3t@prom.corp:9090/?token=abc123"
    echo(f"serverAddress: {url}\n")
    inform(f"asking {url}", (f"detail {url}",), debug=True)
    table = new_table()
    table.add_column("url")
    table.add_row(url)
    out_console().print(table)
    out, err = capsys.readouterr()
    assert "s3cr3t" not in out + err and "abc123" not in out + err
    assert out.count("https://***@prom.corp:9090/?token=***") == 2
    assert err.count("https://***@prom.corp:9090/?token=***") == 2


@pytest.mark.parametrize("command", [["report"], ["top", "--once"], ["advise"]])
def test_a_bad_prometheus_url_is_refused_without_its_password(capsys, command):
    from tests.clirun import run_gpuctl

    url = "http://admin:s3cr3t@prom:99999"
    code, out, err = run_gpuctl(capsys, *command, "--prometheus", url)
    assert code == 2 and "http://***@prom:99999" in err, err
    assert "s3cr3t" not in out + err
