"""The simulated node's `nvidia-smi --gpu-reset`: what it does to the node, and nvidia-smi's
words and exit statuses, as gpuctl's NVML adapter reads them."""

import os
import subprocess

import pytest

import gpuctl.sim

pytestmark = pytest.mark.integration  # runs the simulated nvidia-smi as a process

SPEC = "2xA30"


def nvidia_smi(*args, **env):
    return subprocess.run(
        [*gpuctl.sim.nvidia_smi_command(SPEC), *args],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_reset_applies_the_pending_mig_mode_and_clears_instances():
    node = gpuctl.sim.open_node(SPEC)
    node.set_mig_mode(1, 1)
    done = nvidia_smi("--gpu-reset", "-i", "1")
    assert done.returncode == 0, done
    assert done.stdout == "GPU 00000000:26:00.0 was successfully reset.\n"
    node.refresh()
    assert node.gpu(1)["mig_current"] == 1 and node.gpu(0)["mig_current"] == 0
    node.create_gpu_instance(1, 14, 0)
    assert nvidia_smi("-r", "-i", "1").returncode == 0
    node.refresh()
    assert node.gpu(1)["gpu_instances"] == []


def test_a_gpu_with_processes_is_in_use_by_another_client():
    gpuctl.sim.add_process(0, 42, 100, spec=SPEC)
    refused = nvidia_smi("--gpu-reset", "-i", "0")
    assert refused.returncode == 255
    lines = refused.stdout.splitlines()
    assert lines[:2] == [
        "The following GPUs could not be reset:",
        "  GPU 00000000:18:00.0: In use by another client",
    ]
    assert lines[-1].startswith("1 device is currently being used by one or more other processes")


@pytest.mark.parametrize(
    "args,env,code,words",
    [
        (("-i", "0"), {}, 2, "required: -r/--gpu-reset"),
        (("--gpu-reset", "-i", "2"), {}, 6, "No devices were found"),
        (
            ("--gpu-reset", "-i", "0"),
            {"GPUCTL_SIM_UNPRIVILEGED": "1"},
            4,
            "Insufficient Permissions",
        ),
    ],
)
def test_refusals_have_nvidia_smis_exit_status(args, env, code, words):
    node = gpuctl.sim.open_node(SPEC)
    node.set_mig_mode(0, 1)
    run = nvidia_smi(*args, **env)
    assert run.returncode == code and words in run.stdout + run.stderr, run
    node.refresh()
    assert node.gpu(0)["mig_current"] == 0  # nothing was reset


def test_a_bad_node_is_the_simulators_error():
    run = subprocess.run(
        [*gpuctl.sim.nvidia_smi_command("8xV100"), "--gpu-reset", "-i", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 255 and "gpuctl-sim: error: bad simulated node spec" in run.stderr
