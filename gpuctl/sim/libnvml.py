"""A simulated ``libnvidia-ml.so``: the C functions pynvml calls, with the C calling shapes.

pynvml (nvidia-ml-py) is a thin ctypes layer: it looks each function up on the loaded
library (``getattr(nvmlLib, name)``), passes ``c_uint`` values, ``byref(...)`` out-params,
string buffers and struct arrays, and turns the returned code into ``NVMLError``. Handing an
instance of ``SimulatedLibrary`` to pynvml as its ``nvmlLib`` therefore runs pynvml's own
code unchanged over the simulated node: same names, argument and return shapes, structs,
error classes and codes as on a real driver. Functions a real driver has but this one does
not model are simply absent, so pynvml raises ``NVMLError_FunctionNotFound`` for them, as it
does on an older driver.
"""

from __future__ import annotations

import ctypes
import os
import sys

from pynvml import (
    NVML_ERROR_IN_USE,
    NVML_ERROR_INSUFFICIENT_RESOURCES,
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_RESET_REQUIRED,
    NVML_ERROR_UNINITIALIZED,
    NVML_ERROR_UNKNOWN,
    NVML_SUCCESS,
)

from gpuctl.gpus.geometry import CI_PROFILE_SLICES
from gpuctl.sim.node import MIB, Node, SimError, bus_id, pci_location

NO_VALUE = 0xFFFFFFFF  # NVML's "not available" for unsigned ids (no GPU/compute instance)
DRIVER_VERSION = "580.95.05"
CUDA_VERSION = 13000

_CArg = type(ctypes.byref(ctypes.c_int()))
_PTR = ctypes.sizeof(ctypes.c_void_p)

