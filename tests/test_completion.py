"""Shell completion through the protocol the shells use: the script `gpuctl` prints for
bash, zsh and fish, and `gpuctl` run with _GPUCTL_COMPLETE set, as those scripts run it.
Values come from gpuctl's own data (MIG profiles, GPU models) and from the cluster
(namespaces, job names), and a cluster that does not answer costs no error and no wait."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

import pytest

from gpuctl.gpus import geometry

pytestmark = pytest.mark.integration  # each case runs gpuctl as the shell does

GPUCTL = [sys.executable, "-m", "gpuctl"]


def complete(shell: str, words: str, stdin=None, **env: str) -> subprocess.CompletedProcess:
    """What `gpuctl` answers when SHELL asks it to complete WORDS (the cursor at the end),
    its stdin STDIN (None: this process's)."""
    protocol = {"_GPUCTL_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        parts = shlex.split(words) + ([""] if words.endswith(" ") else [])
        protocol |= {"COMP_WORDS": " ".join(parts), "COMP_CWORD": str(len(parts) - 1)}
    else:
        protocol |= {"_TYPER_COMPLETE_ARGS": words}
        if shell == "fish":
            protocol["_TYPER_COMPLETE_FISH_ACTION"] = "get-args"
    return subprocess.run(
        GPUCTL,
        env={**os.environ, **protocol, **env},
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_for_each_shell_asks_gpuctl(shell):
    script = subprocess.run(
        GPUCTL, env={**os.environ, "_GPUCTL_COMPLETE": f"source_{shell}"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert script.returncode == 0 and script.stderr == ""
    assert f"_GPUCTL_COMPLETE=complete_{shell}" in script.stdout
    assert "gpuctl" in script.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_gpuctl_completion_prints_the_script_as_kubectl_and_helm_do(shell):
    printed = subprocess.run(
        [*GPUCTL, "completion", shell], capture_output=True, text=True, timeout=60
    )
    assert printed.returncode == 0 and printed.stderr == ""
    asked = subprocess.run(
        GPUCTL, env={**os.environ, "_GPUCTL_COMPLETE": f"source_{shell}"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert printed.stdout.strip() == asked.stdout.strip()
    assert f"_GPUCTL_COMPLETE=complete_{shell}" in printed.stdout


def test_gpuctl_completion_of_another_shell_is_a_usage_error():
    done = subprocess.run(
        [*GPUCTL, "completion", "tcsh"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "'tcsh' is not one of 'bash', 'zsh', 'fish'" in done.stderr


def test_bash_itself_completes_mig_profiles_through_the_script(tmp_path):
    script = subprocess.run(
        [*GPUCTL, "completion", "bash"], capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    # `gpuctl` on the PATH is this checkout's, as the script calls it by name
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gpuctl").write_text(f'#!/bin/sh\nexec {sys.executable} -m gpuctl "$@"\n')
    (bin_dir / "gpuctl").chmod(0o755)
    driver = (
        script
        + "\nCOMP_WORDS=(gpuctl mig plan --demand 3g); COMP_CWORD=4\n"
        + "_gpuctl_completion gpuctl\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "--norc", "-c", driver], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stderr == ""
    offered = done.stdout.split()
    assert "3g.40gb=" in offered
    assert offered == sorted(f"{p}=" for p in geometry.all_profile_names() if p.startswith("3g"))


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_mig_profiles_complete_after_those_written(shell):
    done = complete(shell, "gpuctl mig plan --demand 1g.10gb=7,2g")
    assert done.returncode == 0 and done.stderr == ""
    assert "1g.10gb=7,2g.20gb=" in done.stdout
    assert "1g.10gb=7,3g.40gb=" not in done.stdout


def test_gpu_models_complete():
    done = complete("bash", "gpuctl mig profiles --gpu H1")
    models = {m.short_name for m in geometry.models() if m.short_name.startswith("H1")}
    assert set(done.stdout.split()) == models and "H100-80GB" in models


def test_aws_profiles_complete_from_the_aws_files(tmp_path):
    (tmp_path / "config").write_text("[default]\nregion = us-east-1\n[profile prod-gpu]\n")
    (tmp_path / "credentials").write_text("[ci]\naws_access_key_id = x\n")
    files = {
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
    }
    assert complete("bash", "gpuctl provision --profile ", **files).stdout.split() == [
        "ci", "default", "prod-gpu",
    ]  # fmt: skip
    assert complete("bash", "gpuctl destroy --profile p", **files).stdout.split() == ["prod-gpu"]


def test_starters_and_schemas_complete():
    assert complete("bash", "gpuctl init m").stdout.split() == ["multinode", "mig-job"]
    assert complete("bash", "gpuctl schema ").stdout.split() == [
        "job",
        "service",
        "cluster",
        "reclaim-policy",
    ]
    assert complete("bash", "gpuctl init s").stdout.split() == ["service"]


def test_commands_complete_although_they_are_registered_lazily():
    offered = complete("bash", "gpuctl s").stdout.split()
    assert {"schema", "submit", "share", "sched"} <= set(offered)
    assert "render" not in offered


def test_namespaces_and_job_names_come_from_the_cluster(kube_api):
    from kubernetes import client

    core, batch = client.CoreV1Api(kube_api), client.BatchV1Api(kube_api)
    for ns in ("team-a", "team-b", "other"):
        core.create_namespace({"metadata": {"name": ns}})
    for name, labels in (("train-1", {"app.kubernetes.io/managed-by": "gpuctl"}), ("alien", {})):
        batch.create_namespaced_job(
            "team-a",
            {"metadata": {"name": name, "labels": labels},
             "spec": {"template": {"spec": {"restartPolicy": "Never",
                                            "containers": [{"name": "c", "image": "x"}]}}}},
        )  # fmt: skip
    assert complete("bash", "gpuctl jobs list -n team-").stdout.split() == ["team-a", "team-b"]
    names = complete("bash", "gpuctl jobs logs -n team-a ")
    assert names.stdout.split() == ["train-1"] and names.stderr == ""


def test_a_cluster_that_does_not_answer_costs_no_error_and_no_wait(proxied_kube, kube_api):
    from kubernetes import client

    from gpuctl.completion import COMPLETION_SECONDS
    from tests.standins.faults import delay

    def timed() -> tuple[subprocess.CompletedProcess, float]:
        started = time.monotonic()
        done = complete("bash", "gpuctl jobs list -n ")
        return done, time.monotonic() - started

    client.CoreV1Api(kube_api).create_namespace({"metadata": {"name": "team-a"}})
    answered, usual = timed()  # starting Python and loading the client, on this machine now
    assert answered.stdout.split() == ["team-a"]
    proxied_kube.on("GET", r"/api/v1/namespaces", delay(60))
    done, took = timed()
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "", "")
    assert took < usual + COMPLETION_SECONDS + 5  # not the 60 s the cluster would take


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_names_a_server_sends_cannot_inject_candidates_or_drive_the_terminal(proxied_kube, shell):
    """A hostile or broken API server lists namespaces whose names hold a newline (a shell
    reads one candidate a line: the rest would be injected candidates), a terminal escape and
    a space: only the names the shell protocol can carry are offered."""
    import json

    from tests.standins.faults import reply

    names = ["team-a", "evil\nplain\ngpuctl-rm-rf", "\x1b]0;owned\x07team-b", "team c", "team-d"]
    items = [{"metadata": {"name": n}} for n in names]
    listing = {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {}, "items": items}
    proxied_kube.on("GET", r"/api/v1/namespaces", reply(200, json.dumps(listing)), nth=None)
    done = complete(shell, "gpuctl jobs list -n team")
    assert done.returncode == 0 and done.stderr == "", done
    assert "\x1b" not in done.stdout and "plain" not in done.stdout and "team c" not in done.stdout
    assert "team-a" in done.stdout and "team-d" in done.stdout


def test_job_names_wait_for_the_slowest_list_not_the_sum_of_four(proxied_kube, kube_api):
    """A job is a Job, a JobSet, a service's Deployment or a bare Pod: four lists. The proxy
    answers none of them before all four have arrived; lists sent in turn would hold the
    first until its COMPLETION_SECONDS ran out, and the shell would get no name."""
    import threading

    from kubernetes import client

    from tests.standins.faults import Action

    arrived = threading.Barrier(4)

    def together(h, answer) -> None:
        try:
            arrived.wait(timeout=30)
        except threading.BrokenBarrierError:
            h.drop()
            return
        h.send(answer)

    client.BatchV1Api(kube_api).create_namespaced_job(
        "default",
        {"metadata": {"name": "train-1", "labels": {"app.kubernetes.io/managed-by": "gpuctl"}},
         "spec": {"template": {"spec": {"restartPolicy": "Never",
                                        "containers": [{"name": "c", "image": "x"}]}}}},
    )  # fmt: skip
    lists = r"/apis?/.*/namespaces/default/(jobs|jobsets|deployments|pods)"
    proxied_kube.on("GET", lists, Action(True, together), nth=None)
    names = complete("bash", "gpuctl jobs get ")
    assert names.stdout.split() == ["train-1"] and names.stderr == ""
    sent = sorted(p.rsplit("/", 1)[1] for m, p, _ in proxied_kube.requests if m == "GET")
    assert sent == ["deployments", "jobs", "jobsets", "pods"]  # one list of each kind
