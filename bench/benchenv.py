"""The environment benchmark subprocesses run in."""

import os


def child_env(**extra: str) -> dict:
    """This environment without PYTHONDONTWRITEBYTECODE, plus `extra`: gpuctl then runs from
    compiled bytecode after the first (warm-up) run, as an installed package does — the
    reference tools (nvitop, gpustat) were compiled when pip installed them."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env
