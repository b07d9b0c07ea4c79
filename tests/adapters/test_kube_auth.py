"""Kubeconfig credential plugins (`users[].user.exec`, as EKS's `aws eks get-token`), run for
real: a shell script that prints an ExecCredential, hangs (with a child of its own), or fails
printing a token. gpuctl talks to the API emulator through a proxy that records the
Authorization header each request carried."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from tests import ROOT, children
from tests.test_completion import complete

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kube_client")]

TOKEN = "k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_QWN0aW9uPUdldENhbGxlcklkZW50aXR5"
CREDENTIAL = json.dumps(
    {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": TOKEN, "expirationTimestamp": "2099-01-01T00:00:00Z"},
    }
)


def plugin(tmp_path, body: str) -> str:
    """An executable credential plugin script; it writes its process id to tmp/plugin.pid."""
    path = tmp_path / "get-token"
    path.write_text(f"#!/bin/sh\necho $$ > {tmp_path}/plugin.pid\n{body}\n")
    path.chmod(0o755)
    return str(path)


def kubeconfig_with(tmp_path, url: str, command: str, **exec_more) -> str:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "eks",
        "clusters": [{"name": "eks", "cluster": {"server": url}}],
        "users": [
            {
                "name": "eks",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": command,
                        "args": ["eks", "get-token", "--cluster-name", "demo"],
                        "env": [{"name": "AWS_PROFILE", "value": "demo"}],
                        **exec_more,
                    }
                },
            }
        ],
        "contexts": [{"name": "eks", "context": {"cluster": "eks", "user": "eks"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def gpuctl(*args, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuctl", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        **kw,
    )


def gone(pid: int, seconds: float = 5) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def telling(tmp_path) -> str:
    """A plugin's body that leaves whether its stdin is a terminal, and the
    KUBERNETES_EXEC_INFO it was given, in tmp/ran.json, and prints the credential."""
    return (
        "[ -t 0 ] && tty=true || tty=false\n"
        f'printf \'{{"tty": %s, "info": %s}}\' $tty "$KUBERNETES_EXEC_INFO" > {tmp_path}/ran.json\n'
        f"echo '{CREDENTIAL}'"
    )


def children_of_plugin(tmp_path) -> list[int]:
    return [int(line) for line in (tmp_path / "children").read_text().split()]


def test_the_plugins_token_is_what_each_request_carries(tmp_path, proxied_kube, monkeypatch):
    command = plugin(tmp_path, f"[ \"$AWS_PROFILE\" = demo ] || exit 9\necho '{CREDENTIAL}'")
    monkeypatch.setenv("KUBECONFIG", kubeconfig_with(tmp_path, proxied_kube.url, command))
    r = gpuctl("jobs", "list", "-o", "json")
    assert r.returncode == 0, r.stderr
    sent = proxied_kube.seen("GET", r"/apis/batch/v1/namespaces/default/jobs")
    assert sent and {k.lower(): v for k, v in sent[0].items()}["authorization"] == f"Bearer {TOKEN}"


def test_a_plugin_that_hangs_is_ended_with_its_children_at_the_deadline(
    tmp_path, proxied_kube, monkeypatch
):
    command = plugin(tmp_path, f"sleep 300 & echo $! > {tmp_path}/children\nsleep 300")
    monkeypatch.setenv("KUBECONFIG", kubeconfig_with(tmp_path, proxied_kube.url, command))
    started = time.monotonic()
    r = gpuctl("jobs", "list", env={"GPUCTL_REQUEST_TIMEOUT": "2"})
    took = time.monotonic() - started
    assert r.returncode == 1, r.stderr
    assert "credential plugin 'get-token' gave no credential within 2 s" in r.stderr
    assert took < 20  # not the plugin's 300 s
    pid = int((tmp_path / "plugin.pid").read_text())
    assert gone(pid) and all(gone(c) for c in children_of_plugin(tmp_path))
    assert not proxied_kube.seen("GET", r"/apis/batch/v1/namespaces/default/jobs")


def test_ctrl_c_while_the_plugin_runs_ends_it_and_exits_130(tmp_path, proxied_kube, monkeypatch):
    command = plugin(tmp_path, f"sleep 300 & echo $! > {tmp_path}/children\nsleep 300")
    monkeypatch.setenv("KUBECONFIG", kubeconfig_with(tmp_path, proxied_kube.url, command))
    proc = children.start(
        [sys.executable, "-m", "gpuctl", "submit", "--dry-run", f"{ROOT}/examples/job.yaml"],
        cwd=ROOT,
        env={**os.environ, "GPUCTL_REQUEST_TIMEOUT": "60"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    listed = tmp_path / "children"  # the plugin runs, and has started its child
    end = time.monotonic() + 120  # a loaded machine starts Python slowly
    while not (listed.exists() and listed.read_text().strip()) and time.monotonic() < end:
        time.sleep(0.05)
    assert listed.exists() and listed.read_text().strip(), "the plugin never ran"
    code, _, err = children.interrupt(proc, 30)
    assert code == 130, err
    pid = int((tmp_path / "plugin.pid").read_text())
    assert gone(pid) and all(gone(c) for c in children_of_plugin(tmp_path))


def test_a_failing_plugins_output_never_shows_its_token(tmp_path, proxied_kube, monkeypatch):
    leak = json.dumps({"status": {"token": "s3cr3t-t0ken-value"}})
    command = plugin(
        tmp_path,
        f"echo 'debug: {leak}' >&2\n"
        "echo 'retrying with Authorization: Bearer s3cr3t-t0ken-value' >&2\n"
        "exit 3",
    )
    monkeypatch.setenv("KUBECONFIG", kubeconfig_with(tmp_path, proxied_kube.url, command))
    r = gpuctl("jobs", "list")
    assert r.returncode == 1
    assert "credential plugin 'get-token' failed (exit 3)" in r.stderr, r.stderr
    assert "s3cr3t" not in r.stderr + r.stdout


def test_completion_gives_up_on_a_hanging_plugin_within_its_seconds(
    tmp_path, proxied_kube, kube_api
):
    from kubernetes import client

    from gpuctl.completion import COMPLETION_SECONDS

    client.CoreV1Api(kube_api).create_namespace({"metadata": {"name": "team-a"}})
    started = time.monotonic()  # Python's start and the client's modules, on this machine now
    usual = complete("bash", "gpuctl jobs list -n ")
    usual_s = time.monotonic() - started
    assert usual.stdout.split() == ["team-a"]
    command = plugin(tmp_path, f"sleep 300 & echo $! > {tmp_path}/children\nsleep 300")
    kubeconfig = kubeconfig_with(tmp_path, proxied_kube.url, command)
    started = time.monotonic()
    done = complete("bash", "gpuctl jobs list -n ", KUBECONFIG=kubeconfig)
    took = time.monotonic() - started
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "", "")
    assert took < usual_s + COMPLETION_SECONDS + 3, (took, usual_s)
    assert gone(int((tmp_path / "plugin.pid").read_text()))


def test_a_kubeconfig_that_is_a_fifo_is_refused_not_waited_on(tmp_path, monkeypatch):
    fifo = tmp_path / "kubeconfig"
    os.mkfifo(fifo)
    monkeypatch.setenv("KUBECONFIG", str(fifo))
    r = gpuctl("jobs", "list")
    assert r.returncode == 2 and f"kubeconfig {fifo}: not a regular file" in r.stderr, r.stderr
    started = time.monotonic()
    done = complete("bash", "gpuctl jobs list -n ")
    assert (done.returncode, done.stdout.strip()) == (0, "")
    assert time.monotonic() - started < 30  # the 40 s hang is gone


def token_file_kubeconfig(tmp_path, url: str) -> str:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"tokenFile": "token.txt"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(cfg))
    return str(tmp_path / "kubeconfig")


def test_relative_paths_in_the_kubeconfig_resolve_beside_it(tmp_path, proxied_kube, monkeypatch):
    (tmp_path / "token.txt").write_text("from-a-file")
    monkeypatch.setenv("KUBECONFIG", token_file_kubeconfig(tmp_path, proxied_kube.url))
    r = gpuctl("jobs", "list", "-o", "json")  # run from the checkout, not tmp_path
    assert r.returncode == 0, r.stderr
    sent = proxied_kube.seen("GET", r"/apis/batch/v1/namespaces/default/jobs")
    assert {k.lower(): v for k, v in sent[0].items()}["authorization"] == "Bearer from-a-file"


def test_a_token_file_is_read_as_client_go_reads_it(tmp_path, proxied_kube, monkeypatch):
    """`echo $TOKEN > token.txt` leaves a newline: client-go trims it (transport's
    fileTokenSource); sent as it is, the header would not be a valid one."""
    (tmp_path / "token.txt").write_text(" from-a-file\n")
    monkeypatch.setenv("KUBECONFIG", token_file_kubeconfig(tmp_path, proxied_kube.url))
    r = gpuctl("jobs", "list", "-o", "json")
    assert r.returncode == 0, r.stderr
    sent = proxied_kube.seen("GET", r"/apis/batch/v1/namespaces/default/jobs")
    assert {k.lower(): v for k, v in sent[0].items()}["authorization"] == "Bearer from-a-file"
    (tmp_path / "token.txt").write_text("\n")  # an empty one is an error there too
    r = gpuctl("jobs", "list")
    assert r.returncode == 2 and "token.txt: empty, no token in it" in r.stderr, r.stderr


# interactiveMode (clientcmd/api/v1: Never, IfAvailable, Always; a v1beta1 plugin that names
# none is IfAvailable): whether the plugin gets the terminal, decided as client-go's exec
# isInteractive decides it. The official Python client would look at stdout, not stdin, and
# ignore the mode: gpuctl runs the plugin for both transports.
INTERACTIVE = {  # (mode, stdin a terminal): the plugin's stdin is a terminal, spec.interactive
    ("Never", True): False,
    ("Never", False): False,
    ("IfAvailable", True): True,
    ("IfAvailable", False): False,
    (None, True): True,  # v1beta1: IfAvailable
    ("Always", True): True,
}


@pytest.mark.parametrize(("mode", "terminal"), list(INTERACTIVE))
def test_interactive_mode_decides_whether_the_plugin_gets_the_terminal(
    mode, terminal, tmp_path, proxied_kube, monkeypatch
):
    import pty

    more = {"interactiveMode": mode} if mode else {}
    path = kubeconfig_with(tmp_path, proxied_kube.url, plugin(tmp_path, telling(tmp_path)), **more)
    primary, secondary = pty.openpty() if terminal else (None, subprocess.DEVNULL)
    try:
        r = gpuctl("jobs", "list", "-o", "json", env={"KUBECONFIG": path}, stdin=secondary)
    finally:
        if primary is not None:
            os.close(primary)
            os.close(secondary)
    assert r.returncode == 0, r.stderr
    ran = json.loads((tmp_path / "ran.json").read_text())
    assert ran["tty"] is ran["info"]["spec"]["interactive"] is INTERACTIVE[(mode, terminal)]


def test_completion_never_gives_a_plugin_the_terminal(tmp_path, proxied_kube):
    """A shell completes with the person's terminal as stdin: a plugin asking there would
    write into the prompt (client-go's StdinUnavailable; IfAvailable gets no terminal)."""
    import pty

    path = kubeconfig_with(tmp_path, proxied_kube.url, plugin(tmp_path, telling(tmp_path)))
    primary, secondary = pty.openpty()
    try:
        done = complete("bash", "gpuctl jobs list -n ", stdin=secondary, KUBECONFIG=path)
    finally:
        os.close(primary)
        os.close(secondary)
    assert done.returncode == 0, done.stderr
    ran = json.loads((tmp_path / "ran.json").read_text())
    assert ran["tty"] is ran["info"]["spec"]["interactive"] is False


def test_interactive_mode_always_without_a_terminal_is_refused(tmp_path, proxied_kube):
    command = plugin(tmp_path, telling(tmp_path))
    path = kubeconfig_with(tmp_path, proxied_kube.url, command, interactiveMode="Always")
    r = gpuctl("jobs", "list", env={"KUBECONFIG": path}, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stderr
    assert (
        f"kubeconfig {path}: user 'eks': exec interactiveMode is Always, but standard input "
        "is not a terminal" in r.stderr
    )
    assert not (tmp_path / "ran.json").exists()
    assert not proxied_kube.seen("GET", r"/apis/batch/v1/namespaces/default/jobs")


def test_a_missing_plugin_shows_its_install_hint(tmp_path, proxied_kube):
    """client-go shows exec's installHint when the command cannot be run."""
    hint = "gke-gcloud-auth-plugin is needed:\n  gcloud components install gke-gcloud-auth-plugin"
    path = kubeconfig_with(tmp_path, proxied_kube.url, str(tmp_path / "absent"), installHint=hint)
    r = gpuctl("jobs", "list", env={"KUBECONFIG": path})
    assert r.returncode == 1, r.stderr
    assert "credential plugin 'absent' cannot be started: No such file or directory" in r.stderr
    assert "is needed: gcloud components install gke-gcloud-auth-plugin" in r.stderr


def test_a_plugins_path_is_beside_the_kubeconfig_and_it_runs_where_gpuctl_does(
    tmp_path, proxied_kube
):
    """clientcmd resolves a command with a slash against the kubeconfig's directory (a
    bare name is looked up in PATH) and client-go leaves the working directory as it is
    (the official Python client would run the plugin in the kubeconfig's directory)."""
    (tmp_path / "bin").mkdir()
    script = plugin(tmp_path, f"pwd > {tmp_path}/cwd\necho '{CREDENTIAL}'")
    os.rename(script, tmp_path / "bin" / "get-token")
    path = kubeconfig_with(tmp_path, proxied_kube.url, "bin/get-token")
    r = gpuctl("jobs", "list", env={"KUBECONFIG": path})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cwd").read_text().strip() == str(ROOT)
