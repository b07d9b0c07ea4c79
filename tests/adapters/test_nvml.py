"""gpuctl.adapters.nvml over the simulated driver: samples, the N/A wrapper, MIG changes and
the errors the driver gives, as gpuctl's own error types."""

import os
import subprocess
import sys

import pytest

import gpuctl.sim
from gpuctl.adapters.nvml import ComputeInstance, GpuInstance, Nvml, NvmlError, Process
from gpuctl.common.errors import BackendError, GpuctlError

pytestmark = pytest.mark.integration  # its MIG set-up resets a GPU through the simulated nvidia-smi


@pytest.fixture
def mig_node():
    """GPU 0 of 2xH100-80GB with MIG on: 3g.40gb@4 (one CI, one process), 1g.10gb@0 (one CI)."""
    with Nvml(gpuctl.sim.driver("2xH100-80GB")) as nvml:
        nvml.set_mig_mode(0, True)
        nvml.reset_gpu(0)
        big = nvml.create_gpu_instance(0, 9, 4)
        big_ci = nvml.create_compute_instance(0, big, 2)
        small = nvml.create_gpu_instance(0, 19, 0)
        nvml.create_compute_instance(0, small, 0)
    gpuctl.sim.add_process(0, 3001, 5000, name="train", user="alice", gi_id=big, ci_id=big_ci)
    gpuctl.sim.add_process(1, 3002, 7000, name="serve", user="bob")
    return big, big_ci, small


def test_sample_reads_every_field(mig_node, monkeypatch):
    big, big_ci, small = mig_node
    monkeypatch.setenv("GPUCTL_SIM_CLOCK", "1700000000")
    with Nvml(gpuctl.sim.driver("2xH100-80GB")) as nvml:
        sample = nvml.sample()
    assert sample.simulated and sample.driver_version
    g0, g1 = sample.gpus
    assert (g0.index, g0.name, g0.memory_total_mib) == (0, "NVIDIA H100 80GB HBM3", 81559)
    assert g0.mig_mode == g0.mig_mode_pending == 1
    assert g0.utilization_gpu is None  # NVML has no counters with MIG on
    assert g0.fan_percent is None and g1.fan_percent is None  # passively cooled
    assert [
        (m.gi_id, m.ci_id, m.profile, m.placement_start, m.placement_size, m.memory_used_mib)
        for m in g0.mig_devices
    ] == [(big, big_ci, "3g.40gb", 4, 4, 5000), (small, 0, "1g.10gb", 0, 1, 0)]
    assert g0.processes == [Process(3001, "train", "alice", 5000, big, big_ci)]
    assert g1.processes == [Process(3002, "serve", "bob", 7000, None, None)]
    assert g1.memory_used_mib == 7000 and g1.mig_mode == 0 and 30 <= g1.utilization_gpu <= 100
    assert g1.power_w <= g1.power_limit_w == 700 and g1.temperature_c > 30


def test_a_real_process_gets_its_user_and_name_from_the_os():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        gpuctl.sim.add_process(0, child.pid, 100, name="python3", user="not-used", spec="1xA30")
        with Nvml(gpuctl.sim.driver("1xA30")) as nvml:
            (p,) = nvml.processes(0)
        import pwd

        assert p.user == pwd.getpwuid(os.getuid()).pw_name and p.name == "python3"
    finally:
        child.kill()
        child.wait(10)


def test_functions_an_old_driver_lacks_read_as_none(monkeypatch):
    monkeypatch.setenv("GPUCTL_SIM_WITHOUT", "nvmlDeviceGetPowerUsage,nvmlDeviceGetMemoryInfo_v2")
    gpuctl.sim.add_process(0, 10, 2048, spec="1xA100-40GB")
    with Nvml(gpuctl.sim.driver("1xA100-40GB")) as nvml:
        g = nvml.sample().gpus[0]
    assert g.power_w is None and g.power_limit_w == 400
    assert (g.memory_used_mib, g.memory_total_mib) == (2048, 40960)  # v1 call instead


def test_mig_layout_round_trip():
    with Nvml(gpuctl.sim.driver("1xA100-40GB")) as nvml:
        assert nvml.mig_mode(0) == (0, 0)
        assert nvml.gpu_instances(0) == []
        nvml.set_mig_mode(0, True)
        assert nvml.mig_mode(0) == (0, 1)
        nvml.reset_gpu(0)
        assert nvml.mig_mode(0) == (1, 1)
        a = nvml.create_gpu_instance(0, 14, 4)
        b = nvml.create_gpu_instance(0, 9, 0)
        ca = nvml.create_compute_instance(0, a, 1)
        c1 = nvml.create_compute_instance(0, b, 0)
        c2 = nvml.create_compute_instance(0, b, 1)
        assert nvml.gpu_instances(0) == sorted(
            [
                GpuInstance(a, 14, 4, 2, [ComputeInstance(ca, 1)], profile_index=1),
                GpuInstance(
                    b, 9, 0, 4, [ComputeInstance(c1, 0), ComputeInstance(c2, 1)], profile_index=2
                ),
            ],
            key=lambda g: g.gi_id,
        )
        nvml.destroy_compute_instance(0, b, c1)
        nvml.destroy_compute_instance(0, b, c2)
        nvml.destroy_gpu_instance(0, b)
        assert [g.gi_id for g in nvml.gpu_instances(0)] == [a]
        assert nvml.gpu_name(0) == "NVIDIA A100-SXM4-40GB" and nvml.gpu_uuid(0).startswith("GPU-")


