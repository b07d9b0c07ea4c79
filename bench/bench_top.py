"""CPU time per refreshed frame: `gpuctl top` against nvitop and gpustat, on the same
simulated node (8 and 64 H100s, one in eight split by MIG, each MIG device running a
process), in one run. Target: gpuctl <= nvitop per frame and per one-shot command (median
CPU time of runs that take turns).

    PYTHONPATH=. python bench/bench_top.py [--frames 20]

Frames are taken `--interval` seconds apart (default 2 s, the default refresh of gpuctl top
and nvitop), so caches with a lifetime behave as in a live view; sleeping is not CPU time.
Each tool runs in its own interpreter with gpuctl's pynvml shim first on PYTHONPATH, so all
three read the same simulated driver. A frame is what each tool's own refresh loop does:
- gpuctl: Nvml.sample() + build and render the rich tables (ANSI colours on);
- nvitop: fresh device and process snapshots (its TTL caches cleared) + its `--once` print;
- gpustat: GPUStatCollection.new_query() + print_formatted (what `gpustat --watch` repeats).
Also the whole one-shot commands (`gpuctl top --once`, `nvitop --once`, `gpustat`),
interpreter start included, as children's CPU time.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from benchenv import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
TOOLS = ("gpuctl", "nvitop", "gpustat")


# ---- workers: one per tool, in a fresh interpreter ---------------------------------------------


def _frame_gpuctl():
    from rich.console import Console

    import gpuctl.sim
    from gpuctl.adapters.nvml import Nvml
    from gpuctl.top.node.views import render

    nvml = Nvml(gpuctl.sim.driver()).__enter__()  # the node of GPUCTL_SIMULATE
    console = Console(file=io.StringIO(), width=120, force_terminal=True, color_system="truecolor")

    def frame():
        console.print(render(nvml.sample(), width=120))
        console.file = io.StringIO()

    return frame


def _frame_nvitop():
    from nvitop.tui import TUI, Device  # the TUI's own Device, as nvitop's CLI uses
    from nvitop.tui.screens.main.panels.device import DevicePanel
    from nvitop.tui.screens.main.panels.process import ProcessPanel

    tui = TUI(Device.from_indices(list(range(Device.count()))), [], no_unicode=False)
    screen = tui.main_screen

    def frame():
        DevicePanel.take_snapshots.cache_clear()
        ProcessPanel.take_snapshots.cache_clear()
        screen.device_panel.snapshots = screen.device_panel.take_snapshots()
        screen.process_panel.snapshots = screen.process_panel.take_snapshots()
        with contextlib.redirect_stdout(io.StringIO()):
            tui.print()

    return frame


def _frame_gpustat():
    from gpustat import GPUStatCollection

    def frame():
        GPUStatCollection.new_query().print_formatted(fp=io.StringIO(), force_color=True)

    return frame


def worker(tool: str, frames: int, interval: float) -> None:
    frame = {"gpuctl": _frame_gpuctl, "nvitop": _frame_nvitop, "gpustat": _frame_gpustat}[tool]()
    frame()  # warm-up: imports, first handles
    spent = 0.0
    for _ in range(frames):
        # Frames come `interval` apart as in a live view, so caches that expire (nvitop keeps
        # temperature, fan, MIG mode ... for 5 s) behave as they do there. Sleep is not CPU time.
        time.sleep(interval)
        start = time.process_time()
        frame()
        spent += time.process_time() - start
    print(json.dumps({"cpu_per_frame_ms": 1000 * spent / frames}))


# ---- driver -------------------------------------------------------------------------------------


def _mig_gpus(gpus: int) -> list[int]:
    """The last GPU of every eight runs MIG."""
    return list(range(7, gpus, 8))


def _setup_node(spec: str, gpus: int, state: str, pids: list[int]) -> None:
    """The even GPUs busy, each with one of the real (sleeping) processes; the MIG GPUs split
    into two 3g.40gb devices, each with a process of its own. All written to the node's state
    file `state`, the one the measured tools are pointed at."""
    sys.path.insert(0, ROOT)
    import gpuctl.sim
    from gpuctl.gpus.geometry import CI_PROFILE_BY_SLICES, find_model

    node = gpuctl.sim.open_node(spec, state)
    half = find_model("H100-80GB").profile("3g.40gb")
    pid = itertools.cycle(pids)
    for i in range(gpus):
        if i in _mig_gpus(gpus):
            node.set_mig_mode(i, 1)
            node.reset(i)
            for start in (0, 4):
                gi = node.create_gpu_instance(i, half.profile_id, start)
                ci = node.create_compute_instance(i, gi["id"], CI_PROFILE_BY_SLICES[half.slices])
                node.add_process(i, next(pid), 8192, name="python3", gi_id=gi["id"], ci_id=ci["id"])
        elif i % 2 == 0:
            node.add_process(i, next(pid), 4096 + 512 * i, name="python3")


def _check_node(env: dict, gpus: int) -> None:
    """The node the tools see through `env` is the one set up: it must not silently be
    another (say, the default state file's, without MIG)."""
    out = subprocess.run(
        [sys.executable, "-m", "gpuctl", "top", "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    seen = json.loads(out.stdout)["gpus"]
    mig = [g["index"] for g in seen if g["mig_mode"] == 1]
    on_mig = [
        g["index"]
        for g in seen
        if len(g["mig_devices"]) == 2 and sum(p["gi_id"] is not None for p in g["processes"]) == 2
    ]
    busy = [g["index"] for g in seen if g["mig_mode"] != 1 and g["processes"]]
    expected_busy = [i for i in range(0, gpus, 2) if i not in _mig_gpus(gpus)]
    if (len(seen), mig, on_mig, busy) != (gpus, _mig_gpus(gpus), _mig_gpus(gpus), expected_busy):
        raise SystemExit(
            f"measured node is not the one set up: {len(seen)} GPUs, MIG on {mig}, "
            f"two MIG devices with processes on {on_mig}, busy without MIG {busy}"
        )


def _env(spec: str, state: str) -> dict:
    shim = os.path.join(ROOT, "gpuctl", "sim", "shim")
    return child_env(
        PYTHONPATH=os.pathsep.join([shim, ROOT]),
        GPUCTL_SIMULATE=spec,
        GPUCTL_SIM_STATE=state,
        COLUMNS="120",
    )


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _one_shot_ms(cmds: dict[str, list[str]], env: dict, runs: int) -> dict[str, float]:
    """Median CPU ms of each command; they take turns, run after run, so a busy machine's
    slow spells fall on all of them alike."""
    spent: dict[str, list[float]] = {tool: [] for tool in cmds}
    for _ in range(runs):
        for tool, cmd in cmds.items():
            before = _children_cpu()
            subprocess.run(
                cmd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=True,
                timeout=120,
            )
            spent[tool].append(1000 * (_children_cpu() - before))
    return {tool: statistics.median(ms) for tool, ms in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--frames", type=int, default=10, help="refreshed frames at 8 GPUs (a quarter at 64)"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=2.0,
        help="seconds between frames: the default refresh of gpuctl top and nvitop",
    )
    parser.add_argument("--runs", type=int, default=9, help="one-shot command runs per tool")
    parser.add_argument("--worker", choices=TOOLS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.frames, args.interval)
        return

    sleepers = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(8)
    ]
    results = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for gpus in (8, 64):
                spec = f"{gpus}xH100-80GB"
                state = os.path.join(tmp, f"{gpus}.json")
                _setup_node(spec, gpus, state, [p.pid for p in sleepers])
                env = _env(spec, state)
                _check_node(env, gpus)
                frames = args.frames if gpus == 8 else max(3, args.frames // 4)
                for tool in TOOLS:
                    out = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--worker",
                            tool,
                            "--frames",
                            str(frames),
                            "--interval",
                            str(args.interval),
                        ],
                        env=env,
                        capture_output=True,
                        text=True,
                        check=True,
                        timeout=600,
                    )
                    results[(gpus, tool, "frame")] = json.loads(out.stdout.splitlines()[-1])[
                        "cpu_per_frame_ms"
                    ]
                one_shot = {
                    "gpuctl": [sys.executable, "-m", "gpuctl", "top", "--once"],
                    "nvitop": [os.path.join(BIN, "nvitop"), "--once"],
                    "gpustat": [os.path.join(BIN, "gpustat")],
                }
                for tool, ms in _one_shot_ms(one_shot, env, args.runs).items():
                    results[(gpus, tool, "once")] = ms
    finally:
        for p in sleepers:
            p.kill()
            p.wait()

    print(
        f"CPU time per frame, simulated H100 node (frames {args.interval:g} s apart: {args.frames} at "
        f"8 GPUs, {max(3, args.frames // 4)} at 64; one-shot runs: {args.runs})"
    )
    print(
        f"{'':22}{'gpuctl':>10}{'nvitop':>10}{'gpustat':>10}{'gpuctl/nvitop':>15}{'gpuctl/gpustat':>16}"
    )
    ok = True
    for gpus in (8, 64):
        for kind, label in (("frame", "refreshed frame"), ("once", "one-shot command")):
            g, n, s = (results[(gpus, t, kind)] for t in TOOLS)
            print(
                f"{gpus:>2} GPUs {label:<14}{g:>8.1f}ms{n:>8.1f}ms{s:>8.1f}ms{g / n:>15.2f}{g / s:>16.2f}"
            )
            ok &= g <= n
    print(
        "target gpuctl <= nvitop per refreshed frame and per one-shot command:",
        "met" if ok else "NOT met",
    )


if __name__ == "__main__":
    main()
