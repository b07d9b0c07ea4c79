"""The simulated NVML behaves like the hardware, seen through nvidia-ml-py's own pynvml code."""

import ctypes
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuctl.sim
from gpuctl.common.errors import UsageError
from gpuctl.gpus import geometry
from gpuctl.sim.node import Node, SimError, canonical_spec, parse_spec
from tests import ROOT


@pytest.fixture
def nvml():
    """pynvml over a fresh simulated node; yields (module, open) where open(spec) inits it."""
    opened = []

    def open_node(spec):
        n = gpuctl.sim.load_pynvml(spec)
        n.nvmlInit()
        opened.append(n)
        return n

    yield open_node
    for n in opened:
        n.nvmlShutdown()


def enable_mig(n, index=0):
    h = n.nvmlDeviceGetHandleByIndex(index)
    n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE)
    gpuctl.sim.reset_gpu(index)
    return h


def place(n, h, profile_id, start, size):
    pl = n.c_nvmlGpuInstancePlacement_t(start, size)
    return n.nvmlDeviceCreateGpuInstanceWithPlacement(h, profile_id, ctypes.byref(pl))


# ---- node specs ------------------------------------------------------------------------------


def test_spec_parsing_builds_gpus_in_index_order():
    gpus = parse_spec("2xH200,2xA30")
    assert [g.short_name for g in gpus] == ["H200", "H200", "A30", "A30"]
    assert len(parse_spec("8xH100-80GB")) == 8
    assert canonical_spec("1xA30, 1x a30 ,h100 80gb hbm3") == "2xA30,1xH100-80GB"


@pytest.mark.parametrize("spec", ["", "8x", "0xA30", "8xV100", "2xH200,,2xA30", "5000xA30"])
def test_bad_spec_is_a_usage_error(spec):
    with pytest.raises(UsageError) as e:
        parse_spec(spec)
    assert e.value.exit_code == 2 and "spec" in e.value.message


def test_state_file_of_another_node_is_refused(tmp_path):
    path = str(tmp_path / "s.json")
    Node("2xA30", path)
    with pytest.raises(Exception, match="holds node '2xA30', not '1xH200'"):
        Node("1xH200", path)


# ---- device readings ---------------------------------------------------------------------------


def test_devices_report_their_model(nvml):
    n = nvml("2xH200,2xA30")
    assert n.nvmlDeviceGetCount() == 4
    names = [n.nvmlDeviceGetName(n.nvmlDeviceGetHandleByIndex(i)) for i in range(4)]
    assert names == ["NVIDIA H200", "NVIDIA H200", "NVIDIA A30", "NVIDIA A30"]
    h = n.nvmlDeviceGetHandleByIndex(2)
    mem = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
    assert mem.total == geometry.find_model("A30").memory_total_mib * 1024 * 1024
    assert mem.used == 0 and mem.free == mem.total
    uuids = {n.nvmlDeviceGetUUID(n.nvmlDeviceGetHandleByIndex(i)) for i in range(4)}
    assert len(uuids) == 4 and all(u.startswith("GPU-") for u in uuids)
    assert n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByUUID(sorted(uuids)[0])) in range(4)
    with pytest.raises(n.NVMLError_InvalidArgument):
        n.nvmlDeviceGetHandleByIndex(4)
    with pytest.raises(n.NVMLError_NotSupported):  # data-center boards have no fan
        n.nvmlDeviceGetFanSpeed(h)


