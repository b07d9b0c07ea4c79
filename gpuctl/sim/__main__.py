"""`python -m gpuctl.sim`: change the simulated node from a shell, for demos and manual tests.

GPUCTL_SIMULATE=8xH100-80GB python -m gpuctl.sim add-process --gpu 0 --pid 4242 --mib 20000
python -m gpuctl.sim remove-process --pid 4242
python -m gpuctl.sim reset --gpu 0        # what `nvidia-smi --gpu-reset` does
python -m gpuctl.sim show                 # the state file, as JSON
"""

from __future__ import annotations

import argparse
import json
import sys

import gpuctl.sim
from gpuctl.common.errors import GpuctlError
from gpuctl.sim.node import SimError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpuctl.sim", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--simulate", metavar="SPEC", help="node spec (default: $GPUCTL_SIMULATE)")
    parser.add_argument("--state", metavar="PATH", help="state file (default: $GPUCTL_SIM_STATE)")
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add-process", help="put a process on a GPU or MIG device")
    add.add_argument("--gpu", type=int, required=True)
    add.add_argument("--pid", type=int, required=True)
    add.add_argument("--mib", type=int, required=True, help="GPU memory it uses")
    add.add_argument("--name", default="python")
    add.add_argument("--user", default="root")
    add.add_argument("--gi", type=int, help="GPU instance id (MIG)")
    add.add_argument("--ci", type=int, help="compute instance id (MIG)")
    remove = sub.add_parser("remove-process", help="take a process off (all) GPUs")
    remove.add_argument("--pid", type=int, required=True)
    remove.add_argument("--gpu", type=int)
    reset = sub.add_parser(
        "reset", help="reset a GPU: apply a pending MIG mode, clear MIG instances"
    )
    reset.add_argument("--gpu", type=int, required=True)
    sub.add_parser("show", help="print the node's state")
    args = parser.parse_args(argv)
    where = {"spec": args.simulate, "state_path": args.state}
    try:
        if args.command == "add-process":
            gpuctl.sim.add_process(
                args.gpu,
                args.pid,
                args.mib,
                name=args.name,
                user=args.user,
                gi_id=args.gi,
                ci_id=args.ci,
                **where,
            )
        elif args.command == "remove-process":
            if not gpuctl.sim.remove_process(args.pid, args.gpu, **where):
                print(f"gpuctl-sim: no process {args.pid} on the simulated node", file=sys.stderr)
                return 1
        elif args.command == "reset":
            gpuctl.sim.reset_gpu(args.gpu, **where)
        else:
            node = gpuctl.sim.open_node(args.simulate, args.state)
            print(json.dumps(node.state, indent=2))
    except SimError as e:
        print(f"gpuctl-sim: error: {e} (NVML code {e.code})", file=sys.stderr)
        return 1
    except GpuctlError as e:
        print(
            f"gpuctl-sim: error: {e.message}" + (f"\n  hint: {e.hint}" if e.hint else ""),
            file=sys.stderr,
        )
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
