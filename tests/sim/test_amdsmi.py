"""The simulated AMD SMI library answers as ROCm/amdsmi's Python package does (@ 0ceca28f,
py-interface/amdsmi_interface.py and amdsmi_exception.py, include/amd_smi/amdsmi.h): the
same functions and arguments, the same keys in what they return, the same exceptions and
status codes for a call before amdsmi_init, a stale handle, a wrong argument type and a
sensor the GPU lacks."""

from __future__ import annotations

import pytest

from gpuctl.common.errors import UsageError
from gpuctl.sim.amdsmi import SimulatedAmdSmi

# the keys each upstream function's dict has (amdsmi_interface.py)
KEYS = {
    "amdsmi_get_gpu_asic_info": {
        "market_name",
        "vendor_id",
        "vendor_name",
        "subvendor_id",
        "device_id",
        "rev_id",
        "asic_serial",
        "oam_id",
        "num_compute_units",
        "target_graphics_version",
    },  # fmt: skip
    "amdsmi_get_gpu_activity": {"gfx_activity", "umc_activity", "mm_activity"},
    "amdsmi_get_gpu_vram_usage": {"vram_total", "vram_used"},
    "amdsmi_get_power_info": {
        "current_socket_power",
        "average_socket_power",
        "gfx_voltage",
        "soc_voltage",
        "mem_voltage",
        "power_limit",
    },  # fmt: skip
    "amdsmi_get_gpu_driver_info": {"driver_name", "driver_version", "driver_date"},
}


@pytest.fixture
def smi():
    a = SimulatedAmdSmi("8xMI300X", load="1=90:77:train:4096")
    a.amdsmi_init(a.AmdSmiInitFlags.INIT_AMD_GPUS)
    return a


def test_every_call_returns_upstream_s_keys(smi):
    handles = smi.amdsmi_get_processor_handles()
    assert len(handles) == 8
    for name, keys in KEYS.items():
        assert set(getattr(smi, name)(handles[0])) == keys, name
    asic = smi.amdsmi_get_gpu_asic_info(handles[0])
    assert asic["device_id"] == "0x74a1" and asic["vendor_id"] == "0x1002"
    assert asic["market_name"] == "AMD Instinct MI300X"
    assert smi.amdsmi_get_gpu_vram_usage(handles[0]) == {"vram_total": 196608, "vram_used": 0}
    assert smi.amdsmi_get_gpu_activity(handles[0])["mm_activity"] == "N/A"
    (proc,) = smi.amdsmi_get_gpu_process_list(handles[1])
    assert proc["pid"] == 77 and proc["memory_usage"]["vram_mem"] == 4096 << 20
    assert set(proc) == {"name", "pid", "mem", "engine_usage", "memory_usage"}


def test_errors_carry_the_library_s_status_codes(smi):
    handles = smi.amdsmi_get_processor_handles()
    edge, now = smi.AmdSmiTemperatureType.EDGE, smi.AmdSmiTemperatureMetric.CURRENT
    with pytest.raises(smi.AmdSmiLibraryException) as e:
        smi.amdsmi_get_temp_metric(handles[0], edge, now)  # an MI300X has no edge sensor
    assert e.value.get_error_code() == 2
    assert e.value.get_error_info() == "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported"
    hot = smi.AmdSmiTemperatureType.HOTSPOT
    assert smi.amdsmi_get_temp_metric(handles[1], hot, now) == 68
    with pytest.raises(smi.AmdSmiParameterException):
        smi.amdsmi_get_gpu_activity(0)  # not a processor handle
    with pytest.raises(smi.AmdSmiParameterException):
        smi.amdsmi_get_temp_metric(handles[0], 1, now)  # not an AmdSmiTemperatureType
    smi.amdsmi_shut_down()
    with pytest.raises(smi.AmdSmiLibraryException) as e:
        smi.amdsmi_get_gpu_activity(handles[0])
    assert e.value.get_error_code() == 32  # AMDSMI_STATUS_NOT_INIT
    assert str(e.value) == "Error code:\n\t32 | AMDSMI_STATUS_NOT_INIT - Device not initialized"
    smi.amdsmi_init()
    with pytest.raises(smi.AmdSmiLibraryException) as e:
        smi.amdsmi_get_gpu_activity(handles[0])  # a handle of the last session
    assert e.value.get_error_code() == 1
    with pytest.raises(smi.AmdSmiParameterException):
        smi.amdsmi_init(2)  # a plain int, not AmdSmiInitFlags


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("8xMI250X", "8xMI250X"),
        ("8xH100-80GB", "8xH100-80GB"),
        ("0xMI300X", "0xMI300X"),
        ("MI300X", "MI300X"),
    ],  # fmt: skip
)
def test_a_node_the_simulation_lacks_is_refused_naming_it(spec, why):
    with pytest.raises(UsageError, match=why):
        SimulatedAmdSmi(spec)


def test_a_bad_load_is_refused():
    with pytest.raises(UsageError, match="GPUCTL_SIM_AMD_LOAD"):
        SimulatedAmdSmi("2xMI300X", load="5=10")
