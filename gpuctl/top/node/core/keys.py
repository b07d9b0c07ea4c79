"""The live node view's keys (gpuctl.common.keys): `i` `u` `m` `t` `p` sort by index, util,
memory, temp, power; `/` filters GPUs by index or name, processes by GPU, user or name."""

from __future__ import annotations

from gpuctl.common.keys import Keymap
from gpuctl.top.node.core.frame import SORT_KEYS

KEYS = Keymap(
    SORT_KEYS,
    {key[0]: key for key in SORT_KEYS},
    "(GPUs by index or name, processes by GPU, user or name)",
)