def test_utilization_follows_processes_and_moves_with_time(nvml, monkeypatch):
    n = nvml("2xH100-80GB")
    gpuctl.sim.add_process(1, 4321, 1000)
    h0, h1 = (n.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    seen = set()
    for t in range(1_000_000, 1_000_200, 10):
        monkeypatch.setenv("GPUCTL_SIM_CLOCK", str(t))
        assert n.nvmlDeviceGetUtilizationRates(h0).gpu == 0  # idle GPU sleeps
        u = n.nvmlDeviceGetUtilizationRates(h1).gpu
        assert 0 <= u <= 100
        seen.add(u)
    assert len(seen) > 5  # it moves
    # ... and the same clock and seed give the same reading.
    monkeypatch.setenv("GPUCTL_SIM_CLOCK", "1000050")
    first = n.nvmlDeviceGetUtilizationRates(h1).gpu
    again = gpuctl.sim.load_pynvml("2xH100-80GB")
    again.nvmlInit()
    assert again.nvmlDeviceGetUtilizationRates(again.nvmlDeviceGetHandleByIndex(1)).gpu == first


def test_processes_are_listed_with_memory(nvml):
    n = nvml("1xH100-80GB")
    gpuctl.sim.add_process(0, 111, 2048, name="train")
    gpuctl.sim.add_process(0, 222, 1024)
    h = n.nvmlDeviceGetHandleByIndex(0)
    procs = n.nvmlDeviceGetComputeRunningProcesses(h)
    assert {(p.pid, p.usedGpuMemory) for p in procs} == {(111, 2048 << 20), (222, 1024 << 20)}
    assert n.nvmlDeviceGetMemoryInfo(h).used == 3072 << 20
    assert n.nvmlSystemGetProcessName(111) == "train"
    assert gpuctl.sim.remove_process(111) == 1
    assert [p.pid for p in n.nvmlDeviceGetComputeRunningProcesses(h)] == [222]
    with pytest.raises(SimError):  # more memory than the GPU has
        gpuctl.sim.add_process(0, 333, 90_000)


# ---- MIG mode --------------------------------------------------------------------------------


def test_mig_mode_change_is_pending_until_reset(nvml):
    n = nvml("1xA100-40GB")
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceGetMigMode(h) == [0, 0]
    status = n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE)
    assert status == n.NVML_ERROR_RESET_REQUIRED
    assert n.nvmlDeviceGetMigMode(h) == [0, 1]
    gpuctl.sim.reset_gpu(0)
    assert n.nvmlDeviceGetMigMode(h) == [1, 1]


def test_reset_with_processes_is_in_use_and_changes_nothing(nvml):
    n = nvml("1xA100-40GB")
    h = n.nvmlDeviceGetHandleByIndex(0)
    gpuctl.sim.add_process(0, 99, 100)
    n.nvmlDeviceSetMigMode(h, 1)
    with pytest.raises(SimError) as e:
        gpuctl.sim.reset_gpu(0)
    assert e.value.code == n.NVML_ERROR_IN_USE
    assert n.nvmlDeviceGetMigMode(h) == [0, 1]


