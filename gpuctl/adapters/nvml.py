"""NVML: the one module in gpuctl that calls the NVIDIA driver (through pynvml and, for a
GPU reset, nvidia-smi), or whatever stands in for it: a session runs on the `Driver` it is
given (the top of gpuctl hands in gpuctl.sim's for a simulated node), never choosing one.

Every query goes through `_query`: "not supported" and "function not found" (an older
driver) become None, never an exception. Anything else the driver refuses becomes an
NvmlError carrying the NVML return code (pynvml's NVML_ERROR_* constants). A missing driver
is one GpuctlError with a hint.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from gpuctl.common.errors import BackendError, GpuctlError
from gpuctl.gpus.sample import (
    ComputeInstance,
    GpuInstance,
    GpuSample,
    MigDevice,
    NodeSample,
    Process,
)
from gpuctl.runtime.processes import user_of

__all__ = ["Driver", "Nvml", "NvmlError", "GpuInstance", "ComputeInstance", "Process", "NodeSample"]

_NO_ID = 0xFFFFFFFF
_MIB = 1024 * 1024
_GI_PROFILE_COUNT = 0x12  # NVML_GPU_INSTANCE_PROFILE_COUNT
_CI_PROFILE_COUNT = 0x9  # NVML_COMPUTE_INSTANCE_PROFILE_COUNT
_MAX_INSTANCES = 8  # more GPU (or compute) instances than any GPU holds


@functools.lru_cache(maxsize=1)
def _explanations() -> tuple[dict[int, str], dict[int, str]]:
    """(reason, hint) texts by NVML return code. pynvml is imported here, not at the top, so
    that a missing nvidia-ml-py is Nvml.open's one clear error."""
    import pynvml as n

    reasons = {
        n.NVML_ERROR_UNINITIALIZED: "NVML is not initialized",
        n.NVML_ERROR_INVALID_ARGUMENT: "invalid argument",
        n.NVML_ERROR_NOT_SUPPORTED: "not supported",
        n.NVML_ERROR_NO_PERMISSION: "insufficient permissions",
        n.NVML_ERROR_NOT_FOUND: "not found",
        n.NVML_ERROR_DRIVER_NOT_LOADED: "driver not loaded",
        n.NVML_ERROR_GPU_IS_LOST: "the GPU is lost",
        n.NVML_ERROR_RESET_REQUIRED: "the GPU requires a reset",
        n.NVML_ERROR_IN_USE: "in use by another client",
        n.NVML_ERROR_INSUFFICIENT_RESOURCES: "insufficient resources",
        n.NVML_ERROR_UNKNOWN: "unknown error",
        n.NVML_ERROR_FUNCTION_NOT_FOUND: "this driver's NVML library lacks a function it needs",
    }
    hints = {
        n.NVML_ERROR_NO_PERMISSION: "run as root (MIG changes and resets need it)",
        n.NVML_ERROR_IN_USE: (
            "stop the processes on that GPU or MIG device (see `gpuctl top`), then retry"
        ),
        n.NVML_ERROR_INSUFFICIENT_RESOURCES: (
            "the requested placement overlaps or the profile's limit is reached; "
            "see the GPU's current MIG layout"
        ),
        n.NVML_ERROR_RESET_REQUIRED: (
            "reset the GPU (nvidia-smi --gpu-reset -i N) or reboot the node"
        ),
        n.NVML_ERROR_NOT_SUPPORTED: "the GPU lacks this feature, or MIG is not enabled on it",
        n.NVML_ERROR_GPU_IS_LOST: (
            "the GPU fell off the bus: check `dmesg` for Xid errors; the node likely needs a reboot"
        ),
        n.NVML_ERROR_FUNCTION_NOT_FOUND: "the NVIDIA driver is older than gpuctl needs: upgrade it",
    }
    return reasons, hints


