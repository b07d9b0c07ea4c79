"""`gpuctl mig` on a node, end to end through the CLI, the NVML adapter and the simulated
NVML (state in GPUCTL_SIM_STATE, per test). Never a real GPU."""

import json
import pathlib
import textwrap

import pytest
import yaml

import gpuctl.sim
from gpuctl.adapters.nvml import Nvml
from tests.clirun import run_gpuctl as run


@pytest.fixture
def node(monkeypatch):
    monkeypatch.setenv("GPUCTL_SIMULATE", "2xH100-80GB")
    return "2xH100-80GB"


def show(capsys):
    code, out, _ = run(capsys, "mig", "show", "-o", "json")
    assert code == 0
    return json.loads(out)


def write(tmp_path, text, name="mig.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


CONFIG = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  mixed:
    - devices: [0]
      mig-enabled: true
      mig-devices:
        3g.40gb: 1
        2g.20gb: 2
    - device-filter: "0x233010DE"
      devices: [1]
      mig-enabled: true
      mig-devices:
        1g.10gb: 7
"""


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_configure_from_file_then_idempotent_assert_export(capsys, node, tmp_path):
    cfg = write(tmp_path, CONFIG)
    code, out, err = run(capsys, "mig", "configure", "-f", cfg, "-c", "mixed", "--yes", "--reset")
    assert code == 0, err
    gpus = show(capsys)
    assert gpus[0]["layout"] == {"3g.40gb": 1, "2g.20gb": 2}
    assert gpus[1]["layout"] == {"1g.10gb": 7}
    assert {(i["profile"], i["start"]) for i in gpus[0]["instances"]} == {
        ("2g.20gb", 0),
        ("2g.20gb", 2),
        ("3g.40gb", 4),
    }
    gi_ids = [i["gi_id"] for i in gpus[0]["instances"]]
    # Second run changes nothing (same instance ids).
    code, out, _ = run(capsys, "mig", "configure", "-f", cfg, "-c", "mixed", "--yes")
    assert code == 0 and "nothing to change" in out
    assert [i["gi_id"] for i in show(capsys)[0]["instances"]] == gi_ids
    assert run(capsys, "mig", "assert", "-f", cfg, "-c", "mixed")[0] == 0
    code, _, err = run(capsys, "mig", "assert", "-f", cfg, "-c", "all-disabled")
    assert code == 1 and "not applied" in err
    # export → assert round trip
    code, exported, _ = run(capsys, "mig", "export")
    assert code == 0
    path = write(tmp_path, exported, "exported.yaml")
    assert run(capsys, "mig", "assert", "-f", path, "-c", "current")[0] == 0


def test_dry_run_and_confirmation_change_nothing(capsys, node):
    code, out, _ = run(capsys, "mig", "configure", "--layout", "all-1g.10gb", "--dry-run")
    assert code == 0 and "enable MIG mode on GPU 0" in out and "dry run" in out
    code, out, err = run(capsys, "mig", "configure", "--layout", "all-1g.10gb")  # no tty, no --yes
    assert code == 3 and "--yes" in err
    assert all(not g["mig"]["current"] and not g["mig"]["pending"] for g in show(capsys))


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_pending_mode_needs_reset_and_rerun_completes(capsys, node):
    code, _, err = run(capsys, "mig", "configure", "--layout", "7g.80gb=1", "--yes")
    assert code == 1 and "GPU 0, 1: the MIG mode change is pending a GPU reset" in err
    assert "--reset" in err
    for g in show(capsys):
        assert g["mig"] == {"current": False, "pending": True} and g["instances"] == []
    code, out, err = run(capsys, "mig", "configure", "--layout", "7g.80gb=1", "--yes", "--reset")
    assert code == 0, err
    assert "reset GPU 0 to apply the pending MIG enable" in out
    assert [g["layout"] for g in show(capsys)] == [{"7g.80gb": 1}] * 2


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_refuses_busy_gpu_and_busy_instance_naming_processes(capsys, node):
    gpuctl.sim.add_process(1, 4242, 2048, name="train.py", user="alice")
    code, _, err = run(capsys, "mig", "configure", "--layout", "all-3g.40gb", "--yes", "--reset")
    assert code == 1 and "pid 4242 train.py (user alice, 2048 MiB)" in err
    assert [g["mig"]["pending"] for g in show(capsys)] == [False, False]  # nothing applied
    gpuctl.sim.remove_process(4242)
    assert run(capsys, "mig", "configure", "--layout", "all-3g.40gb", "--yes", "--reset")[0] == 0
    gi = next(i for i in show(capsys)[0]["instances"] if i["start"] == 4)
    gpuctl.sim.add_process(0, 99, 100, name="infer", user="bob", gi_id=gi["gi_id"], ci_id=0)
    code, _, err = run(capsys, "mig", "configure", "--gpus", "0", "--layout", "7g.80gb=1", "--yes")
    assert code == 1 and "pid 99 infer (user bob, 100 MiB)" in err
    # A layout that can keep the busy instance (at 4-7; 2g.20gb cannot start at 6) goes
    # through, leaving it untouched.
    code, _, err = run(
        capsys, "mig", "configure", "--gpus", "0", "--layout", "3g.40gb=1,2g.20gb=2", "--yes"
    )
    assert code == 0, err
    insts = show(capsys)[0]["instances"]
    assert any(i["gi_id"] == gi["gi_id"] and i["processes"][0]["pid"] == 99 for i in insts)


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_failure_halfway_is_shown_truthfully_and_rerun_completes(capsys, node):
    mig_on(capsys, 0)
    # Another actor takes slices 4-7 between our plan and our apply: the second create fails.
    from gpuctl.mig import service
    from gpuctl.mig.node import Halted

    with Nvml(gpuctl.sim.driver()) as nvml:
        plan = service.plan_node(nvml, None, None, "3g.40gb=2", [0])
        intruder = nvml.create_gpu_instance(0, 9, 4)  # a 3g.40gb GI with no compute instance
        with pytest.raises(Halted) as e:
            service.configure_node(nvml, plan, allow_reset=False)
    assert "step 2 of 2 failed (create 3g.40gb at slices 4-7)" in str(e.value)
    # The slices were taken by someone else: once that is sorted out, a re-run can finish.
    assert "run the same command again to finish" in e.value.hint
    g0 = show(capsys)[0]
    assert sorted((i["start"], len(i["compute_instances"])) for i in g0["instances"]) == [
        (0, 1),
        (4, 0),
    ]
    assert any(i["gi_id"] == intruder for i in g0["instances"])
    # Re-running completes: the half-made instance only gets its compute instance.
    code, out, err = run(
        capsys, "mig", "configure", "--gpus", "0", "--layout", "3g.40gb=2", "--yes"
    )
    assert code == 0, err
    assert "create the 3g.40gb compute instance" in out
    assert run(capsys, "mig", "assert", "--gpus", "0", "--layout", "3g.40gb=2")[0] == 0


def mig_on(capsys, gpu):
    """MIG enabled on GPU `gpu`, no instances yet."""
    code, _, err = run(
        capsys, "mig", "configure", "--gpus", gpu, "--layout", "all-enabled", "--yes", "--reset"
    )
    assert code == 0, err


def test_bad_inputs_exit_2_and_change_nothing(capsys, node, tmp_path):
    code, _, err = run(capsys, "mig", "configure", "--layout", "3g.20gb=1", "--yes")
    assert code == 2 and "no MIG profile '3g.20gb'" in err and "1g.10gb, 1g.10gb+me" in err
    bad = write(
        tmp_path,
        """\
        version: v1
        mig-configs:
          x:
            - devices: all
              mig-enabled: true
              mig-devices:
                4g.40gb: 2
        """,
    )
    code, _, err = run(capsys, "mig", "configure", "-f", bad, "-c", "x", "--yes")
    assert code == 2 and f"{bad}:7: mig-configs.x[0].mig-devices" in err and "at most 1" in err
    code, _, err = run(capsys, "mig", "configure", "-f", bad, "-c", "nope", "--yes")
    assert code == 2 and "no config 'nope'" in err and "configs: x" in err
    code, _, err = run(capsys, "mig", "configure", "--gpus", "5", "--layout", "7g.80gb=1", "--yes")
    assert code == 2 and "no GPU 5" in err
    assert all(not g["mig"]["pending"] for g in show(capsys))


def test_profiles_of_this_node_and_by_model(capsys, node):
    code, out, _ = run(capsys, "mig", "profiles", "-o", "json")
    rows = json.loads(out)
    assert {r["gpu"] for r in rows} == {"H100-80GB"}
    row = next(r for r in rows if r["profile"] == "3g.40gb")
    assert row["profile_id"] == 9 and row["placements"] == ["0:4", "4:4"]
    code, out, _ = run(capsys, "mig", "profiles", "--gpu", "A30", "-o", "json")
    assert [r["profile"] for r in json.loads(out)][:2] == ["1g.6gb", "1g.6gb+me"]
    code, out, err = run(capsys, "mig", "profiles", "--gpu", "T4")
    assert code == 2 and "unknown GPU model 'T4'" in err  # bad input, not a driver failure
    code, out, _ = run(capsys, "mig", "profiles", "--gpu", "nvidia-h100-nvl", "-o", "json")
    assert code == 0 and {r["gpu"] for r in json.loads(out)} == {"H100-NVL"}
    code, out, err = run(capsys, "mig", "profiles", "--gpu", "GH200")
    assert code == 2 and "could be GH200-480GB or GH200-144GB" in err and out == ""


def test_no_permission_is_one_clear_error(capsys, node, monkeypatch):
    """The simulated driver refuses changes as the real one refuses a non-root user."""
    monkeypatch.setenv("GPUCTL_SIM_UNPRIVILEGED", "1")
    code, out, err = run(
        capsys, "mig", "configure", "--gpus", "0", "--layout", "7g.80gb=1", "--reset", "--yes"
    )
    assert code == 1
    assert "step 1 of 2 failed (enable MIG mode on GPU 0)" in err
    assert "insufficient permissions" in err and "run as root" in err
    assert "Traceback" not in err
    monkeypatch.delenv("GPUCTL_SIM_UNPRIVILEGED")
    assert show(capsys)[0]["mig"] == {"current": False, "pending": False}


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_a_gpu_without_mig_is_skipped_by_all_and_refused_by_index(capsys, monkeypatch):
    monkeypatch.setenv("GPUCTL_SIMULATE", "1xH100-80GB,1xT4")
    code, out, _ = run(capsys, "mig", "configure", "--layout", "all-1g.10gb", "--yes", "--reset")
    assert code == 0 and "GPU 1 (Tesla T4): no MIG on this GPU: left as is" in out
    gpus = show(capsys)
    assert gpus[0]["layout"] == {"1g.10gb": 7} and gpus[1]["mig"] is None
    code, _, err = run(capsys, "mig", "configure", "--gpus", "1", "--layout", "1g.10gb=1", "--yes")
    assert code == 2 and "GPU 1 (Tesla T4) does not support MIG" in err
    # Like mig-parted's export, the GPU without MIG is written too (so mig-parted's assert
    # accepts the file on this node), each kind of GPU under its PCI device id.
    code, out, _ = run(capsys, "mig", "export", "-o", "json")
    assert json.loads(out)["mig-configs"]["current"] == [
        {
            "device-filter": "0x233010DE",
            "devices": "all",
            "mig-enabled": True,
            "mig-devices": {"1g.10gb": 7},
        },
        {"device-filter": "0x1EB810DE", "devices": "all", "mig-enabled": False, "mig-devices": {}},
    ]


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_a_failure_a_rerun_cannot_fix_says_so(capsys, node, monkeypatch):
    """An older driver without a function gpuctl needs: re-running would stop at the same
    step, so the hint says how to see and undo what was done instead."""
    mig_on(capsys, 0)
    monkeypatch.setenv("GPUCTL_SIM_WITHOUT", "nvmlGpuInstanceCreateComputeInstance")
    code, _, err = run(capsys, "mig", "configure", "--gpus", "0", "--layout", "3g.40gb=2", "--yes")
    assert code == 1 and "step 1 of 2 failed (create 3g.40gb at slices 0-3)" in err
    assert "running the same command again would stop at the same step" in err
    assert "run the same command again to finish" not in err
    code, _, err = run(capsys, "mig", "configure", "--gpus", "0", "--layout", "3g.40gb=2", "--yes")
    assert code == 1 and "step 1 of 2 failed" in err and "--layout all-disabled" in err


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_a_step_the_driver_cannot_do_fails_the_dry_run(capsys, node, monkeypatch):
    """A driver that lists no GPU-instance profiles (here: one without the call) cannot make
    any: refused before anything is changed, in the dry run as in the real run."""
    mig_on(capsys, 0)
    monkeypatch.setenv("GPUCTL_SIM_WITHOUT", "nvmlDeviceGetGpuInstanceProfileInfo")
    for extra in ("--dry-run", "--yes"):
        code, out, err = run(
            capsys, "mig", "configure", "--gpus", "0", "--layout", "3g.40gb=2", extra
        )
        assert code == 2 and "the driver offers no 3g.40gb on this GPU" in err, err
        assert "dry run" not in out
    monkeypatch.delenv("GPUCTL_SIM_WITHOUT")
    assert show(capsys)[0]["instances"] == []


NVIDIA_DEFAULT = (
    pathlib.Path(gpuctl.sim.__file__).parent / "crds" / "gpu-operator_0400_configmap.yaml"
)


def nvidia_default_config(tmp_path) -> str:
    data = yaml.safe_load(NVIDIA_DEFAULT.read_text())["data"]["config.yaml"]
    p = tmp_path / "config-default.yaml"
    p.write_text(data)
    return str(p)


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_assert_fails_when_a_gpu_matches_no_entry(capsys, monkeypatch, tmp_path):
    # NVIDIA's all-1g.35gb has entries for the H200 (0x2335) and the GB300 only: an H200 NVL
    # beside an H200 is left alone, and mig-parted's assert fails on such a node. So does ours.
    monkeypatch.setenv("GPUCTL_SIMULATE", "1xH200,1xH200-NVL")
    cfg = nvidia_default_config(tmp_path)
    code, out, err = run(
        capsys, "mig", "configure", "-f", cfg, "-c", "all-1g.35gb", "--yes", "--reset"
    )
    assert code == 0, err
    assert "GPU 1 (H200-NVL): matched by no entry: left as is" in out
    assert [g["layout"] for g in show(capsys)] == [{"1g.35gb": 4}, {}]
    code, _, err = run(capsys, "mig", "assert", "-f", cfg, "-c", "all-1g.35gb")
    assert code == 1 and "GPU 1 (H200-NVL): matched by no entry of the config" in err
    assert "GPU 0" not in err.split("hint")[0]


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_export_of_a_mixed_node_is_asserted_back_and_shorthands_assert_like_files(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("GPUCTL_SIMULATE", "1xH100-80GB,1xT4")
    assert run(capsys, "mig", "configure", "--layout", "all-1g.10gb", "--yes", "--reset")[0] == 0
    code, exported, _ = run(capsys, "mig", "export")
    path = write(tmp_path, exported, "exported.yaml")
    assert run(capsys, "mig", "assert", "-f", path, "-c", "current")[0] == 0
    # `all` asks MIG of the T4 too: configure skips it, assert fails, as in mig-parted.
    code, _, err = run(capsys, "mig", "assert", "--layout", "all-1g.10gb")
    assert code == 1 and "GPU 1 (Tesla T4): no MIG, but the config enables MIG on it" in err
    assert run(capsys, "mig", "assert", "--gpus", "0", "--layout", "all-1g.10gb")[0] == 0


def docs_example() -> str:
    text = (pathlib.Path(__file__).parents[2] / "docs" / "mig.md").read_text()
    return text.split("### mig-parted `v1` files", 1)[1].split("```yaml\n", 1)[1].split("```")[0]


@pytest.mark.integration  # resets a GPU through the simulated nvidia-smi (a process)
def test_the_example_in_the_docs_is_accepted_as_written(capsys, node, tmp_path):
    path = write(tmp_path, docs_example(), "example.yaml")
    code, out, err = run(capsys, "mig", "configure", "-f", path, "-c", "mixed", "--yes", "--reset")
    assert code == 0, err
    assert "the last matching entry decides" in out
    assert run(capsys, "mig", "assert", "-f", path, "-c", "mixed")[0] == 0
    assert [g["layout"] for g in show(capsys)] == [{"1g.10gb": 7}] * 2


def test_configure_and_assert_print_data_with_o_json(capsys, node):
    args = ["--gpus", "0", "--layout", "3g.40gb=2"]
    code, text, _ = run(capsys, "mig", "configure", *args, "--dry-run")
    assert code == 0 and "dry run: nothing was changed" in text
    code, out, err = run(capsys, "mig", "configure", *args, "--dry-run", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)  # stdout is the document alone; the plan's text went to stderr
    assert err == text
    assert plan["dryRun"] is True and [g["index"] for g in plan["gpus"]] == [0]
    assert plan["gpus"][0]["steps"] and plan["gpus"][0]["applied"] is False
    assert (
        plan["gpus"][0]["steps"]
        == [line.strip() for line in text.splitlines()[1:] if line.startswith("  ")][
            -len(plan["gpus"][0]["steps"]) :
        ]
    )
    code, out, err = run(capsys, "mig", "assert", *args, "-o", "yaml")
    assert code == 1 and "not applied" in err
    steps = len(plan["gpus"][0]["steps"])
    assert yaml.safe_load(out) == {
        "applied": False,
        "gpus": [
            {"gpu": plan["gpus"][0]["gpu"], "index": 0, "difference": f"{steps} step(s) needed"}
        ],
    }