def test_a_gpu_without_mig_answers_mig_calls_as_the_driver_does(nvml):
    n = nvml("1xT4")
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceGetName(h) == "Tesla T4"
    with pytest.raises(n.NVMLError_NotSupported):  # mig-parted's "MIG capable?" test
        n.nvmlDeviceGetMigMode(h)
    with pytest.raises(n.NVMLError_NotSupported):
        n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE)
    with pytest.raises(n.NVMLError_NotSupported):
        n.nvmlDeviceGetGpuInstanceProfileInfo(h, n.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert n.nvmlDeviceGetMaxMigDeviceCount(h) == 0  # SUCCESS, 0: documented so
    assert n.nvmlDeviceGetPciInfo(h).pciDeviceId == 0x1EB810DE
    assert n.nvmlDeviceGetUtilizationRates(h).gpu == 0


def test_gpu_instance_calls_need_mig_enabled(nvml):
    n = nvml("1xH100-80GB")
    h = n.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(n.NVMLError_NotSupported):
        place(n, h, 9, 0, 4)
    with pytest.raises(n.NVMLError_NotSupported):
        n.nvmlDeviceGetGpuInstanceRemainingCapacity(h, 9)
    assert n.nvmlDeviceGetMaxMigDeviceCount(h) == 0


def test_utilization_is_not_supported_with_mig_on(nvml):
    n = nvml("1xH100-80GB")
    h = enable_mig(n)
    with pytest.raises(n.NVMLError_NotSupported):
        n.nvmlDeviceGetUtilizationRates(h)


# ---- GPU instances -------------------------------------------------------------------------------


def test_profile_info_takes_the_index_constant_and_returns_the_id(nvml):
    n = nvml("1xH100-80GB")
    h = enable_mig(n)
    info = n.nvmlDeviceGetGpuInstanceProfileInfo(h, n.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert info.id == 19 and info.sliceCount == 1 and info.instanceCount == 7
    assert info.memorySizeMB == geometry.find_model("H100-80GB").profile("1g.10gb").memory_mib
    info = n.nvmlDeviceGetGpuInstanceProfileInfo(h, n.NVML_GPU_INSTANCE_PROFILE_3_SLICE)
    assert (info.id, info.name) == (9, "MIG 3g.40gb")
    with pytest.raises(n.NVMLError_InvalidArgument):
        n.nvmlDeviceGetGpuInstanceProfileInfo(h, n.NVML_GPU_INSTANCE_PROFILE_COUNT)
    with pytest.raises(n.NVMLError_NotSupported):  # a Blackwell-only profile
        n.nvmlDeviceGetGpuInstanceProfileInfo(h, n.NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX)


@pytest.mark.parametrize("model", [m.short_name for m in geometry.models()])
def test_possible_placements_are_the_geometry_tables(nvml, model):
    n = nvml(model)
    h = n.nvmlDeviceGetHandleByIndex(0)
    for p in gpuctl.sim.node.sim_profiles(geometry.find_model(model)):
        count = ctypes.c_uint(0)
        n.nvmlDeviceGetGpuInstancePossiblePlacements(h, p.profile_id, None, ctypes.byref(count))
        array = (n.c_nvmlGpuInstancePlacement_t * count.value)()
        n.nvmlDeviceGetGpuInstancePossiblePlacements(h, p.profile_id, array, ctypes.byref(count))
        assert [(a.start, a.size) for a in array] == [(s, p.profile.size) for s in p.profile.starts]


def test_create_with_placement_and_read_back(nvml):
    n = nvml("1xH100-80GB")
    h = enable_mig(n)
    gi = place(n, h, 9, 4, 4)
    info = n.nvmlGpuInstanceGetInfo(gi)
    assert (info.profileId, info.placement.start, info.placement.size) == (9, 4, 4)
    array = (n.c_nvmlGpuInstance_t * 2)()
    count = ctypes.c_uint(2)
    n.nvmlDeviceGetGpuInstances(h, 9, array, ctypes.byref(count))
    assert count.value == 1 and n.nvmlGpuInstanceGetInfo(array[0]).id == info.id
    assert n.nvmlDeviceGetGpuInstanceRemainingCapacity(h, 9) == 1
    assert n.nvmlDeviceGetGpuInstanceRemainingCapacity(h, 0) == 0  # 7g needs the whole GPU


@pytest.mark.parametrize(
    "profile_id,start,size,error",
    [
        (9, 2, 4, "NVMLError_InvalidArgument"),  # 3g starts only at 0 or 4
        (14, 6, 2, "NVMLError_InvalidArgument"),  # no 2g at slice 6
        (9, 0, 3, "NVMLError_InvalidArgument"),  # wrong placement size
        (0, 0, 8, "NVMLError_InsufficientResources"),  # overlaps the 3g at 4
        (14, 4, 2, "NVMLError_InsufficientResources"),
        (21, 0, 1, "NVMLError_NotSupported"),  # an A30 profile id, not on H100
    ],
)
def test_create_refusals(nvml, profile_id, start, size, error):
    n = nvml("1xH100-80GB")
    h = enable_mig(n)
    place(n, h, 9, 4, 4)
    with pytest.raises(getattr(n, error)):
        place(n, h, profile_id, start, size)


def test_media_extension_profile_is_capped_at_one(nvml):
    n = nvml("1xH100-80GB")
    h = enable_mig(n)
    place(n, h, 20, 0, 1)
    with pytest.raises(n.NVMLError_InsufficientResources):
        place(n, h, 20, 1, 1)
    place(n, h, 19, 1, 1)  # the plain 1g still fits


@pytest.mark.parametrize(
    "spec,first,second",
    [
        ("1xA30", (21, 0, 1), (6, 2, 2)),  # 1g.6gb+me, then 2g.12gb+me: one media set
        ("1xRTX-PRO-6000", (65, 0, 3), (64, 6, 6)),  # +me.all leaves room for -me profiles only
        ("1xRTX-PRO-6000", (65, 0, 3), (14, 3, 3)),
    ],
)
def test_media_engines_are_shared_by_all_profiles(nvml, spec, first, second):
    n = nvml(spec)
    h = enable_mig(n)
    place(n, h, *first)
    with pytest.raises(n.NVMLError_InsufficientResources):
        place(n, h, *second)
    assert n.nvmlDeviceGetGpuInstanceRemainingCapacity(h, second[0]) == 0
    if spec == "1xRTX-PRO-6000":
        place(n, h, 67, 3, 3)  # 1g.24gb-me


def test_auto_placement_fills_until_insufficient(nvml):
    n = nvml("1xA100-40GB")
    h = enable_mig(n)
    starts = [
        n.nvmlGpuInstanceGetInfo(n.nvmlDeviceCreateGpuInstance(h, 19)).placement.start
        for _ in range(7)
    ]
    assert sorted(starts) == list(range(7))
    with pytest.raises(n.NVMLError_InsufficientResources):
        n.nvmlDeviceCreateGpuInstance(h, 19)


def test_destroy_refused_with_compute_instances_or_processes(nvml):
    n = nvml("1xH100-80GB")
    h = enable_mig(n)
    gi = place(n, h, 9, 0, 4)
    gi_id = n.nvmlGpuInstanceGetInfo(gi).id
    ci = n.nvmlGpuInstanceCreateComputeInstance(gi, n.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
    ci_id = n.nvmlComputeInstanceGetInfo_v2(ci).id
    with pytest.raises(n.NVMLError_InUse):
        n.nvmlGpuInstanceDestroy(gi)
    gpuctl.sim.add_process(0, 555, 500, gi_id=gi_id, ci_id=ci_id)
    with pytest.raises(n.NVMLError_InUse):
        n.nvmlComputeInstanceDestroy(ci)
    gpuctl.sim.remove_process(555)
    n.nvmlComputeInstanceDestroy(ci)
    n.nvmlGpuInstanceDestroy(gi)
    with pytest.raises(n.NVMLError_NotFound):
        n.nvmlDeviceGetGpuInstanceById(h, gi_id)


def test_a_freed_compute_slice_is_reused_without_overlap(nvml):
    n = nvml("1xH100-80GB")
    h = enable_mig(n)
    gi = place(n, h, 9, 0, 4)  # 3g.40gb: three 1-slice compute instances
    cis = [n.nvmlGpuInstanceCreateComputeInstance(gi, 0) for _ in range(3)]
    n.nvmlComputeInstanceDestroy(cis[0])
    assert n.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 1) == 0  # 2c: slices 1-2 busy
    again = n.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    spans = sorted(
        (i.placement.start, i.placement.size)
        for i in map(n.nvmlComputeInstanceGetInfo, [again] + cis[1:])
    )
    assert spans == [(0, 1), (1, 1), (2, 1)]  # slice 0 again, not 2 a second time
    with pytest.raises(n.NVMLError_InsufficientResources):
        n.nvmlGpuInstanceCreateComputeInstance(gi, 0)


def test_compute_instance_profiles_fit_their_gpu_instance(nvml):
    n = nvml("1xA100-40GB")
    h = enable_mig(n)
    gi = place(n, h, 9, 0, 4)  # 3g.20gb: 1c x3, 2c x1, 3c x1 (MIG guide -lcip)
    counts = {
        c: n.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, c, 0).instanceCount for c in (0, 1, 2)
    }
    assert counts == {0: 3, 1: 1, 2: 1}
    with pytest.raises(n.NVMLError_NotSupported):
        n.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, n.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, 0
        )
    n.nvmlGpuInstanceCreateComputeInstance(gi, 1)
    n.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    with pytest.raises(n.NVMLError_InsufficientResources):
        n.nvmlGpuInstanceCreateComputeInstance(gi, 0)


