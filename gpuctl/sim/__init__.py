"""A simulated NVML: real MIG geometry, hardware-like refusals, state kept between commands.

- ``load_pynvml(spec)`` returns a ``pynvml`` module (nvidia-ml-py's own code, freshly loaded)
  whose C library is the simulated one (gpuctl.sim.libnvml) over a node such as
  ``8xH100-80GB`` or ``2xH200,2xA30``. Beside pynvml's API the module has
  ``process_user(pid)``: who runs a process of the simulated node, which on a real node the
  OS's process table tells (NVML does not).
- ``nvidia_smi_command(spec)`` runs the node's stand-in for ``nvidia-smi`` (its
  ``--gpu-reset``), gpuctl.sim.nvidia_smi.
- ``driver(spec)`` is both, as the NVML adapter's Driver (gpuctl.adapters.nvml): what
  gpuctl's commands run on for ``--simulate`` (gpuctl.app chooses it).
- ``SHIM_DIR`` put first on ``PYTHONPATH`` makes ``import pynvml`` in any program (nvitop,
  gpustat) load that module; the node comes from ``GPUCTL_SIMULATE`` / ``GPUCTL_SIM_STATE``.
- ``add_process`` / ``remove_process`` / ``reset_gpu`` change the simulated node, for tests
  and demos (a real driver offers none of them).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_loaded = 0
SHIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim")


def _real_pynvml_spec():
    """nvidia-ml-py's pynvml.py, skipping the shim directory should it be on sys.path."""
    paths = [p for p in sys.path if os.path.abspath(p or ".") != SHIM_DIR]
    spec = importlib.machinery.PathFinder.find_spec("pynvml", paths)
    if spec is None:
        from gpuctl.common.errors import GpuctlError

        raise GpuctlError(
            "the simulator needs nvidia-ml-py (module pynvml), which is not installed",
            hint="pip install 'nvidia-ml-py>=12,<14'",
        )
    return spec


def exec_pynvml_into(module) -> None:
    """Run nvidia-ml-py's code in `module`'s namespace (a fresh, independent copy)."""
    spec = _real_pynvml_spec()
    module.__file__ = spec.origin
    exec(spec.loader.get_code("pynvml"), module.__dict__)


def open_node(spec: str | None = None, state_path: str | None = None):
    """The simulated node named by `spec` or GPUCTL_SIMULATE, state in `state_path`,
    GPUCTL_SIM_STATE or the default file under ~/.cache/gpuctl/."""
    from gpuctl.common.errors import GpuctlError, UsageError
    from gpuctl.common.numbers import whole_number
    from gpuctl.sim.node import Node

    spec = spec or os.environ.get("GPUCTL_SIMULATE")
    state_path = state_path or os.environ.get("GPUCTL_SIM_STATE") or None
    if not spec and state_path and os.path.exists(state_path):
        import json

        try:
            with open(state_path, encoding="utf-8") as f:
                spec = json.load(f).get("spec")
        except (OSError, ValueError, AttributeError) as e:
            raise GpuctlError(
                f"cannot read the node spec from simulator state {state_path}: {e}",
                hint="set GPUCTL_SIMULATE, or delete the file",
            ) from None
    if not spec or not isinstance(spec, str):
        raise UsageError("no simulated node given", hint="set GPUCTL_SIMULATE, e.g. 8xH100-80GB")
    seed_text = os.environ.get("GPUCTL_SIM_SEED", "").strip() or "0"
    seed = whole_number(seed_text)
    if seed is None:
        raise UsageError(f"GPUCTL_SIM_SEED={seed_text!r} is not a whole number")
    return Node(spec, state_path, seed=seed)


def load_pynvml(spec: str | None = None, state_path: str | None = None):
    """A pynvml module over the simulated node (see `open_node` for how it is chosen)."""
    global _loaded
    _loaded += 1
    module = importlib.util.module_from_spec(_real_pynvml_spec())
    # pynvml looks itself up in sys.modules while it runs: register it under a name of its own.
    module.__name__ = f"gpuctl.sim._pynvml{_loaded}"
    sys.modules[module.__name__] = module
    try:
        exec_pynvml_into(module)
    finally:
        del sys.modules[module.__name__]
    attach(module, library(open_node(spec, state_path)))
    return module


