"""A simulated AMD SMI Python library (the `amdsmi` package), for `gpuctl top --simulate
8xMI300X` and the tests: the calls gpuctl makes, with the names, arguments, returned dicts,
"N/A" values and errors of the real one, over a node of AMD Instinct GPUs.

Faithful to ROCm/amdsmi @ 0ceca28f4139dced5e9b5739a3f393780d7add48 (MIT):
py-interface/amdsmi_interface.py (each function's arguments, the keys of the dict it returns,
its type checks raising AmdSmiParameterException, _check_res raising AmdSmiLibraryException
with the C status), py-interface/amdsmi_exception.py (get_error_code, get_error_info and
their texts), include/amd_smi/amdsmi.h (status codes, enum values, units: VRAM in MB,
power in W, process memory in bytes, engine time in ns). Calls before amdsmi_init, or
after amdsmi_shut_down, fail with AMDSMI_STATUS_NOT_INIT, as the library's do; a handle
from another session is AMDSMI_STATUS_INVAL. An MI300X has no edge temperature sensor
(AMDSMI_STATUS_NOT_SUPPORTED; its hotspot is its junction), as AMD's device-metrics-exporter
reports it (GPU_EDGE_TEMPERATURE: MI2xx; GPU_JUNCTION_TEMPERATURE: MI3xx,
docs/configuration/metricslist.md).

A simulated GPU is idle unless GPUCTL_SIM_AMD_LOAD says otherwise: `GPU=PERCENT[:PID:NAME:MIB]`
entries, comma-separated (`0=87:4242:python:65536`), a process of that many MiB on it.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass, field
from enum import IntEnum

from gpuctl.common.errors import UsageError
from gpuctl.gpus import vendor_models
from gpuctl.sim.node import MAX_GPUS

# include/amd_smi/amdsmi.h amdsmi_status_t
STATUS = {
    "AMDSMI_STATUS_SUCCESS": 0,
    "AMDSMI_STATUS_INVAL": 1,
    "AMDSMI_STATUS_NOT_SUPPORTED": 2,
    "AMDSMI_STATUS_NOT_YET_IMPLEMENTED": 3,
    "AMDSMI_STATUS_NO_PERM": 10,
    "AMDSMI_STATUS_NOT_FOUND": 31,
    "AMDSMI_STATUS_NOT_INIT": 32,
    "AMDSMI_STATUS_DRIVER_NOT_LOADED": 34,
}
INFO = {  # amdsmi_exception.py set_err_info
    1: "AMDSMI_STATUS_INVAL - Invalid parameters",
    2: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
    3: "AMDSMI_STATUS_NOT_YET_IMPLEMENTED - Feature not yet implemented",
    10: "AMDSMI_STATUS_NO_PERM - Permission Denied",
    31: "AMDSMI_STATUS_NOT_FOUND - Device Not found",
    32: "AMDSMI_STATUS_NOT_INIT - Device not initialized",
    34: "AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded",
}
# Boards the simulation knows: PCI device ID, compute units, gfx target, socket power cap
# (W; AMD Instinct product pages: MI300X 750 W, MI325X 1000 W), peak engine clock (MHz)
BOARDS = {
    "MI300X": (0x74A1, 304, "gfx942", 750, 2100),
    "MI325X": (0x74A5, 304, "gfx942", 1000, 2100),
}
_SPEC = re.compile(r"^(\d+)x([0-9A-Za-z]+)$")


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1 << 0
    INIT_AMD_GPUS = 1 << 1
    INIT_NON_AMD_CPUS = 1 << 2
    INIT_NON_AMD_GPUS = 1 << 3
    INIT_AMD_APUS = (1 << 0) | (1 << 1)


class AmdSmiTemperatureType(IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1
    VRAM = 2
    HBM_0 = 3
    HBM_1 = 4
    HBM_2 = 5
    HBM_3 = 6
    PLX = 7


class AmdSmiTemperatureMetric(IntEnum):
    CURRENT = 0
    MAX = 1
    MIN = 2
    CRITICAL = 5


class AmdSmiClkType(IntEnum):
    SYS = 0
    GFX = 0
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4


class AmdSmiException(Exception):
    """Base smi exception class"""


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int):
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code
        self.err_info = INFO.get(
            err_code, "AMDSMI_STATUS_UNKNOWN_ERROR - An unknown error occurred"
        )

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"

    def get_error_info(self) -> str:
        return self.err_info

    def get_error_code(self) -> int:
        return self.err_code


class AmdSmiParameterException(AmdSmiException):
    def __init__(self, received, expected_type):
        super().__init__(None)
        self.err_code = None
        self.err_msg = (
            f"Invalid parameter:\nActual type: {type(received)}\nExpected type: {expected_type}"
        )

    def __str__(self) -> str:
        return self.err_msg


class ProcessorHandle:
    """Stands in for amdsmi_wrapper.amdsmi_processor_handle (an opaque pointer)."""

    def __init__(self, session: int, index: int):
        self.session, self.index = session, index


@dataclass
class SimGpu:
    model: str
    index: int
    gfx_activity: int = 0
    processes: list[dict] = field(default_factory=list)

    @property
    def vram_total_mb(self) -> int:
        return (vendor_models.memory_of(self.model) or 0) >> 20


def parse(spec: str) -> list[str]:
    """`8xMI300X` or `4xMI300X,4xMI325X`: each GPU's model; a UsageError naming what is
    wrong otherwise."""
    models: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        m = _SPEC.match(part)
        found = vendor_models.models_named(m.group(2)) if m else ()
        if not m or int(m.group(1)) < 1 or not found or found[0] not in BOARDS:
            raise UsageError(
                f"--simulate {spec}: {part!r} is not COUNTxMODEL of an AMD GPU the simulation has",
                hint="e.g. 8xMI300X; models: " + ", ".join(BOARDS),
            )
        if len(models) + int(m.group(1)) > MAX_GPUS:  # before a list that big is made
            raise UsageError(f"--simulate {spec}: more than {MAX_GPUS} GPUs")
        models += [found[0]] * int(m.group(1))
    return models


def driver(spec: str):
    """The simulated node SPEC as AMD SMI's driver (gpuctl.adapters.amdsmi): a fresh
    library, loaded when a session opens, so that a bad SPEC is that session's error."""
    from gpuctl.adapters.amdsmi import AmdDriver

    parse(spec)  # a bad spec is refused before anything starts
    return AmdDriver(load=lambda: SimulatedAmdSmi(spec), simulation=spec)