_ERROR_STRINGS = {
    NVML_SUCCESS: "Success",
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
    NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
    NVML_ERROR_IN_USE: "In use by another client",
    NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient Resources",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


def _val(x):
    """A by-value argument: a ctypes scalar or a plain Python int/bytes."""
    return getattr(x, "value", x)


def _obj(ref):
    """The object behind an out-parameter: byref(x), pointer(x), or x itself."""
    if isinstance(ref, _CArg):
        return ref._obj
    if isinstance(ref, ctypes._Pointer):
        return ref.contents
    return ref


def _address(handle) -> int | None:
    return ctypes.cast(handle, ctypes.c_void_p).value if handle is not None else None


def _put_pointer(dest_address: int, value: int) -> None:
    ctypes.c_void_p.from_address(dest_address).value = value


def _put(ref, value) -> None:
    _obj(ref).value = value


def _put_string(buf, text: str) -> int:
    data = text.encode()
    if len(data) >= len(buf):
        return NVML_ERROR_INSUFFICIENT_SIZE
    buf.value = data
    return NVML_SUCCESS


def _capacity(array, count: int) -> int:
    """How many items the caller's buffer holds: a ctypes array knows; else trust its count."""
    array = _obj(array)
    return len(array) if isinstance(array, ctypes.Array) else count


def _privileged(fn):
    """MIG layout calls: root only on a real driver (NVML_ERROR_NO_PERMISSION otherwise)."""

    def c_function(self, *args):
        if not self.privileged:
            raise SimError(NVML_ERROR_NO_PERMISSION, "insufficient permissions")
        return fn(self, *args)

    c_function.__name__ = fn.__name__
    return c_function


def _nvml(fn):
    """Run a C function body; a refusal of the simulated hardware becomes its return code."""

    def c_function(self, *args):
        if not self._initialized:
            return NVML_ERROR_UNINITIALIZED
        self.node.refresh()  # another command may have changed the node
        try:
            ret = fn(self, *args)
        except SimError as e:
            return e.code
        return NVML_SUCCESS if ret is None else ret

    c_function.__name__ = fn.__name__
    return c_function


def _c_entry_point(method):
    # pynvml sets attributes such as `restype` on what it looks up, as on a ctypes function:
    # plain functions accept them, bound methods do not.
    def entry(*args):
        return method(*args)

    entry.__name__ = method.__name__
    return entry


class _EntryPoints:
    """What pynvml sees as the loaded library: one attribute per exported C function.
    `without` leaves functions out, as an older driver would."""

    def __init__(self, library: SimulatedLibrary, without: tuple[str, ...]):
        self.library = library
        for name in dir(type(library)):
            if name.startswith("nvml") and name not in without:
                setattr(self, name, _c_entry_point(getattr(library, name)))

    def __getattr__(self, name):
        # Only reached for functions this library does not have: pynvml then raises
        # NVMLError_FunctionNotFound. GPUCTL_SIM_TRACE=1 lists them, to see what a tool misses.
        if name.startswith("nvml") and os.environ.get("GPUCTL_SIM_TRACE"):
            print(f"gpuctl-sim: no {name}", file=sys.stderr)
        raise AttributeError(name)


class SimulatedLibrary:
    """The C entry points of libnvidia-ml over a simulated Node."""

    def __init__(self, node: Node, without: tuple[str, ...] = (), privileged: bool = True):
        self.node = node
        self.privileged = privileged  # False: as a user who is not root
        self._initialized = False
        self._cells: dict[tuple, ctypes.Array] = {}  # handle key -> memory the handle points at
        self._keys: dict[int, tuple] = {}  # handle address -> key
        self.entries = _EntryPoints(self, without)

    # ---- handles ---------------------------------------------------------------------------
    def _handle(self, key: tuple) -> int:
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = (ctypes.c_char * 8)()
            self._keys[ctypes.addressof(cell)] = key
        return ctypes.addressof(cell)

    def _key(self, handle) -> tuple:
        address = _address(handle)
        key = self._keys.get(address) if address is not None else None
        if key is None:
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "invalid handle")
        return key

    def _out_handle(self, ref, key: tuple) -> None:
        _put_pointer(ctypes.addressof(_obj(ref)), self._handle(key))

    def _device(self, handle) -> tuple:
        """("gpu", i) or ("mig", i, gi, ci), checked to still exist."""
        key = self._key(handle)
        if key[0] == "mig":
            self.node.compute_instance(key[1], key[2], key[3])
        elif key[0] != "gpu":
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "not a device handle")
        return key

    def _gpu(self, handle) -> int:
        key = self._device(handle)
        if key[0] != "gpu":
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "a MIG device handle is not accepted here")
        return key[1]

    def _gi(self, handle) -> tuple[int, dict]:
        key = self._key(handle)
        if key[0] != "gi":
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "not a GPU instance handle")
        return key[1], self.node.gpu_instance(key[1], key[2])

    def _ci(self, handle) -> tuple[int, int, dict]:
        key = self._key(handle)
        if key[0] != "ci":
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "not a compute instance handle")
        return key[1], key[2], self.node.compute_instance(key[1], key[2], key[3])

    # ---- library --------------------------------------------------------------------------
    def nvmlInitWithFlags(self, flags=0):
        self.node.refresh()
        self._initialized = True
        return NVML_SUCCESS

    def nvmlInit_v2(self):
        return self.nvmlInitWithFlags(0)

    def nvmlShutdown(self):
        self._initialized = False
        return NVML_SUCCESS

    def nvmlErrorString(self, result):
        return _ERROR_STRINGS.get(_val(result), "Unknown Error").encode()

    @_nvml
    def nvmlSystemGetDriverVersion(self, buf, size):
        return _put_string(buf, DRIVER_VERSION)

    @_nvml
    def nvmlSystemGetNVMLVersion(self, buf, size):
        return _put_string(buf, "13." + DRIVER_VERSION)

    @_nvml
    def nvmlSystemGetCudaDriverVersion(self, ref):
        _put(ref, CUDA_VERSION)

    nvmlSystemGetCudaDriverVersion_v2 = nvmlSystemGetCudaDriverVersion

    @_nvml
    def nvmlSystemGetProcessName(self, pid, buf, size):
        for p in self.node.state["processes"]:
            if p["pid"] == _val(pid):
                return _put_string(buf, p["name"])
        raise SimError(NVML_ERROR_NOT_FOUND, "no such GPU process")

    # ---- devices --------------------------------------------------------------------------
    @_nvml
    def nvmlDeviceGetCount_v2(self, ref):
        _put(ref, len(self.node.gpus))

    @_nvml
    def nvmlDeviceGetHandleByIndex_v2(self, index, ref):
        i = _val(index)
        self.node.gpu(i)
        self._out_handle(ref, ("gpu", i))

    @_nvml
    def nvmlDeviceGetHandleByUUID(self, uuid, ref):
        text = _val(uuid).decode()
        for i, gpu in enumerate(self.node.gpus):
            if gpu["uuid"] == text:
                return self._out_handle(ref, ("gpu", i))
            for gi, ci in self.node.mig_devices(i):
                if self._mig_uuid(i, gi, ci) == text:
                    return self._out_handle(ref, ("mig", i, gi["id"], ci["id"]))
        raise SimError(NVML_ERROR_NOT_FOUND, "no such UUID")

    @_nvml
    def nvmlDeviceGetHandleByPciBusId_v2(self, pci_bus_id, ref):
        text = _val(pci_bus_id).decode().lower()
        for i in range(len(self.node.gpus)):
            if bus_id(i).lower() in (text, "0000" + text):
                return self._out_handle(ref, ("gpu", i))
        raise SimError(NVML_ERROR_NOT_FOUND, "no such PCI bus id")

    @_nvml
    def nvmlDeviceGetIndex(self, handle, ref):
        _put(ref, self._gpu(handle))

    def _mig_uuid(self, i: int, gi: dict, ci: dict) -> str:
        gpu_uuid = self.node.gpu(i)["uuid"][4:]
        return f"MIG-{gpu_uuid[:-4]}{gi['id']:02x}{ci['id']:02x}"

    @_nvml
    def nvmlDeviceGetName(self, handle, buf, size):
        key = self._device(handle)
        name = self.node.model(key[1]).nvml_name
        if key[0] == "mig":
            gi = self.node.gpu_instance(key[1], key[2])
            name += " MIG " + self._mig_profile_name(key[1], gi, key[3])
        return _put_string(buf, name)

    def _mig_profile_name(self, i: int, gi: dict, ci_id: int) -> str:
        sp = self.node.profile_by_id(i, gi["profile_id"])
        ci = self.node.compute_instance(i, gi["id"], ci_id)
        c = CI_PROFILE_SLICES[ci["profile_id"]]
        return sp.profile.name if c == sp.profile.slices else f"{c}c.{sp.profile.name}"

    @_nvml
    def nvmlDeviceGetUUID(self, handle, buf, size):
        key = self._device(handle)
        if key[0] == "mig":
            gi = self.node.gpu_instance(key[1], key[2])
            ci = self.node.compute_instance(key[1], key[2], key[3])
            return _put_string(buf, self._mig_uuid(key[1], gi, ci))
        return _put_string(buf, self.node.gpu(key[1])["uuid"])

    @_nvml
    def nvmlDeviceGetSerial(self, handle, buf, size):
        i = self._gpu(handle)
        return _put_string(buf, f"{1650923000000 + i:013d}")

    @_nvml
    def nvmlDeviceGetPciInfo_v3(self, handle, ref):
        i = self._gpu(handle)
        info = _obj(ref)
        domain, bus = pci_location(i)
        info.busIdLegacy = f"{domain:04X}:{bus:02X}:00.0".encode()
        info.busId = bus_id(i).encode()
        info.domain, info.bus, info.device = domain, bus, 0
        info.pciDeviceId = self.node.pci_device_id(i)
        info.pciSubSystemId = self.node.pci_subsystem_id(i)

    @_nvml
    def nvmlDeviceGetMemoryInfo(self, handle, ref):
        mem = _obj(ref)
        total, used = self._memory(handle)
        mem.total, mem.used, mem.free = total * MIB, used * MIB, (total - used) * MIB

    @_nvml
    def nvmlDeviceGetMemoryInfo_v2(self, handle, ref):
        mem = _obj(ref)
        total, used = self._memory(handle)
        mem.total, mem.reserved, mem.used, mem.free = (
            total * MIB,
            0,
            used * MIB,
            (total - used) * MIB,
        )

    def _memory(self, handle) -> tuple[int, int]:
        key = self._device(handle)
        i = key[1]
        if key[0] == "mig":
            gi = self.node.gpu_instance(i, key[2])
            return self.node.gi_memory_mib(i, gi), self.node.memory_used_mib(i, key[2])
        return self.node.model(i).memory_total_mib, self.node.memory_used_mib(i)

    @_nvml
    def nvmlDeviceGetBAR1MemoryInfo(self, handle, ref):
        self._device(handle)
        bar = _obj(ref)
        bar.bar1Total, bar.bar1Used, bar.bar1Free = 256 * MIB, 2 * MIB, 254 * MIB

    @_nvml
    def nvmlDeviceGetUtilizationRates(self, handle, ref):
        # As on the hardware: no utilization counters while MIG is on (GPU or MIG device).
        key = self._device(handle)
        if key[0] == "mig" or self.node.mig_enabled(key[1]):
            raise SimError(
                NVML_ERROR_NOT_SUPPORTED, "utilization is not supported with MIG enabled"
            )
        util = _obj(ref)
        util.gpu = self.node.utilization(key[1])
        util.memory = util.gpu * 3 // 5

    @_nvml
    def nvmlDeviceGetEncoderUtilization(self, handle, ref, period_ref):
        self._gpu(handle)
        _put(ref, 0)
        _put(period_ref, 167000)

    nvmlDeviceGetDecoderUtilization = nvmlDeviceGetEncoderUtilization

    @_nvml
    def nvmlDeviceGetTemperature(self, handle, sensor, ref):
        i = self._gpu(handle)
        if _val(sensor) != 0:
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "unknown sensor")
        _put(ref, self.node.temperature(i))

    @_nvml
    def nvmlDeviceGetFanSpeed(self, handle, ref):
        self._gpu(handle)
        raise SimError(NVML_ERROR_NOT_SUPPORTED, "passively cooled board has no fan")

    nvmlDeviceGetFanSpeed_v2 = nvmlDeviceGetFanSpeed

    @_nvml
    def nvmlDeviceGetPowerUsage(self, handle, ref):
        _put(ref, self.node.power_mw(self._gpu(handle)))

    @_nvml
    def nvmlDeviceGetPowerManagementLimit(self, handle, ref):
        _put(ref, self.node.board(self._gpu(handle))[0] * 1000)

    nvmlDeviceGetEnforcedPowerLimit = nvmlDeviceGetPowerManagementLimit

    @_nvml
    def nvmlDeviceGetClockInfo(self, handle, clock_type, ref):
        i = self._gpu(handle)
        kind = _val(clock_type)
        _put(ref, self.node.board(i)[3] if kind == 2 else self.node.sm_clock(i))

    @_nvml
    def nvmlDeviceGetMaxClockInfo(self, handle, clock_type, ref):
        i = self._gpu(handle)
        _put(ref, self.node.board(i)[3] if _val(clock_type) == 2 else self.node.board(i)[2])

    @_nvml
    def nvmlDeviceGetPerformanceState(self, handle, ref):
        _put(ref, 0 if self.node.sm_clock(self._gpu(handle)) > 345 else 8)

    @_nvml
    def nvmlDeviceGetPersistenceMode(self, handle, ref):
        self._gpu(handle)
        _put(ref, 1)

    @_nvml
    def nvmlDeviceGetDisplayMode(self, handle, ref):
        self._gpu(handle)
        _put(ref, 0)

    nvmlDeviceGetDisplayActive = nvmlDeviceGetDisplayMode

    @_nvml
    def nvmlDeviceGetComputeMode(self, handle, ref):
        self._gpu(handle)
        _put(ref, 0)  # NVML_COMPUTEMODE_DEFAULT

    @_nvml
    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type, ref):  # noqa: V107 (NVML's parameters)
        self._gpu(handle)
        _put(ref, 0)

    @_nvml
    def nvmlDeviceGetCudaComputeCapability(self, handle, major_ref, minor_ref):
        major, minor = self.node.model(self._gpu(handle)).compute_capability.split(".")
        _put(major_ref, int(major))
        _put(minor_ref, int(minor))

    @_nvml
    def nvmlDeviceGetPcieThroughput(self, handle, counter, ref):
        i = self._gpu(handle)
        if _val(counter) not in (0, 1):
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "unknown PCIe counter")
        _put(ref, self.node.utilization(i) * 1200)  # KB/s

    @_nvml
    def nvmlDeviceGetDriverModel_v2(self, handle, current_ref, pending_ref):
        self._gpu(handle)
        raise SimError(NVML_ERROR_NOT_SUPPORTED, "driver models are a Windows feature")

    nvmlDeviceGetDriverModel = nvmlDeviceGetDriverModel_v2

    @_nvml
    def nvmlDeviceGetProcessUtilization(self, handle, samples, count_ref, since):
        i = self._gpu(handle)
        if self.node.mig_enabled(i):
            raise SimError(NVML_ERROR_NOT_SUPPORTED, "no per-process utilization with MIG enabled")
        procs = self.node.processes(i)
        if not procs:
            raise SimError(NVML_ERROR_NOT_FOUND, "no samples")
        count = _obj(count_ref)
        if samples is None or _capacity(samples, count.value) < len(procs):
            count.value = len(procs)
            return NVML_ERROR_INSUFFICIENT_SIZE
        util = self.node.utilization(i)
        stamp = int(self.node.now() * 1e6)
        for slot, p in zip(samples, procs):
            slot.pid, slot.timeStamp = p["pid"], stamp
            slot.smUtil, slot.memUtil = util // len(procs), util * 3 // 5 // len(procs)
            slot.encUtil = slot.decUtil = 0
        count.value = len(procs)

    # ---- processes ------------------------------------------------------------------------
    def _running(self, handle, count_ref, array, compute: bool):
        key = self._device(handle)
        if not compute:
            procs = []
        elif key[0] == "mig":
            procs = self.node.processes(key[1], key[2], key[3])
        else:
            procs = self.node.processes(key[1])
        count = _obj(count_ref)
        if array is None or _capacity(array, count.value) < len(procs):
            count.value = len(procs)
            return NVML_SUCCESS if not procs else NVML_ERROR_INSUFFICIENT_SIZE
        for slot, p in zip(array, procs):
            slot.pid = p["pid"]
            slot.usedGpuMemory = p["used_memory_mib"] * MIB
            if hasattr(slot, "gpuInstanceId"):
                slot.gpuInstanceId = NO_VALUE if p["gi_id"] is None else p["gi_id"]
                slot.computeInstanceId = NO_VALUE if p["ci_id"] is None else p["ci_id"]
        count.value = len(procs)
        return NVML_SUCCESS

    @_nvml
    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle, count_ref, array):
        return self._running(handle, count_ref, array, compute=True)

    @_nvml
    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle, count_ref, array):
        return self._running(handle, count_ref, array, compute=False)

    nvmlDeviceGetMPSComputeRunningProcesses_v3 = nvmlDeviceGetGraphicsRunningProcesses_v3
    nvmlDeviceGetComputeRunningProcesses_v2 = nvmlDeviceGetComputeRunningProcesses_v3
    nvmlDeviceGetGraphicsRunningProcesses_v2 = nvmlDeviceGetGraphicsRunningProcesses_v3
    nvmlDeviceGetMPSComputeRunningProcesses_v2 = nvmlDeviceGetGraphicsRunningProcesses_v3

    # ---- MIG mode and MIG devices -----------------------------------------------------------
    @_nvml
    def nvmlDeviceGetMigMode(self, handle, current_ref, pending_ref):
        i = self._gpu(handle)
        if not self.node.model(i).profiles:
            raise SimError(NVML_ERROR_NOT_SUPPORTED, "no MIG on this GPU")
        gpu = self.node.gpu(i)
        _put(current_ref, gpu["mig_current"])
        _put(pending_ref, gpu["mig_pending"])

    @_nvml
    @_privileged
    def nvmlDeviceSetMigMode(self, handle, mode, status_ref):
        _put(status_ref, self.node.set_mig_mode(self._gpu(handle), _val(mode)))

    @_nvml
    def nvmlDeviceGetMaxMigDeviceCount(self, handle, ref):
        i = self._gpu(handle)
        _put(ref, self.node.model(i).max_gpu_instances if self.node.mig_enabled(i) else 0)

    @_nvml
    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index, ref):
        i = self._gpu(handle)
        self.node.require_mig(i)
        devices = self.node.mig_devices(i)
        n = _val(index)
        if not 0 <= n < len(devices):
            raise SimError(NVML_ERROR_NOT_FOUND, f"no MIG device {n}")
        gi, ci = devices[n]
        self._out_handle(ref, ("mig", i, gi["id"], ci["id"]))

    @_nvml
    def nvmlDeviceIsMigDeviceHandle(self, handle, ref):
        _put(ref, 1 if self._device(handle)[0] == "mig" else 0)

    @_nvml
    def nvmlDeviceGetGpuInstanceId(self, handle, ref):
        key = self._device(handle)
        if key[0] != "mig":
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "not a MIG device handle")
        _put(ref, key[2])

    @_nvml
    def nvmlDeviceGetComputeInstanceId(self, handle, ref):
        key = self._device(handle)
        if key[0] != "mig":
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "not a MIG device handle")
        _put(ref, key[3])

    @_nvml
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle, ref):
        key = self._device(handle)
        if key[0] != "mig":
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, "not a MIG device handle")
        self._out_handle(ref, ("gpu", key[1]))

    # ---- GPU-instance profiles and GPU instances ----------------------------------------------
    def _fill_gi_profile(self, i: int, sp, info, with_name: bool) -> None:
        p = sp.profile
        info.id, info.isP2pSupported, info.sliceCount = sp.profile_id, 0, p.slices
        info.instanceCount, info.multiprocessorCount = p.max_instances, p.sm_count or 0
        info.copyEngineCount, info.decoderCount, info.encoderCount = p.slices, p.slices // 2, 0
        info.jpegCount = info.ofaCount = 1 if p.slices == self.node.model(i).compute_slices else 0
        info.memorySizeMB = sp.memory_mib
        if with_name:
            info.name = f"MIG {p.name}".encode()

    @_nvml
    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle, profile, ref):
        i = self._gpu(handle)
        self._fill_gi_profile(i, self.node.profile_by_index(i, _val(profile)), _obj(ref), False)

    @_nvml
    def nvmlDeviceGetGpuInstanceProfileInfoV(self, handle, profile, ref):
        i = self._gpu(handle)
        self.node.require_mig(i)
        self._fill_gi_profile(i, self.node.profile_by_index(i, _val(profile)), _obj(ref), True)

    @_nvml
    def nvmlDeviceGetGpuInstanceProfileInfoByIdV(self, handle, profile_id, ref):
        i = self._gpu(handle)
        self.node.require_mig(i)
        self._fill_gi_profile(i, self.node.profile_by_id(i, _val(profile_id)), _obj(ref), True)

    @_nvml
    @_privileged
    def nvmlDeviceGetGpuInstancePossiblePlacements_v2(
        self, handle, profile_id, placements, count_ref
    ):
        i = self._gpu(handle)
        sp = self.node.profile_by_id(i, _val(profile_id))
        count = _obj(count_ref)
        if placements is None:
            count.value = len(sp.profile.starts)
            return NVML_SUCCESS
        array = _obj(placements)
        if _capacity(array, count.value) < len(sp.profile.starts):
            count.value = len(sp.profile.starts)
            return NVML_ERROR_INSUFFICIENT_SIZE
        base = ctypes.addressof(array)
        item = ctypes.sizeof(ctypes.c_uint) * 2
        for n, start in enumerate(sp.profile.starts):
            (ctypes.c_uint * 2).from_address(base + n * item)[:] = [start, sp.profile.size]
        count.value = len(sp.profile.starts)

    @_nvml
    @_privileged
    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, handle, profile_id, ref):
        i = self._gpu(handle)
        _put(ref, self.node.remaining_capacity(i, _val(profile_id)))

    @_nvml
    @_privileged
    def nvmlDeviceCreateGpuInstance(self, handle, profile_id, ref):
        i = self._gpu(handle)
        gi = self.node.create_gpu_instance(i, _val(profile_id))
        self._out_handle(ref, ("gi", i, gi["id"]))

    @_nvml
    @_privileged
    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle, profile_id, placement, ref):
        i = self._gpu(handle)
        pl = _obj(placement)
        gi = self.node.create_gpu_instance(i, _val(profile_id), pl.start, pl.size)
        self._out_handle(ref, ("gi", i, gi["id"]))

    @_nvml
    @_privileged
    def nvmlGpuInstanceDestroy(self, gi_handle):
        i, gi = self._gi(gi_handle)
        self.node.destroy_gpu_instance(i, gi["id"])

    @_nvml
    @_privileged
    def nvmlDeviceGetGpuInstances(self, handle, profile_id, array, count_ref):
        i = self._gpu(handle)
        self.node.require_mig(i)
        pid = _val(profile_id)
        self.node.profile_by_id(i, pid)
        gis = sorted(
            (g for g in self.node.gpu(i)["gpu_instances"] if g["profile_id"] == pid),
            key=lambda g: g["id"],
        )
        return self._write_handles(array, count_ref, [("gi", i, g["id"]) for g in gis])

    def _write_handles(self, array, count_ref, keys: list[tuple]):
        count = _obj(count_ref)
        if array is not None:
            if _capacity(array, count.value) < len(keys):
                count.value = len(keys)
                return NVML_ERROR_INSUFFICIENT_SIZE
            base = ctypes.addressof(_obj(array))
            for n, key in enumerate(keys):
                _put_pointer(base + n * _PTR, self._handle(key))
        count.value = len(keys)
        return NVML_SUCCESS

    @_nvml
    @_privileged
    def nvmlDeviceGetGpuInstanceById(self, handle, gi_id, ref):
        i = self._gpu(handle)
        gi = self.node.gpu_instance(i, _val(gi_id))
        self._out_handle(ref, ("gi", i, gi["id"]))

    @_nvml
    def nvmlGpuInstanceGetInfo(self, gi_handle, ref):
        i, gi = self._gi(gi_handle)
        info = _obj(ref)
        _put_pointer(ctypes.addressof(info) + type(info).device.offset, self._handle(("gpu", i)))
        info.id, info.profileId = gi["id"], gi["profile_id"]
        info.placement.start, info.placement.size = gi["start"], gi["size"]

    # ---- compute instances ------------------------------------------------------------------
    def _fill_ci_profile(self, i: int, gi: dict, profile: int, info, with_name: bool) -> None:
        if not 0 <= profile < 9:
            raise SimError(
                NVML_ERROR_INVALID_ARGUMENT, f"compute-instance profile {profile} out of range"
            )
        if not self.node.ci_profile_supported(i, gi, profile):
            raise SimError(
                NVML_ERROR_NOT_SUPPORTED, f"compute-instance profile {profile} not supported here"
            )
        sp = self.node.profile_by_id(i, gi["profile_id"])
        c = CI_PROFILE_SLICES[profile]
        info.id, info.sliceCount = profile, c
        info.instanceCount = self.node.ci_instance_count(i, gi, profile)
        info.multiprocessorCount = (sp.profile.sm_count or 0) * c // sp.profile.slices
        info.sharedCopyEngineCount = sp.profile.slices
        info.sharedDecoderCount = sp.profile.slices // 2
        info.sharedEncoderCount = info.sharedJpegCount = info.sharedOfaCount = 0
        if with_name:
            g = sp.profile.name
            info.name = (f"MIG {g}" if c == sp.profile.slices else f"MIG {c}c.{g}").encode()

    @_nvml
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi_handle, profile, eng_profile, ref):  # noqa: V107 (NVML's parameters)
        i, gi = self._gi(gi_handle)
        self._fill_ci_profile(i, gi, _val(profile), _obj(ref), False)

    @_nvml
    def nvmlGpuInstanceGetComputeInstanceProfileInfoV(self, gi_handle, profile, eng_profile, ref):  # noqa: V107 (NVML's parameters)
        i, gi = self._gi(gi_handle)
        self._fill_ci_profile(i, gi, _val(profile), _obj(ref), True)

    @_nvml
    def nvmlGpuInstanceGetComputeInstanceRemainingCapacity(self, gi_handle, profile, ref):
        i, gi = self._gi(gi_handle)
        if not self.node.ci_profile_supported(i, gi, _val(profile)):
            raise SimError(NVML_ERROR_NOT_SUPPORTED, "compute-instance profile not supported here")
        _put(ref, self.node.ci_remaining(i, gi, _val(profile)))

    @_nvml
    @_privileged
    def nvmlGpuInstanceCreateComputeInstance(self, gi_handle, profile, ref):
        i, gi = self._gi(gi_handle)
        ci = self.node.create_compute_instance(i, gi["id"], _val(profile))
        self._out_handle(ref, ("ci", i, gi["id"], ci["id"]))

    @_nvml
    @_privileged
    def nvmlGpuInstanceGetComputeInstances(self, gi_handle, profile, array, count_ref):
        i, gi = self._gi(gi_handle)
        cis = sorted(
            (c for c in gi["compute_instances"] if c["profile_id"] == _val(profile)),
            key=lambda c: c["id"],
        )
        return self._write_handles(array, count_ref, [("ci", i, gi["id"], c["id"]) for c in cis])

    @_nvml
    @_privileged
    def nvmlGpuInstanceGetComputeInstanceById(self, gi_handle, ci_id, ref):
        i, gi = self._gi(gi_handle)
        ci = self.node.compute_instance(i, gi["id"], _val(ci_id))
        self._out_handle(ref, ("ci", i, gi["id"], ci["id"]))

    @_nvml
    def nvmlComputeInstanceGetInfo_v2(self, ci_handle, ref):
        i, gi_id, ci = self._ci(ci_handle)
        info = _obj(ref)
        base = ctypes.addressof(info)
        _put_pointer(base + type(info).device.offset, self._handle(("gpu", i)))
        _put_pointer(base + type(info).gpuInstance.offset, self._handle(("gi", i, gi_id)))
        info.id, info.profileId = ci["id"], ci["profile_id"]
        info.placement.start, info.placement.size = ci["start"], ci["size"]

    @_nvml
    @_privileged
    def nvmlComputeInstanceDestroy(self, ci_handle):
        i, gi_id, ci = self._ci(ci_handle)
        self.node.destroy_compute_instance(i, gi_id, ci["id"])

    # ---- not part of NVML: who runs a process (on a real node the OS's process table says) ----
    def process_user(self, pid: int) -> str | None:
        """The recorded user of simulated process `pid`, or None for a pid not on the node."""
        self.node.refresh()
        return next((p["user"] for p in self.node.state["processes"] if p["pid"] == pid), None)
