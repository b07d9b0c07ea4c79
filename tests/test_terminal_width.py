"""In a terminal 80 or 120 columns wide, no table cuts a token a user copies: every URL,
path, node, pod and image name that doctor, render --explain, submit and jobs why print
is found whole on one line of what they wrote to the terminal (a line longer than the
terminal is wrapped by the terminal, which copying undoes). gpuctl runs under a real
pseudo-terminal of that size, as in a user's shell."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from tests import ROOT
from tests.gpu_cluster import node, pod, seed

pytestmark = pytest.mark.integration
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# EKS node names, as long as real ones get
NODES = ("ip-10-0-123-45.us-west-2.compute.internal", "ip-10-0-67-201.us-west-2.compute.internal")


def in_terminal(columns: int, *args: str, cwd: str = ROOT) -> str:
    """What `gpuctl ARGS` writes to a terminal COLUMNS wide (stdout and stderr)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuctl", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=cwd,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(60)
    os.close(leader)
    return ANSI.sub("", b"".join(chunks).decode(errors="replace")).replace("\r", "")


def assert_whole(text: str, tokens) -> None:
    lines = text.splitlines()
    for token in tokens:
        assert any(token in line for line in lines), f"{token!r} cut in:\n{text}"


@pytest.fixture
def busy_cluster(kube, kube_api):
    seed(
        kube_api,
        *(node(n, labels={"gpu-type": "h100"}) for n in NODES),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
        pod("holder-0", "team-a", gpus=8, node_name=NODES[0]),
        pod("holder-1", "team-a", gpus=6, node_name=NODES[1]),
    )
    return kube


@pytest.mark.parametrize("columns", [80, 120])
def test_doctor_keeps_its_fix_urls_whole(busy_cluster, columns):
    text = in_terminal(columns, "doctor")
    urls = re.findall(r"https://\S+", in_terminal(1000, "doctor"))
    assert urls, text  # Kueue and JobSet are missing: their install URLs are the fixes
    assert_whole(text, [u.rstrip(")") for u in urls])


@pytest.mark.parametrize("columns", [80, 120])
def test_render_explain_keeps_files_lines_and_images_whole(tmp_path, columns):
    spec = os.path.join(ROOT, "examples", "efa-pretrain.yaml")
    # from elsewhere, so the spec's and the template's paths are printed absolute: long
    text = in_terminal(columns, "render", spec, "--explain", cwd=str(tmp_path))
    template = os.path.join(ROOT, "templates", "efa-p5.yaml")
    assert_whole(
        text, [f"{spec}:5", f"{spec}:10", f"{template}:20", "nvcr.io/nvidia/pytorch:24.05-py3"]
    )


@pytest.mark.parametrize("columns", [80, 120])
def test_submit_and_why_keep_node_and_pod_names_whole(busy_cluster, tmp_path, columns):
    spec = tmp_path / "big.yaml"
    spec.write_text(
        "apiVersion: gpuctl/v1\nkind: Job\nname: needs-four-gpus-on-one-node\n"
        "image: nvcr.io/nvidia/pytorch:24.05-py3\ngpus: 4\ngpu_type: h100\n"
    )
    text = in_terminal(columns, "submit", str(spec), "-n", "team-a")
    assert_whole(text, [*NODES, "needs-four-gpus-on-one-node"])
    text = in_terminal(columns, "jobs", "why", "needs-four-gpus-on-one-node", "-n", "team-a")
    assert_whole(text, NODES)


OFFLINE_SHARE = ("share", "timeslice", "--node", NODES[0], "--replicas", "4", "--dry-run")
POINT = "assumed without a cluster: the device plugin reads ConfigMap"


@pytest.mark.parametrize("columns", [80, 120])
def test_prose_wraps_at_spaces_to_the_terminal(tmp_path, columns):
    """Messages fill the terminal's width, break at spaces, end in their text (no padding),
    and say their point first: the details wait for --debug."""
    text = in_terminal(columns, *OFFLINE_SHARE, cwd=str(tmp_path))
    lines = text.splitlines()
    assert all(len(line) <= columns and line == line.rstrip() for line in lines), text
    # wrapped to this width, not to a fixed one: a wrapped line's next word did not fit
    wrapped = [(a, b) for a, b in zip(lines, lines[1:]) if a.startswith(POINT[:20])]
    assert wrapped and all(len(a) + 1 + len(b.split()[0]) > columns for a, b in wrapped), text
    assert_whole(text, [NODES[0], "gpu-operator/gpuctl-sharing-config"])
    assert "(--debug for the details)" in text and "devicePlugin.config.default" not in text
    debug = in_terminal(
        columns, "share", "timeslice", "--debug", *OFFLINE_SHARE[2:], cwd=str(tmp_path)
    )
    assert "devicePlugin.config.default" in debug.replace("\n", " ")


def test_prose_is_not_wrapped_in_a_pipe(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gpuctl", *OFFLINE_SHARE],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        env={**os.environ, "PYTHONPATH": ROOT, "COLUMNS": "80"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    point = [line for line in lines if line.startswith(POINT)]
    assert point and point[0].endswith("no node is labelled yet (--debug for the details)")
    assert any(len(line) > 80 for line in lines)  # the width of a pipe is not 80
    assert all(line == line.rstrip() for line in lines), proc.stderr