def test_refusals_become_nvml_errors_with_code_message_and_hint(mig_node):
    big, big_ci, small = mig_node
    with Nvml(gpuctl.sim.driver("2xH100-80GB")) as nvml:
        cases = [
            (
                lambda: nvml.create_gpu_instance(0, 9, 0),
                23,
                "create GPU instance (profile id 9 at slice 0)",
            ),
            (lambda: nvml.create_gpu_instance(0, 14, 3), 2, "slice 3"),
            (lambda: nvml.create_gpu_instance(0, 5, 0), 23, "profile id 5"),
            (lambda: nvml.create_gpu_instance(0, 6, 0), 3, "profile id 6"),  # an A30 id
            (lambda: nvml.create_gpu_instance(1, 19, 0), 3, "GPU 1"),  # MIG off
            (lambda: nvml.destroy_gpu_instance(0, small), 19, f"destroy GPU instance {small}"),
            (lambda: nvml.destroy_compute_instance(0, big, big_ci), 19, "destroy compute instance"),
            (lambda: nvml.reset_gpu(0), 19, "GPU 0: reset"),
            (lambda: nvml.destroy_gpu_instance(0, 99), 6, "GPU instance 99"),
        ]
        for call, code, words in cases:
            with pytest.raises(NvmlError) as e:
                call()
            assert e.value.code == code and words in e.value.message, e.value.message
            assert f"(NVML code {code})" in e.value.message
            assert isinstance(e.value, BackendError) and e.value.exit_code == 1
        with pytest.raises(NvmlError) as e:
            nvml.reset_gpu(1)
        assert e.value.hint and "processes" in e.value.hint


def test_no_driver_is_one_clear_error(no_nvidia_driver):
    with pytest.raises(GpuctlError) as e:
        with Nvml():
            pass
    assert "no NVIDIA driver" in e.value.message and "--simulate" in e.value.hint
    assert not isinstance(e.value, NvmlError) and e.value.exit_code == 1


def test_session_must_be_open():
    with pytest.raises(GpuctlError, match="not open"):
        Nvml(gpuctl.sim.driver("1xA30")).gpu_count()


def test_without_root_layout_calls_are_refused_and_placements_read_na(mig_node, monkeypatch):
    big, big_ci, small = mig_node
    monkeypatch.setenv("GPUCTL_SIM_UNPRIVILEGED", "1")
    with Nvml(gpuctl.sim.driver("2xH100-80GB")) as nvml:
        g0 = nvml.sample().gpus[0]
        assert [(m.gi_id, m.profile, m.placement_start) for m in g0.mig_devices] == [
            (big, "3g.40gb", None),
            (small, "1g.10gb", None),
        ]
        assert [p.pid for p in g0.processes] == [3001]
        for call in (
            lambda: nvml.set_mig_mode(1, True),
            lambda: nvml.reset_gpu(1),
            lambda: nvml.gpu_instances(0),
            lambda: nvml.create_gpu_instance(0, 19, 1),
            lambda: nvml.destroy_gpu_instance(0, small),
        ):
            with pytest.raises(NvmlError) as e:
                call()
            assert e.value.code == 4 and "run as root" in e.value.hint
        assert nvml.mig_mode(1) == (0, 0)


def test_a_reset_runs_nvidia_smi_which_the_simulated_node_answers(mig_node, monkeypatch):
    # nvidia-smi's own words in the error show the reset went through the stand-in.
    with Nvml(gpuctl.sim.driver("2xH100-80GB")) as nvml:
        with pytest.raises(NvmlError) as e:
            nvml.reset_gpu(0)
        assert e.value.code == 19 and "Please first kill all processes" in e.value.message
        monkeypatch.setenv("GPUCTL_SIM_UNPRIVILEGED", "1")
        with pytest.raises(NvmlError) as e:
            nvml.reset_gpu(1)
        assert e.value.code == 4 and "Insufficient Permissions" in e.value.message


def test_a_session_on_the_real_driver_loads_nothing_of_the_simulator():
    code = (
        "import sys\n"
        "from gpuctl.adapters.nvml import Nvml\n"
        "from gpuctl.common.errors import GpuctlError\n"
        "try:\n"
        "    Nvml().open()\n"
        "except GpuctlError:\n"
        "    pass  # no driver on this machine\n"
        "print(sorted(m for m in sys.modules if m.startswith('gpuctl.sim')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GPUCTL_SIMULATE"}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stderr


@pytest.mark.parametrize(
    "missing, what",
    [
        ("nvmlInitWithFlags", "cannot initialize NVML"),
        ("nvmlDeviceGetCount_v2", "count GPUs"),
        ("nvmlDeviceGetHandleByIndex_v2", "GPU 0"),
    ],
)
def test_a_missing_nvml_function_is_named(capsys, monkeypatch, missing, what):
    from tests.clirun import run_gpuctl

    monkeypatch.setenv("GPUCTL_SIM_WITHOUT", missing)
    code, out, err = run_gpuctl(capsys, "top", "--simulate", "1xA100-40GB", "--once")
    assert code == 1 and out == "" and "Traceback" not in err
    assert err.splitlines() == [
        f"gpuctl: error: {what}: this driver's NVML library has no function {missing} "
        "(NVML code 13)",
        "  hint: the NVIDIA driver is older than gpuctl needs: upgrade it",
    ]
