"""The keys of gpuctl's live views (`gpuctl top` on a node and on a cluster), as nvitop and
k9s users expect them. Pure: a key and the view's state in, the next state out.

  q        quit                     ?  h     help (any key closes it)
  s        next sort key            a letter per sort key (each view's Keymap)
  /        filter: type, Enter keeps it, Esc clears it
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

ENTER, ESCAPE, BACKSPACE = ("\r", "\n"), "\x1b", ("\x7f", "\b")
QUIT, HELP = ("q", "Q"), ("?", "h")


@dataclass(frozen=True)
class View:
    sort: str = "index"
    filter: str = ""
    typing: bool = False  # entering a filter after /
    help: bool = False


@dataclass(frozen=True)
class Keymap:
    """One view's keys: its sort keys in the order `s` walks them, the letter of each,
    and what its filter matches (for the help)."""

    sorts: tuple[str, ...]
    letters: Mapping[str, str]  # key -> sort key
    filters: str

    def help(self) -> str:
        """The keys, one ` · `-separated line."""
        letters = " ".join(self.letters)
        names = ", ".join(self.letters.values())
        return (
            f"keys: q quit · ? h this help · s next sort key · {letters} sort by {names} · "
            f"/ filter {self.filters} (Enter keeps it, Esc clears it)"
        )

    def press(self, view: View, key: str) -> View | None:
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
            return None if key in QUIT else replace(view, help=False)
        if key in QUIT:
            return None
        if key in HELP:
            return replace(view, help=True)
        if key == "/":
            return replace(view, typing=True, filter="")
        if key == ESCAPE:
            return replace(view, filter="")
        if key == "s":
            following = (self.sorts.index(view.sort) + 1) % len(self.sorts)
            return replace(view, sort=self.sorts[following])
        if key in self.letters:
            return replace(view, sort=self.letters[key])
        return view


def matches(text: str, wanted: str) -> bool:
    return wanted.casefold() in text.casefold()