def library(node):
    """The simulated C library over `node`, shaped by the environment:
    GPUCTL_SIM_WITHOUT=nvmlA,nvmlB leaves functions out (an older driver);
    GPUCTL_SIM_UNPRIVILEGED=1 refuses MIG layout calls with NO_PERMISSION (not root)."""
    from gpuctl.sim.libnvml import SimulatedLibrary

    without = tuple(
        n.strip() for n in os.environ.get("GPUCTL_SIM_WITHOUT", "").split(",") if n.strip()
    )
    return SimulatedLibrary(node, without=without, privileged=privileged())


def privileged() -> bool:
    """False under GPUCTL_SIM_UNPRIVILEGED=1: the simulated node then refuses what a real
    driver refuses a user who is not root."""
    return os.environ.get("GPUCTL_SIM_UNPRIVILEGED", "") in ("", "0")


def attach(module, library) -> None:
    """Make `library` the C library of a pynvml module (what its nvmlInit would load), and
    let the module tell who runs the simulated processes."""
    module.nvmlLib = library.entries
    module.process_user = library.process_user


def nvidia_smi_command(spec: str | None = None) -> list[str]:
    """The command line of the simulated node's `nvidia-smi` (gpuctl.sim.nvidia_smi); the
    node is `spec` (default GPUCTL_SIMULATE), its state GPUCTL_SIM_STATE."""
    return [sys.executable, "-m", "gpuctl.sim.nvidia_smi", *(["--simulate", spec] if spec else [])]


def driver(spec: str | None = None):
    """The simulated node SPEC (default GPUCTL_SIMULATE) as an NVML Driver: its pynvml module
    and nvidia-smi, and its lock beside its state file (GPUCTL_SIM_STATE, else the default)."""
    import functools

    from gpuctl.adapters.nvml import Driver
    from gpuctl.common.errors import UsageError
    from gpuctl.sim.node import default_state_path

    spec = spec or os.environ.get("GPUCTL_SIMULATE")
    if not spec:
        raise UsageError("no simulated node given", hint="set GPUCTL_SIMULATE, e.g. 8xH100-80GB")
    state = os.environ.get("GPUCTL_SIM_STATE") or default_state_path(spec)
    return Driver(
        load=functools.partial(load_pynvml, spec),
        nvidia_smi=tuple(nvidia_smi_command(spec)),
        simulation=spec,
        lock_path=state + ".lock-mig",
    )


def add_process(
    gpu: int,
    pid: int,
    used_memory_mib: int,
    *,
    name: str = "python",
    user: str = "root",
    gi_id: int | None = None,
    ci_id: int | None = None,
    spec: str | None = None,
    state_path: str | None = None,
) -> dict:
    """Put a process on GPU `gpu` (or on its MIG device gi_id/ci_id) of the simulated node.

    Raises gpuctl.sim.node.SimError (with an NVML code) when the hardware could not hold it:
    not enough memory, MIG device missing, MIG on but no MIG device given, and so on."""
    return open_node(spec, state_path).add_process(
        gpu, pid, used_memory_mib, name=name, user=user, gi_id=gi_id, ci_id=ci_id
    )


def remove_process(
    pid: int, gpu: int | None = None, *, spec: str | None = None, state_path: str | None = None
) -> int:
    """Take process `pid` off GPU `gpu` (or off every GPU); returns how many were removed."""
    return open_node(spec, state_path).remove_process(pid, gpu)


def reset_gpu(index: int, *, spec: str | None = None, state_path: str | None = None) -> None:
    """A simulated `nvidia-smi --gpu-reset`: applies a pending MIG mode, clears MIG instances;
    SimError(IN_USE) while processes run on the GPU."""
    open_node(spec, state_path).reset(index)
