"""The provision service's apply step through the one executor, on the real engine: there
is no undo, so a failure halfway says what Terraform made is kept in its state, and the
read-back runs only after an apply that finished."""

from contextlib import contextmanager
from pathlib import Path

import pytest

import tests
from gpuctl.adapters.terraform import Engine
from gpuctl.common.errors import BackendError
from gpuctl.common.specfile import load_yaml
from gpuctl.provision.core.spec import parse_cluster
from gpuctl.provision.core.steps import apply_plan
from gpuctl.provision.service import carry_out
from gpuctl.provision.terraform import Terraform, prepare_workdir
from tests.provision.test_terraform_runner import MODULE

pytestmark = pytest.mark.integration  # the Terraform engine, in its worker processes

EXAMPLE = Path(tests.ROOT) / "examples" / "cluster.yaml"


class Display:
    """Records what the executor and the apply report."""

    def __init__(self):
        self.seen = []

    @contextmanager
    def applying(self, step, total):
        self.seen.append(("applying", step.action, total))
        yield lambda ev, state: self.seen.append(ev["type"])

    def started(self, step, index, total):
        self.seen.append(("started", step.action))

    def finished(self, step, index, total):
        self.seen.append(("finished", step.action))


def terraform(tmp_path, **tfvars):
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "variables.tf").write_text("")
    (modules / "main.tf").write_text(MODULE)
    work = prepare_workdir(tmp_path / "work", modules, {"cluster_name": "t", **tfvars}, None)
    tf = Terraform(work, Engine())
    tf.init()
    return tf


def test_an_apply_is_carried_out_then_read_back(tmp_path):
    tf = terraform(tmp_path, nodes=2)
    summary = tf.plan()
    plan = apply_plan(parse_cluster(load_yaml(EXAMPLE.read_text(), str(EXAMPLE))), summary)
    display, outputs = Display(), {}
    applied = carry_out(tf, plan, summary, display, lambda: outputs.update(tf.outputs()))
    assert applied == {"add": 2, "change": 0, "destroy": 0}
    assert outputs == {"node_names": ["t-0", "t-1"]}
    assert display.seen[:2] == [("started", "apply"), ("applying", "apply", 2)]
    assert display.seen.count("apply_complete") == 2 and display.seen[-1] == ("finished", "apply")


def test_a_failed_apply_is_kept_in_the_state_and_not_read_back(tmp_path):
    tf = terraform(tmp_path, nodes=3, fail_at=1)
    summary = tf.plan()
    plan = apply_plan(parse_cluster(load_yaml(EXAMPLE.read_text(), str(EXAMPLE))), summary)
    read = []
    with pytest.raises(BackendError) as err:
        carry_out(tf, plan, summary, Display(), lambda: read.append(True))
    e = err.value
    assert e.message.startswith("terraform apply failed after")
    assert e.message.endswith("; rollback incomplete: 1 apply kept in Terraform's state")
    assert e.details == ["left: the changes Terraform made (cannot be undone)"]
    assert "run the same command again" in e.hint and read == []
    assert tf.resources()  # what was made before the failure is in the state
