"""The simulated node: GPUs of real models (from gpuctl.gpus.geometry), their MIG state and
processes, kept in a JSON state file so that separate commands see the same node.

Every operation that the hardware can refuse raises SimError with the NVML return code the
driver gives in that case (pynvml's NVML_ERROR_* constants); the simulated library
(gpuctl.sim.libnvml) passes the code on.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import time
from dataclasses import dataclass

from pynvml import (
    NVML_ERROR_IN_USE,
    NVML_ERROR_INSUFFICIENT_RESOURCES,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_RESET_REQUIRED,
    NVML_SUCCESS,
)

from gpuctl.common.errors import GpuctlError, UsageError
from gpuctl.common.numbers import whole_number
from gpuctl.gpus import geometry, names
from gpuctl.gpus.geometry import CI_PROFILE_SLICES
from gpuctl.runtime.files import make_private_dir, open_lock, write_atomic

STATE_VERSION = 1
MAX_GPUS = 1024
MIB = 1024 * 1024

# GPU-instance profile ids are the same on every 8-slice data-center GPU; the geometry table
# leaves a few unconfirmed (None), and the simulator needs some id to hand out.
_STANDARD_PROFILE_IDS = {0x0: 19, 0x7: 20, 0x9: 15, 0x1: 14, 0x2: 9, 0x3: 5, 0x4: 0}

_CI_PROFILE_REV1 = 7
_GI_PROFILE_1_SLICE_REV2 = 0x9

# Board figures the geometry table does not hold: power limit (W), idle power (W),
# max SM clock, memory clock (MHz). Public spec-sheet values.
_BOARD = {
    "A100-40GB": (400, 55, 1410, 1215),
    "A100-80GB": (400, 60, 1410, 1593),
    "A30": (165, 30, 1440, 1215),
    "H100-80GB": (700, 70, 1980, 2619),
    "H100-NVL": (400, 60, 1785, 2619),
    "GH200-480GB": (900, 90, 1980, 2619),
    "H200": (700, 75, 1980, 3201),
    "H200-NVL": (600, 70, 1785, 3201),
    "GH200-144GB": (900, 90, 1980, 3201),
    "B200": (1000, 120, 1965, 3996),
    "GB200": (1200, 130, 2062, 3996),
    "RTX-PRO-6000": (600, 40, 2430, 1750),
    "T4": (70, 10, 1590, 5001),
}
# PCI subsystem ids (subsystem device << 16 | vendor) where one was seen on such a board: an
# A100 SXM4 40GB shows [10de:134f] under lspci (a public transcript); others get one value.
_PCI_SUBSYSTEM = {"A100-40GB": 0x134F10DE}
_DEFAULT_PCI_SUBSYSTEM = 0x16C110DE


# GPUs without MIG, for mixed nodes (not in the MIG geometry table): NVML answers their MIG
# calls with NVML_ERROR_NOT_SUPPORTED, as mig-parted relies on. The DGX Station A100's
# display GPU is what mig-parted's dgx-station example config filters by 0x1FB010DE (its
# name and 4096 MiB as nvidia-smi prints them in public transcripts).
def _without_mig(nvml_name: str, short_name: str, memory_mib: int, pci_id: str):
    return geometry.GpuModel(
        nvml_name=nvml_name,
        short_name=short_name,
        memory_total_mib=memory_mib,
        memory_slices=0,
        compute_slices=0,
        max_gpu_instances=0,
        architecture="Turing",
        compute_capability="7.5",
        profiles=(),
        pci_device_ids=(pci_id,),
    )


NON_MIG_MODELS = (
    _without_mig("Tesla T4", "T4", 15360, "0x1EB810DE"),
    _without_mig("NVIDIA DGX Display", "DGX-Display", 4096, "0x1FB010DE"),
)
_IDLE_SM_CLOCK = 345


def pci_location(index: int) -> tuple[int, int]:
    """(domain, bus) of GPU `index`: 16 GPUs per PCI domain, buses 0x18, 0x26, ..."""
    return index // 16, 0x18 + index % 16 * 0x0E


def bus_id(index: int) -> str:
    """GPU `index`'s PCI bus id as NVML and nvidia-smi write it: 00000000:18:00.0."""
    domain, bus = pci_location(index)
    return f"{domain:08X}:{bus:02X}:00.0"


