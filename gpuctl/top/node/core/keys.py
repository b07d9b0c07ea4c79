"""The live node view's keys, as nvitop and k9s users expect them. Pure: a key and the view
state in, the next state out.

  q        quit                     ?  h     help (any key closes it)
  s        next sort key            i u m t p  sort by index, util, memory, temp, power
  /        filter: type, Enter keeps it, Esc clears it (GPUs by index or name, processes
           by GPU, user or name)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuctl.top.node.core.frame import SORT_KEYS

ENTER, ESCAPE, BACKSPACE = ("\r", "\n"), "\x1b", ("\x7f", "\b")
BY_LETTER = {key[0]: key for key in SORT_KEYS}  # i u m t p

HELP = (
    "keys: q quit · ? h this help · s next sort key · i u m t p sort by index, util, memory, "
    "temp, power · / filter (Enter keeps it, Esc clears it)"
)


@dataclass(frozen=True)
class View:
    sort: str = "index"
    filter: str = ""
    typing: bool = False  # entering a filter after /
    help: bool = False


def press(view: View, key: str) -> View | None:
    """The state after KEY; None: quit."""
    if view.typing:
        if key in ENTER:
            return replace(view, typing=False)
        if key == ESCAPE:
            return replace(view, typing=False, filter="")
        if key in BACKSPACE:
            return replace(view, filter=view.filter[:-1])
        return replace(view, filter=view.filter + key) if key.isprintable() else view
    if view.help:
        return None if key in ("q", "Q") else replace(view, help=False)
    if key in ("q", "Q"):
        return None
    if key in ("?", "h"):
        return replace(view, help=True)
    if key == "/":
        return replace(view, typing=True, filter="")
    if key == ESCAPE:
        return replace(view, filter="")
    if key == "s":
        return replace(view, sort=SORT_KEYS[(SORT_KEYS.index(view.sort) + 1) % len(SORT_KEYS)])
    if key in BY_LETTER:
        return replace(view, sort=BY_LETTER[key])
    return view


def matches(text: str, wanted: str) -> bool:
    return wanted.casefold() in text.casefold()