def test_mig_devices_enumerate_compute_instances(nvml):
    n = nvml("1xH100-80GB")
    h = enable_mig(n)
    gi = place(n, h, 15, 6, 2)  # 1g.20gb: Hopper's default CI profile is 1_SLICE_REV1
    n.nvmlGpuInstanceCreateComputeInstance(gi, n.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
    assert n.nvmlDeviceGetMaxMigDeviceCount(h) == 7
    mig = n.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)
    assert n.nvmlDeviceIsMigDeviceHandle(mig).value == 1
    assert n.nvmlDeviceGetName(mig) == "NVIDIA H100 80GB HBM3 MIG 1g.20gb"
    assert n.nvmlDeviceGetUUID(mig).startswith("MIG-")
    assert n.nvmlDeviceGetMemoryInfo(mig).total == 20096 << 20
    parent = n.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
    assert n.nvmlDeviceGetIndex(parent) == 0
    with pytest.raises(n.NVMLError_NotFound):
        n.nvmlDeviceGetMigDeviceHandleByIndex(h, 1)


def test_reset_clears_mig_instances(nvml):
    n = nvml("1xH100-80GB")
    h = enable_mig(n)
    place(n, h, 0, 0, 8)
    gpuctl.sim.reset_gpu(0)
    assert n.nvmlDeviceGetGpuInstanceRemainingCapacity(h, 0) == 1


