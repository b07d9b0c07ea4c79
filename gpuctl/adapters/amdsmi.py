"""AMD SMI: the one module in gpuctl that calls AMD's System Management Interface library
(the `amdsmi` Python package over ROCm's libamd_smi), or whatever stands in for it: a
session runs on the `AmdDriver` it is given (the top of gpuctl hands in gpuctl.sim's for
`--simulate 8xMI300X`), never choosing one.

It reads what `gpuctl top` shows of this node's AMD GPUs, into the same NodeSample as
NVML's. A reading the GPU does not support ("N/A" in a returned dict, or
AMDSMI_STATUS_NOT_SUPPORTED / NOT_YET_IMPLEMENTED) is None; any other refusal is an
AmdSmiError with the library's status code. The package missing, or present without
ROCm's library to load, is one GpuctlError naming the extra to install.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gpuctl.common.errors import BackendError, GpuctlError
from gpuctl.gpus.sample import GpuSample, NodeSample, Process
from gpuctl.runtime.extras import install_hint
from gpuctl.runtime.processes import user_of

NOT_SUPPORTED, NOT_YET_IMPLEMENTED, DRIVER_NOT_LOADED = 2, 3, 34  # include/amd_smi/amdsmi.h
_MIB = 1 << 20
# the ROCm kernel driver's device: there on a node with AMD GPUs (and the amdgpu driver)
KFD = "/dev/kfd"
NVIDIA = "/dev/nvidiactl"


class AmdSmiError(BackendError):
    """The library refused a call; `code` is its amdsmi_status_t."""

    def __init__(self, code: int | None, what: str, info: str):
        self.code = code
        super().__init__(f"{what}: {info}" + (f" (AMD SMI code {code})" if code else ""))


def _import_amdsmi() -> Any:
    try:
        import amdsmi  # type: ignore[import-not-found]
    except (ImportError, OSError) as e:  # OSError: the package found no libamd_smi.so
        missing = isinstance(e, ModuleNotFoundError) and e.name == "amdsmi"
        raise GpuctlError(
            "AMD's SMI library (the amdsmi Python package) is not installed"
            if missing
            else f"AMD's SMI library (amdsmi) cannot load ROCm's libamd_smi: {e}",
            hint=install_hint("amdsmi"),
        ) from None
    return amdsmi


@dataclass(frozen=True)
class AmdDriver:
    """What an AMD SMI session runs on: by default the amdsmi package of this machine."""

    load: Callable[[], ModuleType | Any] = _import_amdsmi
    simulation: str | None = None  # the simulated node it runs (e.g. 8xMI300X), if any


def present() -> bool:
    """Whether this machine's GPUs are AMD's: the ROCm kernel driver's device is there and
    NVIDIA's is not (a node with both is NVML's, as before)."""
    return os.path.exists(KFD) and not os.path.exists(NVIDIA)


class AmdSmi:
    """A session with AMD SMI (amdsmi_init .. amdsmi_shut_down) on DRIVER."""

    def __init__(self, driver: AmdDriver | None = None):
        self.driver = driver or AmdDriver()
        self._module: Any = None

    def __enter__(self) -> AmdSmi:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        if self._module is not None:
            return
        a = self.driver.load()
        try:
            a.amdsmi_init(a.AmdSmiInitFlags.INIT_AMD_GPUS)
        except a.AmdSmiLibraryException as e:
            if e.get_error_code() == DRIVER_NOT_LOADED:
                raise GpuctlError(
                    "no AMD GPU driver (amdgpu) is loaded on this machine",
                    hint="run on an AMD GPU node, or try a simulated one: --simulate 8xMI300X",
                ) from None
            code, info = e.get_error_code(), e.get_error_info()
            raise AmdSmiError(code, "cannot initialize AMD SMI", info) from None
        self._module = a

    def close(self) -> None:
        if self._module is not None:
            try:
                self._module.amdsmi_shut_down()
            except self._module.AmdSmiException:
                pass
            self._module = None

    @property
    def _a(self) -> Any:
        if self._module is None:
            raise GpuctlError("AMD SMI session is not open (use `with AmdSmi(...) as smi:`)")
        return self._module

    def _query(self, fn, *args) -> Any:
        """A reading: None where the GPU does not support it."""
        try:
            return fn(*args)
        except self._a.AmdSmiLibraryException as e:
            if e.get_error_code() in (NOT_SUPPORTED, NOT_YET_IMPLEMENTED):
                return None
            code, info = e.get_error_code(), e.get_error_info()
            raise AmdSmiError(code, f"AMD SMI {fn.__name__}", info) from None
        except self._a.AmdSmiException as e:
            raise AmdSmiError(None, f"AMD SMI {fn.__name__}", str(e)) from None

    def sample(self) -> NodeSample:
        a = self._a
        handles = self._query(a.amdsmi_get_processor_handles) or []
        driver = self._query(a.amdsmi_get_gpu_driver_info, handles[0]) if handles else None
        return NodeSample(
            gpus=[self._sample_gpu(i, h) for i, h in enumerate(handles)],
            driver_version=_value((driver or {}).get("driver_version")),
            simulated=self.driver.simulation is not None,
        )

    def _process_user(self, pid: int) -> str | None:
        # amdsmi does not say who runs a process: this machine's /proc does, else the loaded
        # module (the simulator's `process_user`), as the NVML adapter asks
        owner = getattr(self._a, "process_user", None)
        return user_of(pid) or (owner(pid) if owner else None)

    def _sample_gpu(self, index: int, h: Any) -> GpuSample:
        a, q = self._a, self._query
        asic = q(a.amdsmi_get_gpu_asic_info, h) or {}
        activity = q(a.amdsmi_get_gpu_activity, h) or {}
        vram = q(a.amdsmi_get_gpu_vram_usage, h) or {}
        power = q(a.amdsmi_get_power_info, h) or {}
        hot, now = a.AmdSmiTemperatureType.HOTSPOT, a.AmdSmiTemperatureMetric.CURRENT
        gfx = q(a.amdsmi_get_clock_info, h, a.AmdSmiClkType.GFX) or {}
        mem = q(a.amdsmi_get_clock_info, h, a.AmdSmiClkType.MEM) or {}
        processes = [
            Process(
                pid=p["pid"],
                name=_value(p.get("name")),
                user=self._process_user(p["pid"]),
                used_memory_mib=(p.get("memory_usage") or {}).get("vram_mem", 0) // _MIB,
            )
            for p in q(a.amdsmi_get_gpu_process_list, h) or []
        ]
        return GpuSample(
            index=index,
            uuid=_value(q(a.amdsmi_get_gpu_device_uuid, h)),
            name=_value(asic.get("market_name")),
            utilization_gpu=_value(activity.get("gfx_activity")),
            utilization_memory=_value(activity.get("umc_activity")),
            memory_used_mib=_value(vram.get("vram_used")),  # MB, as the library counts
            memory_total_mib=_value(vram.get("vram_total")),
            temperature_c=q(a.amdsmi_get_temp_metric, h, hot, now),
            power_w=_value(power.get("current_socket_power")),
            power_limit_w=_value(power.get("power_limit")),
            fan_percent=None,  # an Instinct board has no fan of its own
            clock_sm_mhz=_value(gfx.get("clk")),
            clock_mem_mhz=_value(mem.get("clk")),
            mig_mode=None,
            mig_mode_pending=None,
            processes=processes,
        )


def _value(v: Any) -> Any:
    """The library's "N/A" (and an empty string) as None."""
    return None if v in ("N/A", "", None) else v