class NvmlError(BackendError):
    """The driver refused an NVML call; `code` is the NVML return code."""

    def __init__(self, code: int, what: str, error: BaseException | None = None):
        self.code = code
        reasons, hints = _explanations()
        reason = reasons.get(code, f"NVML error {code}")
        missing = _missing_function(error) if error is not None else None
        if missing:
            reason = f"this driver's NVML library has no function {missing}"
        super().__init__(f"{what}: {reason} (NVML code {code})", hint=hints.get(code))

    @property
    def passes(self) -> bool:
        """Whether the same call can succeed later, once its cause is gone (a process
        stopped, root rights, a reset): not for what the GPU does not support at all."""
        import pynvml as n

        return self.code in (
            n.NVML_ERROR_IN_USE,
            n.NVML_ERROR_NO_PERMISSION,
            n.NVML_ERROR_INSUFFICIENT_RESOURCES,
            n.NVML_ERROR_RESET_REQUIRED,
            n.NVML_ERROR_TIMEOUT,
        )


@dataclass(frozen=True)
class GiProfile:
    """A GPU-instance profile as one GPU's driver reports it."""

    id: int  # what Create*/Placements take
    placements: tuple[tuple[int, int], ...] | None  # (start, size); None: not allowed to ask


def _missing_function(error: BaseException) -> str | None:
    """The C function pynvml looked up and did not find (NVML_ERROR_FUNCTION_NOT_FOUND):
    pynvml raises that error without the name, from its lookup helper."""
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "_nvmlGetFunctionPointer":
            name = frame.f_locals.get("name")
            return name if isinstance(name, str) else None
        tb = tb.tb_next
    return None


def _text(value: object) -> str | None:
    return None if value is None else _decoded(value)