def test_error_strings_and_classes_are_pynvml_s(nvml):
    n = nvml("1xA30")
    h = enable_mig(n)
    with pytest.raises(n.NVMLError) as e:
        place(n, h, 0, 0, 4)
        place(n, h, 0, 0, 4)
    assert type(e.value) is n.NVMLError_InsufficientResources
    assert e.value.value == 23 and "Insufficient Resources" in str(e.value)


# ---- state shared between commands --------------------------------------------------------------


@pytest.mark.integration
def test_state_persists_across_processes(tmp_path):
    state = str(tmp_path / "shared.json")
    script = (
        "import gpuctl.sim, ctypes; n = gpuctl.sim.load_pynvml('2xA100-40GB'); n.nvmlInit();"
        "h = n.nvmlDeviceGetHandleByIndex(1); n.nvmlDeviceSetMigMode(h, 1)"
    )
    env = dict(os.environ, PYTHONPATH=ROOT, GPUCTL_SIM_STATE=state)
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    n = gpuctl.sim.load_pynvml("2xA100-40GB", state)
    n.nvmlInit()
    assert n.nvmlDeviceGetMigMode(n.nvmlDeviceGetHandleByIndex(1)) == [0, 1]
    assert json.load(open(state))["gpus"][1]["mig_pending"] == 1


def test_a_session_sees_changes_made_by_another(nvml):
    n = nvml("1xH100-80GB")
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceGetComputeRunningProcesses(h) == []
    gpuctl.sim.add_process(0, 77, 10)  # another command, through the state file
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert [p.pid for p in n.nvmlDeviceGetComputeRunningProcesses(h)] == [77]