class SimError(Exception):
    """The simulated hardware refused: `code` is the NVML return code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SimProfile:
    """A GPU-instance profile as the simulated driver reports it."""

    profile: geometry.Profile
    profile_id: int
    memory_mib: int


def parse_spec(spec: str) -> list[geometry.GpuModel]:
    """`8xH100-80GB`, `2xH200,2xA30`, `A30` -> one model per GPU, in index order."""
    gpus: list[geometry.GpuModel] = []
    parts = [p.strip() for p in (spec or "").split(",")]
    if not spec or not spec.strip() or any(not p for p in parts):
        raise UsageError(
            f"bad simulated node spec {spec!r}",
            hint="use COUNTxMODEL[,COUNTxMODEL...], e.g. 8xH100-80GB or 2xH200,2xA30",
        )
    for part in parts:
        m = re.fullmatch(r"(?:([0-9]+)\s*[xX*]\s*)?(.+)", part, re.DOTALL)
        assert m is not None  # its (.+) matches any part that is not empty
        count = whole_number(m.group(1)) if m.group(1) else 1
        try:
            model = _find_model(m.group(2).strip())
        except GpuctlError as e:
            raise UsageError(
                f"bad simulated node spec {spec!r}: {e.message}", hint=e.hint
            ) from None
        if count == 0:
            raise UsageError(f"bad simulated node spec {spec!r}: GPU count must be at least 1")
        if count is None or len(gpus) + count > MAX_GPUS:  # before a list that big is made
            raise UsageError(f"bad simulated node spec {spec!r}: more than {MAX_GPUS} GPUs")
        gpus.extend([model] * count)
    return gpus


def _find_model(name: str) -> geometry.GpuModel:
    return names.resolve(name, (*geometry.models(), *NON_MIG_MODELS))


def canonical_spec(spec: str) -> str:
    """One spelling per node: runs of the same model joined, short model names."""
    runs: list[list] = []
    for model in parse_spec(spec):
        if runs and runs[-1][1] == model.short_name:
            runs[-1][0] += 1
        else:
            runs.append([1, model.short_name])
    return ",".join(f"{n}x{name}" for n, name in runs)


def default_state_path(spec: str) -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpuctl", f"sim-{canonical_spec(spec).replace(',', '_')}.json")


def sim_profiles(model: geometry.GpuModel) -> list[SimProfile]:
    out = []
    for p in model.profiles:
        pid = p.profile_id
        if pid is None and model.memory_slices == 8:
            pid = _STANDARD_PROFILE_IDS.get(p.index)
        if pid is None:
            continue
        mem = p.memory_mib
        if mem is None:  # unconfirmed: the profile's share of the memory slices, 64 MiB aligned
            mem = model.memory_total_mib * p.memory_slices // model.memory_slices // 64 * 64
        out.append(SimProfile(p, pid, mem))
    return out


_GI_KEYS = {"id", "profile_id", "start", "size", "compute_instances"}
_PROCESS_KEYS = {"pid", "name", "user", "gpu", "gi_id", "ci_id", "used_memory_mib"}


MAX_CLOCK_S = 1e11  # year 5138: NVML timestamps in microseconds still fit 64 bits


def fixed_clock(text: str) -> float:
    """GPUCTL_SIM_CLOCK: the simulated node's time, seconds since 1970."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_CLOCK_S:  # also refuses nan and inf
        raise UsageError(
            f"GPUCTL_SIM_CLOCK={text!r} is not a time in seconds since 1970 "
            f"(0 to {MAX_CLOCK_S:.0e})",
            hint="unset it to use this machine's clock",
        )
    return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _uuid(seed: int, index: int, *extra) -> str:
    h = hashlib.sha256(repr((seed, index) + extra).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class Node:
    """A simulated node. Mutating methods check like the driver, then save the state file."""

    def __init__(self, spec: str, state_path: str | None = None, seed: int = 0):
        self.spec = canonical_spec(spec)
        self.now()  # a bad GPUCTL_SIM_CLOCK is refused before anything is read or written
        self.models = parse_spec(self.spec)
        self.path = state_path or default_state_path(self.spec)
        self._stamp: tuple | None = None  # identity of the state file version we hold
        self._profiles = {m.short_name: sim_profiles(m) for m in set(self.models)}
        self.state: dict = {}
        self._load_or_create(seed)

    # ---- persistence -------------------------------------------------------------------
    def _fresh_state(self, seed: int) -> dict:
        return {
            "version": STATE_VERSION,
            "spec": self.spec,
            "seed": seed,
            "gpus": [
                {
                    "uuid": "GPU-" + _uuid(seed, i),
                    "model": m.short_name,
                    "mig_current": 0,
                    "mig_pending": 0,
                    "gpu_instances": [],
                }
                for i, m in enumerate(self.models)
            ],
            "processes": [],
        }

    def _read(self) -> dict | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                st = os.fstat(f.fileno())
                data = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise GpuctlError(
                f"cannot read simulator state {self.path}: {e}",
                hint="delete the file to start from a fresh simulated node",
            ) from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise GpuctlError(
                f"simulator state {self.path} is not a version-{STATE_VERSION} state",
                hint="delete the file to start from a fresh simulated node",
            )
        if data.get("spec") != self.spec:
            raise GpuctlError(
                f"simulator state {self.path} holds node {data.get('spec')!r}, not {self.spec!r}",
                hint="point GPUCTL_SIM_STATE at another file, or delete this one",
            )
        problem = self._state_problem(data)
        if problem:
            raise GpuctlError(
                f"simulator state {self.path} is damaged: {problem}",
                hint="delete the file to start from a fresh simulated node",
            )
        self._stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        return data

    def _load_or_create(self, seed: int) -> None:
        data = self._read()
        if data is None:
            with self._locked():
                data = self._read()
                if data is None:
                    self.state = self._fresh_state(seed)
                    self._write()
                    return
        self.state = data

    def refresh(self) -> None:
        """Pick up changes another command saved since we last looked. Every save replaces the
        file (a new inode), so (inode, mtime, size) tells versions apart even within one tick."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        if (st.st_ino, st.st_mtime_ns, st.st_size) != self._stamp:
            data = self._read()
            if data is not None:
                self.state = data

    def _state_problem(self, data: dict) -> str | None:
        """What is wrong with a state file (it may have been edited by hand), or None: the
        shape and types, and every MIG instance where the driver could have made it."""
        gpus, procs = data.get("gpus"), data.get("processes")
        if not _is_int(data.get("seed")):
            return "'seed' is not a whole number"
        if not isinstance(gpus, list) or len(gpus) != len(self.models):
            return f"expected a list of {len(self.models)} GPUs under 'gpus'"
        if not isinstance(procs, list):
            return "expected a list under 'processes'"
        mig_devices: dict[int, set] = {}
        for i, g in enumerate(gpus):
            problem = self._gpu_problem(i, g)
            if problem:
                return f"GPU {i}: {problem}"
            mig_devices[i] = {
                (gi["id"], ci["id"]) for gi in g["gpu_instances"] for ci in gi["compute_instances"]
            }
        seen = set()
        for p in procs:
            if not isinstance(p, dict) or not _PROCESS_KEYS <= p.keys():
                return "a process lacks " + ", ".join(sorted(_PROCESS_KEYS))
            pid, gpu = p["pid"], p["gpu"]
            if not (
                _is_int(pid)
                and pid > 0
                and _is_int(p["used_memory_mib"])
                and p["used_memory_mib"] >= 0
                and isinstance(p["name"], str)
                and isinstance(p["user"], str)
            ):
                return f"process {pid!r}: pid, used_memory_mib, name or user has a wrong type"
            if not _is_int(gpu) or not 0 <= gpu < len(gpus):
                return f"process {pid} is on GPU {gpu!r}, which the node does not have"
            if (pid, gpu) in seen:
                return f"process {pid} is listed twice on GPU {gpu}"
            seen.add((pid, gpu))
            where = (p["gi_id"], p["ci_id"])
            if gpus[gpu]["mig_current"] == 1 and where not in mig_devices[gpu]:
                return f"process {pid} is on MIG device {where} of GPU {gpu}, which does not exist"
            if gpus[gpu]["mig_current"] != 1 and where != (None, None):
                return f"process {pid} is on a MIG device of GPU {gpu}, where MIG is off"
        return None

    def _gpu_problem(self, index: int, g) -> str | None:
        if (
            not isinstance(g, dict)
            or not {"uuid", "mig_current", "mig_pending", "gpu_instances"} <= g.keys()
        ):
            return "lacks uuid, mig_current, mig_pending or gpu_instances"
        if not isinstance(g["uuid"], str) or not g["uuid"].startswith("GPU-"):
            return f"uuid {g['uuid']!r} is not like GPU-..."
        if any(
            g[k] not in (0, 1) or isinstance(g[k], bool) for k in ("mig_current", "mig_pending")
        ):
            return "mig_current and mig_pending must be 0 or 1"
        if not isinstance(g["gpu_instances"], list):
            return "gpu_instances is not a list"
        if g["gpu_instances"] and g["mig_current"] != 1:
            return "has GPU instances while MIG is off"
        if not self.models[index].profiles and (g["mig_current"] or g["mig_pending"]):
            return f"MIG is on, but a {self.models[index].short_name} has no MIG"
        made: list[dict] = []
        for gi in g["gpu_instances"]:
            if (
                not isinstance(gi, dict)
                or not _GI_KEYS <= gi.keys()
                or not all(_is_int(gi[k]) for k in _GI_KEYS - {"compute_instances"})
            ):
                return "a GPU instance lacks " + ", ".join(sorted(_GI_KEYS)) + " (whole numbers)"
            if not 0 <= gi["id"] < 1 << 16 or any(gi["id"] == m["id"] for m in made):
                return f"GPU instance id {gi['id']} is out of range or used twice"
            try:
                sp = self.profile_by_id(index, gi["profile_id"])
                if gi["size"] != sp.profile.size:
                    raise SimError(
                        NVML_ERROR_INVALID_ARGUMENT, f"size {gi['size']} is not {sp.profile.size}"
                    )
                self._free_start(index, sp, gi["start"], made)
            except SimError as e:
                return f"GPU instance {gi['id']} could not exist: {e}"
            made.append(gi)
            problem = self._cis_problem(index, gi)
            if problem:
                return f"GPU instance {gi['id']}: {problem}"
        return None

    def _cis_problem(self, index: int, gi: dict) -> str | None:
        cis = gi["compute_instances"]
        if not isinstance(cis, list):
            return "compute_instances is not a list"
        ids: set[int] = set()  # compute instance ids
        used: set[int] = set()  # slices
        g = self.profile_by_id(index, gi["profile_id"]).profile.slices
        for ci in cis:
            if (
                not isinstance(ci, dict)
                or not {"id", "profile_id", "start", "size"} <= ci.keys()
                or not all(_is_int(ci[k]) for k in ("id", "profile_id", "start", "size"))
            ):
                return "a compute instance lacks id, profile_id, start or size (whole numbers)"
            if not 0 <= ci["id"] < 1 << 16 or ci["id"] in ids:
                return f"compute instance id {ci['id']} is out of range or used twice"
            ids.add(ci["id"])
            if not self.ci_profile_supported(index, gi, ci["profile_id"]):
                return f"compute-instance profile {ci['profile_id']} does not fit it"
            slices = set(range(ci["start"], ci["start"] + ci["size"]))
            if (
                ci["size"] != CI_PROFILE_SLICES[ci["profile_id"]]
                or not slices <= set(range(g))
                or slices & used
            ):
                return f"compute instance {ci['id']} is not at a free placement in its {g} slices"
            used |= slices
        return None

    def _unwritable(self, e: OSError) -> GpuctlError:
        return GpuctlError(
            f"cannot write simulator state {self.path}: {e.strerror or e}",
            hint="point GPUCTL_SIM_STATE at a file in a writable directory",
        )

    @contextlib.contextmanager
    def _locked(self):
        try:
            make_private_dir(os.path.dirname(os.path.abspath(self.path)))
            lock = open_lock(self.path + ".lock")
        except OSError as e:
            raise self._unwritable(e) from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock)  # releases the lock

    def _write(self) -> None:
        try:
            write_atomic(self.path, json.dumps(self.state, indent=1))
        except OSError as e:
            raise self._unwritable(e) from None
        st = os.stat(self.path)
        self._stamp = (st.st_ino, st.st_mtime_ns, st.st_size)

    @contextlib.contextmanager
    def change(self):
        """Read-modify-write under a file lock, so two commands cannot lose each other's work."""
        with self._locked():
            data = self._read()
            if data is not None:
                self.state = data
            yield self.state
            self._write()

    # ---- queries -----------------------------------------------------------------------
    @property
    def gpus(self) -> list[dict]:
        return self.state["gpus"]

    def gpu(self, index: int) -> dict:
        if not 0 <= index < len(self.gpus):
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, f"no GPU {index}")
        return self.gpus[index]

    def model(self, index: int) -> geometry.GpuModel:
        return self.models[index]

    def profiles(self, index: int) -> list[SimProfile]:
        return self._profiles[self.models[index].short_name]

    def profile_by_index(self, index: int, constant: int) -> SimProfile:
        if not 0 <= constant < 0x12:
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, f"profile index {constant} out of range")
        for p in self.profiles(index):
            if p.profile.index == constant:
                return p
        raise SimError(
            NVML_ERROR_NOT_SUPPORTED, f"profile index {constant} not supported on GPU {index}"
        )

    def profile_by_id(self, index: int, profile_id: int) -> SimProfile:
        for p in self.profiles(index):
            if p.profile_id == profile_id:
                return p
        raise SimError(
            NVML_ERROR_NOT_SUPPORTED, f"profile id {profile_id} not supported on GPU {index}"
        )

    def mig_enabled(self, index: int) -> bool:
        return self.gpu(index)["mig_current"] == 1

    def require_mig(self, index: int) -> dict:
        gpu = self.gpu(index)
        if not self.models[index].profiles:
            raise SimError(NVML_ERROR_NOT_SUPPORTED, f"GPU {index} has no MIG")
        if gpu["mig_current"] != 1:
            raise SimError(NVML_ERROR_NOT_SUPPORTED, f"MIG is not enabled on GPU {index}")
        return gpu

    def gpu_instance(self, index: int, gi_id: int) -> dict:
        for gi in self.require_mig(index)["gpu_instances"]:
            if gi["id"] == gi_id:
                return gi
        raise SimError(NVML_ERROR_NOT_FOUND, f"no GPU instance {gi_id} on GPU {index}")

    def compute_instance(self, index: int, gi_id: int, ci_id: int) -> dict:
        for ci in self.gpu_instance(index, gi_id)["compute_instances"]:
            if ci["id"] == ci_id:
                return ci
        raise SimError(NVML_ERROR_NOT_FOUND, f"no compute instance {ci_id} in GPU instance {gi_id}")

    def mig_devices(self, index: int) -> list[tuple[dict, dict]]:
        """(GI, CI) pairs in the order NVML enumerates MIG device handles."""
        gpu = self.gpu(index)
        if gpu["mig_current"] != 1:
            return []
        return [
            (gi, ci)
            for gi in sorted(gpu["gpu_instances"], key=lambda g: g["id"])
            for ci in sorted(gi["compute_instances"], key=lambda c: c["id"])
        ]

    def processes(
        self, index: int, gi_id: int | None = None, ci_id: int | None = None
    ) -> list[dict]:
        out = []
        for p in self.state["processes"]:
            if p["gpu"] != index:
                continue
            if gi_id is not None and p["gi_id"] != gi_id:
                continue
            if ci_id is not None and p["ci_id"] != ci_id:
                continue
            out.append(p)
        return out

    def memory_used_mib(
        self, index: int, gi_id: int | None = None, ci_id: int | None = None
    ) -> int:
        return sum(p["used_memory_mib"] for p in self.processes(index, gi_id, ci_id))

    def gi_memory_mib(self, index: int, gi: dict) -> int:
        return self.profile_by_id(index, gi["profile_id"]).memory_mib

    # ---- time-varying readings -----------------------------------------------------------
    def now(self) -> float:
        fixed = os.environ.get("GPUCTL_SIM_CLOCK")
        return fixed_clock(fixed) if fixed else time.time()

    def utilization(self, index: int, gi_id: int | None = None) -> int:
        """Busy GPUs (with processes) move between ~30 and 100 %; idle ones read 0."""
        if not self.processes(index, gi_id):
            return 0
        seed = self.state["seed"]
        phase = int.from_bytes(
            hashlib.sha256(f"{seed}:{index}:{gi_id}".encode()).digest()[:4], "big"
        )
        t = self.now()
        value = (
            65 + 30 * math.sin(t / 17.0 + phase % 628 / 100) + 5 * math.sin(t / 3.0 + phase % 97)
        )
        return max(0, min(100, int(value)))

    def pci_device_id(self, index: int) -> int:
        """The model's first PCI device id (device << 16 | vendor)."""
        return int(self.models[index].pci_device_ids[0], 16)

    def pci_subsystem_id(self, index: int) -> int:
        return _PCI_SUBSYSTEM.get(self.models[index].short_name, _DEFAULT_PCI_SUBSYSTEM)

    def board(self, index: int) -> tuple[int, int, int, int]:
        return _BOARD.get(self.models[index].short_name, (400, 50, 1500, 1500))

    def temperature(self, index: int) -> int:
        return 30 + index * 7 % 5 + self._gpu_load(index) * 45 // 100

    def power_mw(self, index: int) -> int:
        limit, idle, _, _ = self.board(index)
        return idle * 1000 + (limit - idle) * 10 * self._gpu_load(index) + index % 3 * 100

    def sm_clock(self, index: int) -> int:
        return self.board(index)[2] if self._gpu_load(index) else _IDLE_SM_CLOCK

    def _gpu_load(self, index: int) -> int:
        """What the board feels: the whole GPU, or the busiest MIG device on it."""
        if not self.mig_enabled(index):
            return self.utilization(index)
        return max(
            [self.utilization(index, gi["id"]) for gi in self.gpu(index)["gpu_instances"]],
            default=0,
        )

    # ---- MIG changes -------------------------------------------------------------------
    def set_mig_mode(self, index: int, mode: int) -> int:
        """Sets the pending mode; returns the activation status (applied only by a reset)."""
        if not self.models[index].profiles:
            raise SimError(NVML_ERROR_NOT_SUPPORTED, f"GPU {index} has no MIG")
        if mode not in (0, 1):
            raise SimError(NVML_ERROR_INVALID_ARGUMENT, f"bad MIG mode {mode}")
        with self.change():
            gpu = self.gpu(index)
            gpu["mig_pending"] = mode
            if gpu["mig_current"] == mode:
                return NVML_SUCCESS
            return NVML_ERROR_IN_USE if self.processes(index) else NVML_ERROR_RESET_REQUIRED

    def reset(self, index: int) -> None:
        """A GPU reset: refused while processes run; applies the pending MIG mode; like on
        the hardware, GPU and compute instances do not survive it."""
        with self.change():
            gpu = self.gpu(index)
            if self.processes(index):
                raise SimError(NVML_ERROR_IN_USE, f"GPU {index} has running processes")
            gpu["mig_current"] = gpu["mig_pending"]
            gpu["gpu_instances"] = []

    def _free_start(self, index: int, sp: SimProfile, start: int | None, gis: list[dict]) -> int:
        """Where the driver puts a new `sp` instance next to `gis` (or why it refuses)."""
        model = self.models[index]
        if start is not None and start not in sp.profile.starts:
            raise SimError(
                NVML_ERROR_INVALID_ARGUMENT,
                f"start {start} is not a placement of {sp.profile.name} "
                f"(valid: {list(sp.profile.starts)})",
            )
        same = sum(1 for gi in gis if gi["profile_id"] == sp.profile_id)
        if same >= sp.profile.max_instances:
            raise SimError(
                NVML_ERROR_INSUFFICIENT_RESOURCES,
                f"at most {sp.profile.max_instances} {sp.profile.name} instances",
            )
        if len(gis) >= model.max_gpu_instances:
            raise SimError(
                NVML_ERROR_INSUFFICIENT_RESOURCES,
                f"at most {model.max_gpu_instances} GPU instances",
            )
        profiles = [self.profile_by_id(index, gi["profile_id"]).profile for gi in gis]
        if sum(p.slices for p in profiles) + sp.profile.slices > model.compute_slices:
            raise SimError(NVML_ERROR_INSUFFICIENT_RESOURCES, "not enough compute slices left")
        media = geometry.media_conflict([p.name for p in profiles] + [sp.profile.name])
        if media:
            rule, culprits = media
            raise SimError(
                NVML_ERROR_INSUFFICIENT_RESOURCES,
                f"media engines taken ({rule}: {', '.join(culprits)})",
            )
        occupied = {s for gi in gis for s in range(gi["start"], gi["start"] + gi["size"])}
        candidates = [start] if start is not None else sorted(sp.profile.starts, reverse=True)
        for s in candidates:
            if not occupied & set(range(s, s + sp.profile.size)):
                return s
        raise SimError(
            NVML_ERROR_INSUFFICIENT_RESOURCES, f"memory slices for {sp.profile.name} are occupied"
        )

    def create_gpu_instance(
        self, index: int, profile_id: int, start: int | None = None, size: int | None = None
    ) -> dict:
        """WithPlacement when start is given, else the driver picks a placement."""
        with self.change():
            gpu = self.require_mig(index)
            sp = self.profile_by_id(index, profile_id)
            if size is not None and size != sp.profile.size:
                raise SimError(
                    NVML_ERROR_INVALID_ARGUMENT,
                    f"placement size {size} is not {sp.profile.name}'s {sp.profile.size}",
                )
            s = self._free_start(index, sp, start, gpu["gpu_instances"])
            used_ids = {gi["id"] for gi in gpu["gpu_instances"]}
            gi = {
                "id": min(i for i in range(1, len(used_ids) + 2) if i not in used_ids),
                "profile_id": profile_id,
                "start": s,
                "size": sp.profile.size,
                "compute_instances": [],
            }
            gpu["gpu_instances"].append(gi)
            return gi

    def remaining_capacity(self, index: int, profile_id: int) -> int:
        self.require_mig(index)
        sp = self.profile_by_id(index, profile_id)
        gis = list(self.gpu(index)["gpu_instances"])
        count = 0
        try:
            while True:
                s = self._free_start(index, sp, None, gis)
                gis.append({"profile_id": profile_id, "start": s, "size": sp.profile.size})
                count += 1
        except SimError:
            return count

    def destroy_gpu_instance(self, index: int, gi_id: int) -> None:
        with self.change():
            gi = self.gpu_instance(index, gi_id)
            if self.processes(index, gi_id):
                raise SimError(NVML_ERROR_IN_USE, f"GPU instance {gi_id} has running processes")
            if gi["compute_instances"]:
                raise SimError(
                    NVML_ERROR_IN_USE, f"GPU instance {gi_id} still has compute instances"
                )
            self.gpu(index)["gpu_instances"].remove(gi)

    def ci_profile_supported(self, index: int, gi: dict, ci_profile: int) -> bool:
        sp = self.profile_by_id(index, gi["profile_id"])
        g = sp.profile.slices
        c = CI_PROFILE_SLICES.get(ci_profile)
        if c is None or c > g or c in (6, 8) and c != g:
            return False
        if ci_profile == _CI_PROFILE_REV1:
            return sp.profile.index == _GI_PROFILE_1_SLICE_REV2
        return True

    def ci_instance_count(self, index: int, gi: dict, ci_profile: int) -> int:
        g = self.profile_by_id(index, gi["profile_id"]).profile.slices
        return g // CI_PROFILE_SLICES[ci_profile]

    def ci_free_starts(self, index: int, gi: dict, ci_profile: int) -> list[int]:
        """Non-overlapping starts (lowest first) where more compute instances of this profile
        fit beside the GPU instance's existing ones."""
        g = self.profile_by_id(index, gi["profile_id"]).profile.slices
        size = CI_PROFILE_SLICES[ci_profile]
        used = {
            s for c in gi["compute_instances"] for s in range(c["start"], c["start"] + c["size"])
        }
        starts = []
        for s in range(g - size + 1):
            if not used & set(range(s, s + size)):
                starts.append(s)
                used |= set(range(s, s + size))
        return starts

    def ci_remaining(self, index: int, gi: dict, ci_profile: int) -> int:
        return len(self.ci_free_starts(index, gi, ci_profile))

    def create_compute_instance(self, index: int, gi_id: int, ci_profile: int) -> dict:
        with self.change():
            gi = self.gpu_instance(index, gi_id)
            if not self.ci_profile_supported(index, gi, ci_profile):
                raise SimError(
                    NVML_ERROR_NOT_SUPPORTED,
                    f"compute-instance profile {ci_profile} not supported in GPU instance {gi_id}",
                )
            starts = self.ci_free_starts(index, gi, ci_profile)
            if not starts:
                raise SimError(
                    NVML_ERROR_INSUFFICIENT_RESOURCES,
                    f"GPU instance {gi_id} has no compute slices left",
                )
            start = starts[0]
            used_ids = {c["id"] for c in gi["compute_instances"]}
            ci = {
                "id": min(i for i in range(len(used_ids) + 1) if i not in used_ids),
                "profile_id": ci_profile,
                "start": start,
                "size": CI_PROFILE_SLICES[ci_profile],
            }
            gi["compute_instances"].append(ci)
            return ci

    def destroy_compute_instance(self, index: int, gi_id: int, ci_id: int) -> None:
        with self.change():
            ci = self.compute_instance(index, gi_id, ci_id)
            if self.processes(index, gi_id, ci_id):
                raise SimError(NVML_ERROR_IN_USE, f"compute instance {ci_id} has running processes")
            self.gpu_instance(index, gi_id)["compute_instances"].remove(ci)

    # ---- processes (the test and demo API) ------------------------------------------------
    def add_process(
        self,
        gpu: int,
        pid: int,
        used_memory_mib: int,
        name: str = "python",
        user: str = "root",
        gi_id: int | None = None,
        ci_id: int | None = None,
    ) -> dict:
        with self.change():
            g = self.gpu(gpu)
            if (gi_id is None) != (ci_id is None):
                raise SimError(NVML_ERROR_INVALID_ARGUMENT, "give both gi_id and ci_id, or neither")
            if g["mig_current"] == 1 and gi_id is None:
                raise SimError(
                    NVML_ERROR_INVALID_ARGUMENT,
                    f"MIG is enabled on GPU {gpu}: a process runs on a MIG device",
                )
            if g["mig_current"] != 1 and gi_id is not None:
                raise SimError(NVML_ERROR_INVALID_ARGUMENT, f"MIG is not enabled on GPU {gpu}")
            if used_memory_mib < 0:
                raise SimError(NVML_ERROR_INVALID_ARGUMENT, "used memory must not be negative")
            if pid <= 0:
                raise SimError(NVML_ERROR_INVALID_ARGUMENT, f"bad pid {pid}")
            if gi_id is not None and ci_id is not None:  # both or neither, checked above
                gi = self.gpu_instance(gpu, gi_id)
                self.compute_instance(gpu, gi_id, ci_id)
                total = self.gi_memory_mib(gpu, gi)
                used = self.memory_used_mib(gpu, gi_id)
            else:
                total = self.models[gpu].memory_total_mib
                used = self.memory_used_mib(gpu)
            if used + used_memory_mib > total:
                raise SimError(
                    NVML_ERROR_INSUFFICIENT_RESOURCES,
                    f"out of memory: {used} + {used_memory_mib} MiB > {total} MiB",
                )
            if any(p["pid"] == pid and p["gpu"] == gpu for p in self.state["processes"]):
                raise SimError(
                    NVML_ERROR_INVALID_ARGUMENT, f"process {pid} is already on GPU {gpu}"
                )
            proc = {
                "pid": pid,
                "name": name,
                "user": user,
                "gpu": gpu,
                "gi_id": gi_id,
                "ci_id": ci_id,
                "used_memory_mib": used_memory_mib,
            }
            self.state["processes"].append(proc)
            return proc

    def remove_process(self, pid: int, gpu: int | None = None) -> int:
        with self.change():
            before = len(self.state["processes"])
            self.state["processes"] = [
                p
                for p in self.state["processes"]
                if not (p["pid"] == pid and gpu in (None, p["gpu"]))
            ]
            return before - len(self.state["processes"])