def _load(text: str, gpus: list[SimGpu]) -> None:
    """GPUCTL_SIM_AMD_LOAD entries onto GPUS."""
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        m = re.fullmatch(r"(\d+)=(\d+)(?::(\d+):([^:]+):(\d+))?", entry)
        if not m or int(m.group(1)) >= len(gpus):
            raise UsageError(f"GPUCTL_SIM_AMD_LOAD: {entry!r} is not GPU=PERCENT[:PID:NAME:MIB]")
        gpu = gpus[int(m.group(1))]
        gpu.gfx_activity = min(int(m.group(2)), 100)
        if m.group(3):
            used = int(m.group(5)) << 20
            gpu.processes.append({"pid": int(m.group(3)), "name": m.group(4), "vram": used})


class SimulatedAmdSmi:
    """The amdsmi module's calls over a simulated node of AMD GPUs."""

    AmdSmiInitFlags = AmdSmiInitFlags
    AmdSmiTemperatureType = AmdSmiTemperatureType
    AmdSmiTemperatureMetric = AmdSmiTemperatureMetric
    AmdSmiClkType = AmdSmiClkType
    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiParameterException = AmdSmiParameterException

    def process_user(self, pid: int) -> str | None:
        """Who runs a simulated process (on a real node /proc tells): root, the simulation's."""
        return "root"

    def __init__(self, spec: str, load: str | None = None):
        self.gpus = [SimGpu(model, i) for i, model in enumerate(parse(spec))]
        _load(load if load is not None else os.environ.get("GPUCTL_SIM_AMD_LOAD", ""), self.gpus)
        self.session = 0  # 0: not initialized; else the session's number
        self.sessions = 0

    # -- the library's lifecycle ------------------------------------------------------------

    def amdsmi_init(self, flag=AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
        if not isinstance(flag, AmdSmiInitFlags):
            raise AmdSmiParameterException(flag, AmdSmiInitFlags)
        self.sessions += 1
        self.session = self.sessions

    def amdsmi_shut_down(self) -> None:
        self._initialized()
        self.session = 0

    def _initialized(self) -> None:
        if not self.session:
            raise AmdSmiLibraryException(STATUS["AMDSMI_STATUS_NOT_INIT"])

    def _gpu(self, handle) -> SimGpu:
        if not isinstance(handle, ProcessorHandle):
            raise AmdSmiParameterException(handle, ProcessorHandle)
        self._initialized()
        if handle.session != self.session or not 0 <= handle.index < len(self.gpus):
            raise AmdSmiLibraryException(STATUS["AMDSMI_STATUS_INVAL"])
        return self.gpus[handle.index]

    # -- what gpuctl asks -------------------------------------------------------------------

    def amdsmi_get_processor_handles(self) -> list[ProcessorHandle]:
        self._initialized()
        return [ProcessorHandle(self.session, g.index) for g in self.gpus]

    def amdsmi_get_gpu_asic_info(self, handle) -> dict:
        gpu = self._gpu(handle)
        device_id, cus, target, _, _ = BOARDS[gpu.model]
        return {
            "market_name": f"AMD Instinct {gpu.model}",
            "vendor_id": hex(0x1002),
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "subvendor_id": hex(0x1002),
            "device_id": hex(device_id),
            "rev_id": "0x00",
            "asic_serial": f"0x{zlib.crc32(f'{gpu.index}/{gpu.model}'.encode()):016X}",
            "oam_id": gpu.index,
            "num_compute_units": cus,
            "target_graphics_version": target,
        }

    def amdsmi_get_gpu_device_uuid(self, handle) -> str:
        gpu = self._gpu(handle)
        crc = zlib.crc32(f"{gpu.index}/{gpu.model}".encode())
        return (
            f"{crc >> 16:04x}{BOARDS[gpu.model][0]:04x}-0000-1000-80{gpu.index:02x}-0000{crc:08x}"
        )

    def amdsmi_get_gpu_driver_info(self, handle) -> dict:
        self._gpu(handle)
        return {"driver_name": "amdgpu", "driver_version": "6.12.12", "driver_date": "2015/01/01 00:00"}  # fmt: skip

    def amdsmi_get_gpu_activity(self, handle) -> dict:
        gpu = self._gpu(handle)
        return {"gfx_activity": gpu.gfx_activity, "umc_activity": gpu.gfx_activity // 3, "mm_activity": "N/A"}  # fmt: skip

    def amdsmi_get_gpu_vram_usage(self, handle) -> dict:
        gpu = self._gpu(handle)
        used = sum(p["vram"] for p in gpu.processes) >> 20
        return {"vram_total": gpu.vram_total_mb, "vram_used": used}

    def amdsmi_get_power_info(self, handle) -> dict:
        gpu = self._gpu(handle)
        cap = BOARDS[gpu.model][3]
        power = 140 + (cap - 140) * gpu.gfx_activity // 100
        return {
            "current_socket_power": power,
            "average_socket_power": power,
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "power_limit": cap,
        }

    def amdsmi_get_temp_metric(self, handle, sensor_type, metric) -> int:
        gpu = self._gpu(handle)
        if not isinstance(sensor_type, AmdSmiTemperatureType):
            raise AmdSmiParameterException(sensor_type, AmdSmiTemperatureType)
        if not isinstance(metric, AmdSmiTemperatureMetric):
            raise AmdSmiParameterException(metric, AmdSmiTemperatureMetric)
        if sensor_type != AmdSmiTemperatureType.HOTSPOT or metric != AmdSmiTemperatureMetric.CURRENT:  # fmt: skip
            raise AmdSmiLibraryException(STATUS["AMDSMI_STATUS_NOT_SUPPORTED"])
        return 38 + gpu.gfx_activity // 3

    def amdsmi_get_clock_info(self, handle, clock_type) -> dict:
        gpu = self._gpu(handle)
        if not isinstance(clock_type, AmdSmiClkType):
            raise AmdSmiParameterException(clock_type, AmdSmiClkType)
        peak = BOARDS[gpu.model][4]
        if clock_type == AmdSmiClkType.GFX:
            clk = 132 if not gpu.gfx_activity else peak * (50 + gpu.gfx_activity // 2) // 100
            return {"clk": clk, "min_clk": 500, "max_clk": peak, "clk_locked": 0, "clk_deep_sleep": int(not gpu.gfx_activity)}  # fmt: skip
        if clock_type == AmdSmiClkType.MEM:
            return {"clk": 1300, "min_clk": 900, "max_clk": 1300, "clk_locked": 0, "clk_deep_sleep": 0}  # fmt: skip
        raise AmdSmiLibraryException(STATUS["AMDSMI_STATUS_NOT_SUPPORTED"])

    def amdsmi_get_gpu_process_list(self, handle) -> list[dict]:
        gpu = self._gpu(handle)
        return [
            {
                "name": p["name"],
                "pid": p["pid"],
                "mem": p["vram"],
                "engine_usage": {"gfx": 0, "enc": 0},
                "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": p["vram"]},
            }
            for p in gpu.processes
        ]