# ---- invariants under any sequence of operations ----------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["create", "destroy"]),
        st.sampled_from([19, 20, 15, 14, 9, 5, 0]),
        st.integers(0, 7),
    ),
    max_size=25,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_any_sequence_keeps_the_hardware_rules(tmp_path, ops):
    node = Node("1xH100-80GB", str(tmp_path / f"h{abs(hash(tuple(ops)))}.json"))
    node.set_mig_mode(0, 1)
    node.reset(0)
    model = geometry.find_model("H100-80GB")
    for op, pid, arg in ops:
        try:
            if op == "create":
                node.create_gpu_instance(0, pid, arg)
            else:
                gis = node.gpu(0)["gpu_instances"]
                if gis:
                    node.destroy_gpu_instance(0, gis[arg % len(gis)]["id"])
        except SimError as e:
            assert e.code in (2, 23)
    gis = node.gpu(0)["gpu_instances"]
    slices = [s for gi in gis for s in range(gi["start"], gi["start"] + gi["size"])]
    assert len(slices) == len(set(slices)) and all(0 <= s < 8 for s in slices)
    assert sum(model.profile_by_id(gi["profile_id"]).slices for gi in gis) <= 7
    for p in model.profiles:
        assert sum(1 for gi in gis if gi["profile_id"] == p.profile_id) <= p.max_instances
        assert all(gi["start"] in p.starts for gi in gis if gi["profile_id"] == p.profile_id)
    # ... and what is saved is what a new session reads.
    assert Node("1xH100-80GB", node.path).gpu(0)["gpu_instances"] == gis


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s.update(gpus=s["gpus"][:1]),
        lambda s: s["gpus"][0].pop("mig_pending"),
        lambda s: s["processes"].append({"pid": 1, "gpu": 7}),
        lambda s: s["processes"].append(
            {
                "pid": 1,
                "name": "x",
                "user": "u",
                "gpu": 9,
                "gi_id": None,
                "ci_id": None,
                "used_memory_mib": 1,
            }
        ),
        # Each of these was a traceback in top / mig show before the whole state was checked.
        lambda s: s["gpus"][0].update(gpu_instances=5),
        lambda s: s["gpus"][0].update(mig_current="1"),
        lambda s: s["gpus"][0].update(uuid=5),
        lambda s: s["gpus"][0]["gpu_instances"][0].update(start="0"),
        lambda s: s["gpus"][0]["gpu_instances"][0].update(profile_id=99),
        lambda s: s["gpus"][0]["gpu_instances"][1].update(start=0),  # overlaps the first
        lambda s: s["gpus"][0]["gpu_instances"][0].update(compute_instances=None),
        lambda s: s["gpus"][0]["gpu_instances"][0]["compute_instances"][0].update(profile_id=99),
        lambda s: s["gpus"][0]["gpu_instances"][0]["compute_instances"][0].update(start=1),
        lambda s: s["gpus"][1]["gpu_instances"].append(s["gpus"][0]["gpu_instances"][0]),  # MIG off
        lambda s: s["processes"][0].update(used_memory_mib="5"),
        lambda s: s["processes"][0].update(gi_id=77),
        lambda s: s["processes"].append(dict(s["processes"][0])),
    ],
)
def test_a_damaged_state_file_is_one_clear_error(tmp_path, damage):
    from gpuctl.common.errors import GpuctlError

    path = str(tmp_path / "s.json")
    node = Node("2xA30", path)
    node.set_mig_mode(0, 1)
    node.reset(0)
    for start in (0, 2):
        gi = node.create_gpu_instance(0, 5, start)  # 2g.12gb
        node.create_compute_instance(0, gi["id"], 1)
    node.add_process(0, 42, 100, gi_id=1, ci_id=0)
    state = Node("2xA30", path).state  # a good state reads back
    damage(state)
    with open(path, "w") as f:
        json.dump(state, f)
    with pytest.raises(GpuctlError, match=r"s\.json is damaged: ") as e:
        Node("2xA30", path)
    assert "delete the file" in e.value.hint


@pytest.mark.parametrize("text", ["[1]", "[", '{"spec": 5}'])
def test_shim_reading_the_spec_from_a_bad_state_file_is_one_clear_error(
    tmp_path, monkeypatch, text
):
    from gpuctl.common.errors import GpuctlError

    path = tmp_path / "s.json"
    path.write_text(text)
    monkeypatch.setenv("GPUCTL_SIM_STATE", str(path))
    with pytest.raises(GpuctlError):
        gpuctl.sim.open_node()


def test_an_unwritable_state_path_is_one_clear_error():
    from gpuctl.common.errors import GpuctlError

    with pytest.raises(GpuctlError, match="cannot write simulator state") as e:
        Node("A30", "/proc/gpuctl-no-such-dir/s.json")  # not even root can create it
    assert "GPUCTL_SIM_STATE" in e.value.hint


def test_pci_identity_per_gpu(nvml):
    n = nvml("2xH200,2xA30")
    seen = set()
    for i, h in enumerate(handles := [n.nvmlDeviceGetHandleByIndex(i) for i in range(4)]):
        pci = n.nvmlDeviceGetPciInfo(h)
        seen.add(pci.busId)
        assert n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByPciBusId(pci.busId)) == i
        assert pci.pciDeviceId == (0x233510DE if i < 2 else 0x20B710DE)
    assert len(seen) == len(handles)


