"""`import pynvml` → nvidia-ml-py over gpuctl's simulated NVML.

Put this directory first on PYTHONPATH and set GPUCTL_SIMULATE=SPEC (and optionally
GPUCTL_SIM_STATE=PATH); any program that uses pynvml (nvitop, gpustat) then sees the
simulated node. Without a node configured, nvmlInit fails as on a machine with no driver.
"""

import os as _os
import sys as _sys

_root = _os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))))
if _root not in _sys.path:
    _sys.path.append(_root)

import gpuctl.sim as _sim  # noqa: E402

_sim.exec_pynvml_into(_sys.modules[__name__])


# The node is opened when nvmlInit loads "the driver", not on import: the simulator itself
# imports pynvml (for its return codes), which may be this module.
def _LoadNvmlLibrary():  # noqa: F811
    if nvmlLib is not None:  # noqa: F821
        return
    if not (_os.environ.get("GPUCTL_SIMULATE") or _os.path.exists(_os.environ.get("GPUCTL_SIM_STATE", ""))):
        _nvmlCheckReturn(NVML_ERROR_LIBRARY_NOT_FOUND)  # noqa: F821 - no node: as with no driver
    _sim.attach(_sys.modules[__name__], _sim.library(_sim.open_node()))
