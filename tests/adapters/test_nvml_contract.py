"""Read-only NVML contract: what gpuctl relies on from the driver. Runs against the simulator
always and against the real driver when one is present (`pytest -m real_gpu`); it never
changes a GPU's MIG mode, clocks or power settings."""

import ctypes

import pytest

import gpuctl.sim
from gpuctl.adapters.nvml import Nvml
from gpuctl.gpus import geometry

pytestmark = pytest.mark.real_gpu

SIM_SPEC = "1xH100-80GB,1xA100-40GB,1xA30"


def _real_pynvml():
    import pynvml

    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded):
        pytest.skip("no NVIDIA driver on this machine")
    return pynvml


def _simulated_pynvml():
    """A simulated node with something on it to read: MIG on GPU 1, a process on GPU 0."""
    node = gpuctl.sim.open_node(SIM_SPEC)
    node.set_mig_mode(1, 1)
    node.reset(1)
    gi = node.create_gpu_instance(1, 9, 4)
    ci = node.create_compute_instance(1, gi["id"], 2)
    node.add_process(0, 4242, 1234, name="train")
    node.add_process(1, 4243, 567, gi_id=gi["id"], ci_id=ci["id"])
    n = gpuctl.sim.load_pynvml(SIM_SPEC)
    n.nvmlInit()
    return n


@pytest.fixture(params=["simulated", "real"])
def backend(request):
    return request.param


@pytest.fixture
def n(backend):
    module = _real_pynvml() if backend == "real" else _simulated_pynvml()
    yield module
    module.nvmlShutdown()


def handles(n):
    return [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]


def known_model(n, h):
    try:
        return geometry.find_model(n.nvmlDeviceGetName(h))
    except Exception:
        return None


def test_devices_are_enumerated_by_index_and_uuid(n):
    hs = handles(n)
    assert hs
    for i, h in enumerate(hs):
        uuid = n.nvmlDeviceGetUUID(h)
        assert isinstance(n.nvmlDeviceGetName(h), str) and uuid.startswith("GPU-")
        assert n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByUUID(uuid)) == i
    with pytest.raises(n.NVMLError_InvalidArgument):
        n.nvmlDeviceGetHandleByIndex(len(hs))


def test_memory_and_readings_are_in_range(n):
    for h in handles(n):
        mem = n.nvmlDeviceGetMemoryInfo(h)
        assert mem.total > 0 and 0 <= mem.used <= mem.total and mem.free <= mem.total
        v2 = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
        assert v2.total == mem.total
        for read, low, high in (
            (lambda h=h: n.nvmlDeviceGetUtilizationRates(h).gpu, 0, 100),
            (lambda h=h: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU), 0, 130),
        ):
            try:
                assert low <= read() <= high
            except n.NVMLError_NotSupported:
                pass
        try:
            power, limit = n.nvmlDeviceGetPowerUsage(h), n.nvmlDeviceGetEnforcedPowerLimit(h)
            assert 0 < power <= 1.5 * limit
        except n.NVMLError_NotSupported:
            pass


def test_mig_mode_shape(n):
    for h in handles(n):
        try:
            mode = n.nvmlDeviceGetMigMode(h)
        except n.NVMLError_NotSupported:
            continue  # not MIG-capable: how gpuctl tells
        assert isinstance(mode, list) and len(mode) == 2 and set(mode) <= {0, 1}
        if mode[0] == 0:
            assert n.nvmlDeviceGetMaxMigDeviceCount(h) == 0


def test_profile_index_constants_map_to_the_geometry_table(n):
    """The index constant goes in, the profile id comes out; placements match the table."""
    checked = 0
    for h in handles(n):
        model = known_model(n, h)
        if model is None:
            continue
        for p in model.profiles:
            try:
                info = n.nvmlDeviceGetGpuInstanceProfileInfo(h, p.index, version=1)
            except (n.NVMLError_NotSupported, n.NVMLError_NoPermission):
                continue
            if p.profile_id is not None:
                assert info.id == p.profile_id, p.name
            assert info.sliceCount == p.slices, p.name
            count = ctypes.c_uint(0)
            try:
                n.nvmlDeviceGetGpuInstancePossiblePlacements(h, info.id, None, ctypes.byref(count))
            except n.NVMLError_NoPermission:
                continue
            array = (n.c_nvmlGpuInstancePlacement_t * count.value)()
            n.nvmlDeviceGetGpuInstancePossiblePlacements(h, info.id, array, ctypes.byref(count))
            assert [(a.start, a.size) for a in array[: count.value]] == [
                (s, p.size) for s in p.starts
            ]
            checked += 1
    if not checked:
        pytest.skip("no GPU of a model in the geometry table")


def test_mig_devices_and_processes_shape(n):
    for h in handles(n):
        total = n.nvmlDeviceGetMemoryInfo(h).total
        for p in n.nvmlDeviceGetComputeRunningProcesses(h):
            assert p.pid > 0 and (p.usedGpuMemory is None or p.usedGpuMemory <= total)
        try:
            enabled = n.nvmlDeviceGetMigMode(h)[0] == 1
        except n.NVMLError_NotSupported:
            enabled = False
        if not enabled:
            continue
        for i in range(n.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                mig = n.nvmlDeviceGetMigDeviceHandleByIndex(h, i)
            except n.NVMLError_NotFound:
                continue
            assert n.nvmlDeviceIsMigDeviceHandle(mig).value == 1
            assert " MIG " in n.nvmlDeviceGetName(mig)
            assert n.nvmlDeviceGetUUID(mig).startswith("MIG-")
            assert 0 < n.nvmlDeviceGetMemoryInfo(mig).total < total
            gi_id = n.nvmlDeviceGetGpuInstanceId(mig)
            assert n.nvmlDeviceGetComputeInstanceId(mig) >= 0 and gi_id >= 0
            with pytest.raises(n.NVMLError_NotSupported):  # no counters on MIG devices
                n.nvmlDeviceGetUtilizationRates(mig)


def test_adapter_sample_reads_every_gpu(backend):
    if backend == "real":
        _real_pynvml().nvmlShutdown()
        nvml = Nvml()
    else:
        _simulated_pynvml().nvmlShutdown()
        nvml = Nvml(gpuctl.sim.driver(SIM_SPEC))
    with nvml:
        sample = nvml.sample()
        assert len(sample.gpus) == nvml.gpu_count() >= 1
        for g in sample.gpus:
            assert g.uuid.startswith("GPU-") and g.name
            assert g.memory_total_mib > 0 and 0 <= g.memory_used_mib <= g.memory_total_mib
            assert g.utilization_gpu is None or 0 <= g.utilization_gpu <= 100
            assert g.mig_mode in (None, 0, 1)
            for m in g.mig_devices:
                assert m.memory_total_mib < g.memory_total_mib and m.profile
            for p in g.processes:
                assert p.pid > 0