def _decoded(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _proc_name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _import_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError:
        raise GpuctlError(
            "the NVML Python binding (nvidia-ml-py) is not installed",
            hint="pip install 'nvidia-ml-py>=12,<14'",
        ) from None
    return pynvml


@dataclass(frozen=True)
class Driver:
    """What an NVML session runs on. By default this machine's NVIDIA driver: nvidia-ml-py's
    pynvml and the nvidia-smi on PATH (as an admin runs it). LOCK_PATH: the lock a change
    of the node's GPUs holds (None: the machine's own)."""

    # a pynvml-compatible module (same functions, constants, structs and errors), loaded
    # when a session opens, so that a missing one is that session's one clear error
    load: Callable[[], ModuleType] = _import_pynvml
    nvidia_smi: tuple[str, ...] = ("nvidia-smi",)  # the command whose --gpu-reset resets a GPU
    simulation: str | None = None  # the simulated node it runs (e.g. 8xH100-80GB), if any
    lock_path: str | None = None


class Nvml:
    """A session with NVML (nvmlInit .. nvmlShutdown) on DRIVER, as a context manager."""

    def __init__(self, driver: Driver | None = None):
        self.driver = driver or Driver()
        self._module: ModuleType | None = None

    # ---- session -------------------------------------------------------------------------
    def __enter__(self) -> Nvml:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def _n(self):
        """The pynvml module of the open session."""
        if self._module is None:
            raise GpuctlError("NVML session is not open (use `with Nvml(...) as nvml:`)")
        return self._module

    def open(self) -> None:
        if self._module is not None:
            return
        n = self.driver.load()
        try:
            n.nvmlInit()
        except n.NVMLError as e:
            if e.value == n.NVML_ERROR_LIBRARY_NOT_FOUND:
                raise GpuctlError(
                    "no NVIDIA driver on this machine (libnvidia-ml.so.1 not found)",
                    hint="run on a GPU node, or try a simulated one: --simulate 8xH100-80GB",
                ) from None
            raise NvmlError(e.value, "cannot initialize NVML", e) from None
        self._module = n

    def close(self) -> None:
        if self._module is not None:
            try:
                self._module.nvmlShutdown()
            except self._module.NVMLError:
                pass
            self._module = None

    @property
    def simulated(self) -> bool:
        return self.driver.simulation is not None

    # ---- the two wrappers every call goes through -------------------------------------------
    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self._n.NVMLError as e:
            raise NvmlError(e.value, what, e) from None

    def _query(self, fn, *args, absent: tuple[int, ...] = (), **kwargs):
        """A reading: None where the driver does not support it (or has no such function)."""
        try:
            return fn(*args, **kwargs)
        except self._n.NVMLError as e:
            missing = (self._n.NVML_ERROR_NOT_SUPPORTED, self._n.NVML_ERROR_FUNCTION_NOT_FOUND)
            if e.value in missing or e.value in absent:
                return None
            raise NvmlError(e.value, f"NVML {getattr(fn, '__name__', 'call')}", e) from None

    def _handle(self, index: int):
        n = self._n
        return self._call(f"GPU {index}", n.nvmlDeviceGetHandleByIndex, index)

    def driver_versions(self) -> dict[str, str | None]:
        """The driver's version, the newest CUDA version it runs and NVML's own version
        (None where the driver does not say)."""
        n = self._n
        cuda = self._query(n.nvmlSystemGetCudaDriverVersion_v2)  # e.g. 12040 for CUDA 12.4
        return {
            "driver": _text(self._query(n.nvmlSystemGetDriverVersion)),
            "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "nvml": _text(self._query(n.nvmlSystemGetNVMLVersion)),
        }

    # ---- node sample, for top -------------------------------------------------------------------
    def gpu_count(self) -> int:
        return self._call("count GPUs", self._n.nvmlDeviceGetCount)

    def sample(self) -> NodeSample:
        n = self._n
        count = self.gpu_count()
        driver = _text(self._query(n.nvmlSystemGetDriverVersion))
        return NodeSample(
            gpus=[self._sample_gpu(i) for i in range(count)],
            driver_version=driver,
            simulated=self.simulated,
        )

    def _memory_mib(self, handle) -> tuple[int | None, int | None]:
        n, q = self._n, self._query
        mem = None
        if hasattr(n, "nvmlMemory_v2"):
            mem = q(n.nvmlDeviceGetMemoryInfo, handle, version=n.nvmlMemory_v2)
        if mem is None:
            mem = q(n.nvmlDeviceGetMemoryInfo, handle)
        if mem is None:
            return None, None
        return mem.used // _MIB, mem.total // _MIB

    def _sample_gpu(self, index: int) -> GpuSample:
        n, q = self._n, self._query
        h = self._handle(index)
        util = q(n.nvmlDeviceGetUtilizationRates, h)
        used, total = self._memory_mib(h)
        power = q(n.nvmlDeviceGetPowerUsage, h)
        limit = q(n.nvmlDeviceGetEnforcedPowerLimit, h)
        mig = q(n.nvmlDeviceGetMigMode, h) or [None, None]
        mig_devices, processes = [], []
        if mig[0] == 1:
            for mh, dev in self._mig_devices(h):
                mig_devices.append(dev)
                processes.extend(self._processes(mh, dev.gi_id, dev.ci_id))
        else:
            processes = self._processes(h, None, None)
        return GpuSample(
            index=index,
            uuid=_text(q(n.nvmlDeviceGetUUID, h)),
            name=_text(q(n.nvmlDeviceGetName, h)),
            utilization_gpu=util.gpu if util is not None else None,
            utilization_memory=util.memory if util is not None else None,
            memory_used_mib=used,
            memory_total_mib=total,
            temperature_c=q(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
            power_w=power / 1000 if power is not None else None,
            power_limit_w=limit / 1000 if limit is not None else None,
            fan_percent=q(n.nvmlDeviceGetFanSpeed, h),
            clock_sm_mhz=q(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
            clock_mem_mhz=q(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
            mig_mode=mig[0],
            mig_mode_pending=mig[1],
            mig_devices=mig_devices,
            processes=processes,
        )

    def _mig_devices(self, handle):
        n, q = self._n, self._query
        for i in range(q(n.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
            mh = q(
                n.nvmlDeviceGetMigDeviceHandleByIndex, handle, i, absent=(n.NVML_ERROR_NOT_FOUND,)
            )
            if mh is None:
                continue
            gi_id = q(n.nvmlDeviceGetGpuInstanceId, mh)
            ci_id = q(n.nvmlDeviceGetComputeInstanceId, mh)
            name = _text(q(n.nvmlDeviceGetName, mh)) or ""
            used, total = self._memory_mib(mh)
            start = size = None
            gi = q(
                n.nvmlDeviceGetGpuInstanceById,
                handle,
                gi_id,
                absent=(n.NVML_ERROR_NO_PERMISSION, n.NVML_ERROR_NOT_FOUND),
            )
            if gi is not None:
                info = q(n.nvmlGpuInstanceGetInfo, gi, absent=(n.NVML_ERROR_NO_PERMISSION,))
                if info is not None:
                    start, size = info.placement.start, info.placement.size
            yield (
                mh,
                MigDevice(
                    gi_id=gi_id,
                    ci_id=ci_id,
                    uuid=_text(q(n.nvmlDeviceGetUUID, mh)),
                    profile=name.rpartition(" MIG ")[2] or None if " MIG " in name else None,
                    memory_used_mib=used,
                    memory_total_mib=total,
                    placement_start=start,
                    placement_size=size,
                ),
            )

    def _processes(self, handle, gi_id: int | None, ci_id: int | None) -> list[Process]:
        n, q = self._n, self._query
        seen: dict[int, Process] = {}
        for fn in (n.nvmlDeviceGetComputeRunningProcesses, n.nvmlDeviceGetGraphicsRunningProcesses):
            for p in q(fn, handle) or []:
                if p.pid in seen:
                    continue
                gi = getattr(p, "gpuInstanceId", _NO_ID)
                ci = getattr(p, "computeInstanceId", _NO_ID)
                mem = p.usedGpuMemory
                seen[p.pid] = Process(
                    pid=p.pid,
                    name=self._process_name(p.pid),
                    user=self._process_user(p.pid),
                    used_memory_mib=mem // _MIB if mem is not None else None,
                    gi_id=gi_id if gi_id is not None else (None if gi in (None, _NO_ID) else gi),
                    ci_id=ci_id if ci_id is not None else (None if ci in (None, _NO_ID) else ci),
                )
        return list(seen.values())

    def _process_name(self, pid: int) -> str | None:
        n = self._n
        absent = (n.NVML_ERROR_NOT_FOUND, n.NVML_ERROR_NO_PERMISSION)
        name = _text(self._query(n.nvmlSystemGetProcessName, pid, absent=absent))
        return name or _proc_name(pid)

    def _process_user(self, pid: int) -> str | None:
        # NVML does not say who runs a process: this machine's /proc does. For a pid /proc
        # lacks, ask the loaded NVML module: the simulator's answers `process_user(pid)` for
        # its simulated node (real pynvml has none). The owner then comes from the module in
        # use, like every reading, and this class never looks into the simulator.
        owner = getattr(self._n, "process_user", None)
        return user_of(pid) or (owner(pid) if owner else None)

    # ---- single readings (for mig and other commands) -----------------------------------------
    def gpu_name(self, index: int) -> str:
        return _decoded(
            self._call(f"GPU {index}: name", self._n.nvmlDeviceGetName, self._handle(index))
        )

    def gpu_uuid(self, index: int) -> str:
        return _decoded(
            self._call(f"GPU {index}: UUID", self._n.nvmlDeviceGetUUID, self._handle(index))
        )

    def mig_mode(self, index: int) -> tuple[int | None, int | None]:
        mode = self._query(self._n.nvmlDeviceGetMigMode, self._handle(index))
        return (mode[0], mode[1]) if mode is not None else (None, None)

    def processes(self, index: int) -> list[Process]:
        h = self._handle(index)
        if self.mig_mode(index)[0] == 1:
            return [
                p
                for mh, dev in self._mig_devices(h)
                for p in self._processes(mh, dev.gi_id, dev.ci_id)
            ]
        return self._processes(h, None, None)

    # ---- MIG layout ------------------------------------------------------------------------------
    def gpu_instances(self, index: int) -> list[GpuInstance]:
        """The GPU instances on a GPU (and their compute instances); [] when MIG is off."""
        n, q = self._n, self._query
        h = self._handle(index)
        if self.mig_mode(index)[0] != 1:
            return []
        out = []
        for const in range(_GI_PROFILE_COUNT):
            info = q(
                n.nvmlDeviceGetGpuInstanceProfileInfo,
                h,
                const,
                absent=(n.NVML_ERROR_INVALID_ARGUMENT,),
            )
            if info is None or info.instanceCount == 0:
                continue
            # Room for more than instanceCount: on A30 NVML reports it too low (mig-parted).
            size = max(info.instanceCount, _MAX_INSTANCES)
            array = (n.c_nvmlGpuInstance_t * size)()
            count = ctypes.c_uint(size)
            self._call(
                f"GPU {index}: list GPU instances",
                n.nvmlDeviceGetGpuInstances,
                h,
                info.id,
                array,
                ctypes.byref(count),
            )
            for gi in array[: count.value]:
                gi_info = self._call(
                    f"GPU {index}: GPU instance info", n.nvmlGpuInstanceGetInfo, gi
                )
                out.append(
                    GpuInstance(
                        gi_id=gi_info.id,
                        profile_id=gi_info.profileId,
                        start=gi_info.placement.start,
                        size=gi_info.placement.size,
                        compute_instances=self._compute_instances(gi),
                        profile_index=const,
                    )
                )
        return sorted(out, key=lambda g: g.gi_id)

    def _compute_instances(self, gi) -> list[ComputeInstance]:
        n, q = self._n, self._query
        out = []
        for const in range(_CI_PROFILE_COUNT):
            info = q(
                n.nvmlGpuInstanceGetComputeInstanceProfileInfo,
                gi,
                const,
                n.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                absent=(n.NVML_ERROR_INVALID_ARGUMENT,),
            )
            if info is None or info.instanceCount == 0:
                continue
            size = max(info.instanceCount, _MAX_INSTANCES)
            array = (n.c_nvmlComputeInstance_t * size)()
            count = ctypes.c_uint(size)
            self._call(
                "list compute instances",
                n.nvmlGpuInstanceGetComputeInstances,
                gi,
                info.id,
                array,
                ctypes.byref(count),
            )
            for ci in array[: count.value]:
                ci_info = self._call("compute instance info", n.nvmlComputeInstanceGetInfo_v2, ci)
                out.append(ComputeInstance(ci_id=ci_info.id, profile_id=ci_info.profileId))
        return sorted(out, key=lambda c: c.ci_id)

    def set_mig_mode(self, index: int, enabled: bool) -> None:
        """Sets the pending MIG mode; it becomes current after a GPU reset (see mig_mode)."""
        self._call(
            f"GPU {index}: set MIG mode {'on' if enabled else 'off'}",
            self._n.nvmlDeviceSetMigMode,
            self._handle(index),
            1 if enabled else 0,
        )

    def reset_gpu(self, index: int) -> None:
        """Resets the GPU, which applies a pending MIG mode (and clears its MIG instances).
        NVML has no reset call: the driver is reset by `nvidia-smi --gpu-reset` (on a
        simulated node, by its stand-in for nvidia-smi)."""
        n = self._n
        what = f"GPU {index}: reset"
        import subprocess

        try:
            proc = subprocess.run(
                [*self.driver.nvidia_smi, "--gpu-reset", "-i", str(index)],
                capture_output=True,
                text=True,
                timeout=120,
            )
        except FileNotFoundError:
            raise GpuctlError(
                f"{what}: nvidia-smi not found", hint="install the NVIDIA driver utilities"
            ) from None
        if proc.returncode != 0:
            text = (proc.stdout + proc.stderr).strip()
            code = (
                n.NVML_ERROR_IN_USE
                if "in use" in text.lower()
                else n.NVML_ERROR_NO_PERMISSION
                if "permission" in text.lower()
                else n.NVML_ERROR_UNKNOWN
            )
            raise NvmlError(
                code, f"{what} ({text.splitlines()[-1] if text else 'nvidia-smi failed'})"
            )

    def pci_ids(self, index: int) -> tuple[int | None, int | None]:
        """(PCI device id, subsystem id) as NVML packs them (device << 16 | vendor, e.g.
        0x20B010DE, 0x134F10DE): what mig-parted's device-filter matches."""
        info = self._query(self._n.nvmlDeviceGetPciInfo, self._handle(index))
        if info is None:
            return None, None
        return info.pciDeviceId, info.pciSubSystemId

    def gi_profile(self, index: int, profile_index: int) -> GiProfile | None:
        """This GPU's GPU-instance profile of NVML constant `profile_index`: the id the driver
        gives it and where it may be placed; None if the GPU (or its driver) has no such
        profile. As mig-parted does, the id is asked of the GPU, never assumed."""
        n = self._n
        h = self._handle(index)
        what = f"GPU {index}: GPU instance profile {profile_index}"
        # version 1: nvmlDeviceGetGpuInstanceProfileInfo itself, as go-nvlib calls it (the
        # V variant pynvml prefers refuses while MIG is off)
        info = self._query(
            n.nvmlDeviceGetGpuInstanceProfileInfo,
            h,
            profile_index,
            version=1,
            absent=(n.NVML_ERROR_INVALID_ARGUMENT,),
        )
        if info is None:
            return None
        count = ctypes.c_uint(0)
        try:
            n.nvmlDeviceGetGpuInstancePossiblePlacements(h, info.id, None, ctypes.byref(count))
        except n.NVMLError as e:
            if e.value == n.NVML_ERROR_NO_PERMISSION:  # only root may ask
                return GiProfile(info.id, None)
            raise NvmlError(e.value, what) from None
        array = (n.c_nvmlGpuInstancePlacement_t * count.value)()
        if count.value:
            self._call(
                what,
                n.nvmlDeviceGetGpuInstancePossiblePlacements,
                h,
                info.id,
                array,
                ctypes.byref(count),
            )
        return GiProfile(info.id, tuple((p.start, p.size) for p in array[: count.value]))

    def create_gpu_instance(self, index: int, profile_id: int, start: int) -> int:
        """Creates a GPU instance of profile *id* `profile_id` (see gi_profile) at memory
        slice `start`; returns the instance's id."""
        n = self._n
        h = self._handle(index)
        what = f"GPU {index}: create GPU instance (profile id {profile_id} at slice {start})"
        size = self._placement_size(h, profile_id, what)
        placement = n.c_nvmlGpuInstancePlacement_t(start, size)
        gi = self._call(
            what, n.nvmlDeviceCreateGpuInstanceWithPlacement, h, profile_id, ctypes.byref(placement)
        )
        return self._call(what, n.nvmlGpuInstanceGetInfo, gi).id

    def _placement_size(self, handle, profile_id: int, what: str) -> int:
        n = self._n
        count = ctypes.c_uint(0)
        self._call(
            what,
            n.nvmlDeviceGetGpuInstancePossiblePlacements,
            handle,
            profile_id,
            None,
            ctypes.byref(count),
        )
        if count.value == 0:
            raise NvmlError(n.NVML_ERROR_NOT_SUPPORTED, what)
        array = (n.c_nvmlGpuInstancePlacement_t * count.value)()
        self._call(
            what,
            n.nvmlDeviceGetGpuInstancePossiblePlacements,
            handle,
            profile_id,
            array,
            ctypes.byref(count),
        )
        # Every placement of a profile has the same size; the driver judges the start.
        return array[0].size

    def _gpu_instance(self, index: int, gi_id: int, what: str):
        return self._call(what, self._n.nvmlDeviceGetGpuInstanceById, self._handle(index), gi_id)

    def create_compute_instance(self, index: int, gi_id: int, ci_profile_id: int) -> int:
        what = f"GPU {index}: create compute instance (profile {ci_profile_id}) in GPU instance {gi_id}"
        gi = self._gpu_instance(index, gi_id, what)
        ci = self._call(what, self._n.nvmlGpuInstanceCreateComputeInstance, gi, ci_profile_id)
        return self._call(what, self._n.nvmlComputeInstanceGetInfo_v2, ci).id

    def destroy_compute_instance(self, index: int, gi_id: int, ci_id: int) -> None:
        what = f"GPU {index}: destroy compute instance {ci_id} of GPU instance {gi_id}"
        gi = self._gpu_instance(index, gi_id, what)
        ci = self._call(what, self._n.nvmlGpuInstanceGetComputeInstanceById, gi, ci_id)
        self._call(what, self._n.nvmlComputeInstanceDestroy, ci)

    def destroy_gpu_instance(self, index: int, gi_id: int) -> None:
        what = f"GPU {index}: destroy GPU instance {gi_id}"
        gi = self._gpu_instance(index, gi_id, what)
        self._call(what, self._n.nvmlGpuInstanceDestroy, gi)
