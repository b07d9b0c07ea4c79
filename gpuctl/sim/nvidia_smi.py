"""`python -m gpuctl.sim.nvidia_smi`: the simulated node's `nvidia-smi`, for the one command
gpuctl runs of it: `--gpu-reset -i N` (`-r`). It resets the GPU as the hardware does (the
pending MIG mode applies, MIG instances are gone) and answers with nvidia-smi's words and
exit status: 255 "In use by another client" while processes run, 4 "Insufficient
Permissions" as a user who is not root (GPUCTL_SIM_UNPRIVILEGED=1), 6 for a GPU that is
not there. The node: --simulate SPEC or GPUCTL_SIMULATE, its state GPUCTL_SIM_STATE.
"""

from __future__ import annotations

import argparse
import sys

import gpuctl.sim
from gpuctl.common.errors import GpuctlError
from gpuctl.sim.node import SimError, bus_id

_IN_USE_NOTE = (
    "1 device is currently being used by one or more other processes (e.g., Fabric Manager, "
    "CUDA application, graphics application such as an X server, or a monitoring application "
    "such as another instance of nvidia-smi). Please first kill all processes using this "
    "device and all compute applications running in the system."
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nvidia-smi", description=__doc__.split("\n")[0])
    parser.add_argument("--simulate", metavar="SPEC", help="node spec (default: $GPUCTL_SIMULATE)")
    parser.add_argument("-r", "--gpu-reset", action="store_true", required=True)
    parser.add_argument("-i", "--id", type=int, required=True, metavar="INDEX")
    args = parser.parse_args(argv)
    try:
        return _reset(gpuctl.sim.open_node(args.simulate), args.id)
    except GpuctlError as e:  # a bad spec or state file: the simulator's own error
        print(f"gpuctl-sim: error: {e.message}", file=sys.stderr)
        return 255


def _reset(node, index: int) -> int:
    if not 0 <= index < len(node.gpus):
        print("No devices were found")
        return 6
    if not gpuctl.sim.privileged():
        _could_not_reset(index, "Insufficient Permissions")
        return 4
    try:
        node.reset(index)
    except SimError:  # processes run on it
        _could_not_reset(index, "In use by another client")
        print(f"\n{_IN_USE_NOTE}")
        return 255
    print(f"GPU {bus_id(index)} was successfully reset.")
    return 0


def _could_not_reset(index: int, reason: str) -> None:
    print(f"The following GPUs could not be reset:\n  GPU {bus_id(index)}: {reason}")


if __name__ == "__main__":
    sys.exit(main())