@pytest.mark.integration
def test_shell_helper_changes_the_node(tmp_path):
    env = dict(
        os.environ,
        PYTHONPATH=ROOT,
        GPUCTL_SIMULATE="2xA30",
        GPUCTL_SIM_STATE=str(tmp_path / "n.json"),
    )

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "gpuctl.sim", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert (
        run(
            "add-process", "--gpu", "1", "--pid", "42", "--mib", "1000", "--name", "demo"
        ).returncode
        == 0
    )
    state = json.loads(run("show").stdout)
    assert [(p["gpu"], p["pid"], p["name"], p["used_memory_mib"]) for p in state["processes"]] == [
        (1, 42, "demo", 1000)
    ]
    refused = run("reset", "--gpu", "1")
    assert refused.returncode == 1 and "NVML code 19" in refused.stderr
    too_big = run("add-process", "--gpu", "0", "--pid", "43", "--mib", "999999")
    assert too_big.returncode == 1 and "out of memory" in too_big.stderr
    assert run("remove-process", "--pid", "42").returncode == 0
    assert run("remove-process", "--pid", "42").returncode == 1
    assert run("reset", "--gpu", "1").returncode == 0


def test_a_short_buffer_is_insufficient_size_not_an_overflow(nvml):
    n = nvml("1xA100-40GB")
    h = enable_mig(n)
    for start in (0, 1):
        place(n, h, 19, start, 1)
    array = (n.c_nvmlGpuInstance_t * 1)()
    count = ctypes.c_uint(7)  # a count larger than the buffer
    with pytest.raises(n.NVMLError_InsufficientSize):
        n.nvmlDeviceGetGpuInstances(h, 19, array, ctypes.byref(count))
    assert count.value == 2
    placements = (n.c_nvmlGpuInstancePlacement_t * 3)()
    count = ctypes.c_uint(7)
    with pytest.raises(n.NVMLError_InsufficientSize):
        n.nvmlDeviceGetGpuInstancePossiblePlacements(h, 19, placements, ctypes.byref(count))


def test_the_module_tells_who_runs_a_simulated_process():
    n = gpuctl.sim.load_pynvml("1xA30")
    gpuctl.sim.add_process(0, 42, 100, user="alice", spec="1xA30")
    assert n.process_user(42) == "alice"  # NVML has no such call; the OS would say on a node
    gpuctl.sim.remove_process(42, spec="1xA30")
    gpuctl.sim.add_process(0, 42, 100, user="bob", spec="1xA30")
    assert n.process_user(42) == "bob" and n.process_user(43) is None  # the node as it is now


@pytest.mark.integration  # runs programs on the shim (a process)
def test_the_shim_serves_programs_and_the_simulator_itself(tmp_path):
    """With the shim first on PYTHONPATH, `import pynvml` inside the simulator (for NVML's
    return codes) loads the shim too; the node is opened only at nvmlInit."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([gpuctl.sim.SHIM_DIR, ROOT]),
        GPUCTL_SIMULATE="1xA30",
        GPUCTL_SIM_STATE=str(tmp_path / "n.json"),
    )

    def run(*args):
        return subprocess.run(
            [sys.executable, *args], env=env, capture_output=True, text=True, timeout=60
        )

    added = run("-m", "gpuctl.sim", "add-process", "--gpu", "0", "--pid", "42", "--mib", "10")
    assert added.returncode == 0, added.stderr
    code = "import pynvml as n; n.nvmlInit(); print(n.nvmlDeviceGetCount(), n.process_user(42))"
    assert run("-c", code).stdout == "1 root\n"
    del env["GPUCTL_SIMULATE"], env["GPUCTL_SIM_STATE"]
    no_node = run(
        "-c",
        "import pynvml as n\ntry: n.nvmlInit()\nexcept n.NVMLError_LibraryNotFound: print('no driver')",
    )
    assert no_node.stdout == "no driver\n", no_node.stderr


@pytest.mark.integration  # imports in a fresh interpreter (a process)
def test_the_simulator_takes_mig_geometry_from_gpus_not_from_mig():
    code = (
        "import sys, gpuctl.sim.libnvml, gpuctl.sim.nvidia_smi\n"
        "print(sorted(m for m in sys.modules if m.startswith('gpuctl.mig')))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == "[]\n", run.stderr
