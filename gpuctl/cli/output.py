"""Shared output helpers: machine-readable dumps, the stderr console, tables."""

from __future__ import annotations

import enum
import json
import math
import re
import sys
from typing import Any

from gpuctl.common.errors import UsageError, redact

# Width of tables written to a file or a pipe: every cell whole, as kubectl prints them.
UNBOUNDED_WIDTH = 100_000


class Format(str, enum.Enum):
    table = "table"
    yaml = "yaml"
    json = "json"


class DataFormat(str, enum.Enum):
    """For commands whose output is data only (manifests, configs): no table."""

    yaml = "yaml"
    json = "json"


# PyYAML folds a long string over lines at 80 columns; gpuctl's YAML keeps each one whole
# (a PromQL expression, a command line, an image, a URL), as a reader copies it.
_ONE_LINE = float("inf")


def dump(data: Any, fmt: str) -> str:
    """YAML or JSON text (several manifests: dump_documents)."""
    if fmt == "json":
        # JSON has no Infinity or NaN: a reading that overflowed or is undefined is null
        return (
            json.dumps(finite(data), indent=2, sort_keys=False, default=str, allow_nan=False) + "\n"
        )
    if fmt == "yaml":
        import yaml

        return yaml.dump(
            data, Dumper=_dumper(), sort_keys=False, default_flow_style=False, width=_ONE_LINE
        )
    raise UsageError(f"unknown output format {fmt!r} (use yaml or json)")


def dump_documents(docs: list[dict], fmt: str) -> str:
    """Several manifests: a YAML stream, or a JSON list (kubectl's `kind: List` shape)."""
    if fmt == "json":
        return dump({"apiVersion": "v1", "kind": "List", "items": docs}, "json")
    import yaml

    return yaml.dump_all(
        docs, Dumper=_dumper(), sort_keys=False, default_flow_style=False, width=_ONE_LINE
    )


def finite(data: Any) -> Any:
    """The data with every infinite or NaN float made None (JSON has neither)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def _dumper():
    """A safe YAML dumper that writes multi-line strings (embedded configs) as | blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data) -> bool:
            # a value used twice (the same valueFrom on several env entries) is written out
            # each time, not as an &anchor / *alias a reader of a manifest has to resolve
            return True

    def text(dumper, value: str):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def echo(text: str) -> None:
    sys.stdout.write(redact(text))  # a URL's credentials are never printed
    sys.stdout.flush()


def inform(point: str, details: tuple[str, ...] | list[str] = (), *, debug: bool = False) -> None:
    """A message on stderr that says its point first; its DETAILS (what it rests on, how to
    change it) follow, one indented line each, when DEBUG (the run's --debug), and otherwise
    one word says they are there. Prose: wrapped at spaces to the terminal, not in a pipe."""
    if details and not debug:
        point += " (--debug for the details)"
    lines = [redact(point), *(f"  {redact(d)}" for d in (details if debug else ()))]
    if not _terminal(sys.stderr) and all(map(_as_is, lines)):
        # what rich would write there, without the ~50 ms of importing and running it
        sys.stderr.write("".join(line.rstrip(" ") + "\n" for line in lines))
        sys.stderr.flush()
        return
    err = err_console()
    for line in lines:
        err.print(line, markup=False, highlight=False)


def _terminal(stream: Any) -> bool:
    return hasattr(stream, "isatty") and stream.isatty()


def _as_is(line: str) -> bool:
    """Whether rich, writing LINE to a file or a pipe (gpuctl.cli.output.console), would
    write it as it is less its trailing spaces: one line, no tab, nothing to escape, no
    `:name:` that rich may write as an emoji."""
    return line.isprintable() and len(line) < UNBOUNDED_WIDTH and not _EMOJI_CODE.search(line)


_EMOJI_CODE = re.compile(r":\S*:")  # rich writes a :name: it knows as that emoji


def new_table(title: Any = None, **options: Any) -> Any:
    """THE table style of every command: no borders, a bold header row, two spaces between
    columns and none at the edges, a title on the left. A cell never cuts a word a user
    copies (a URL, path, name, image): each column is at least as wide as its longest word,
    so a cell wraps only at spaces; where those widths do not fit the terminal, the line
    is left longer and the terminal wraps it, which copying undoes. `options` go to rich's
    Table (e.g. show_header=False)."""
    from rich.table import Table

    class WholeWords(Table):
        def add_row(self, *cells: Any, **kw: Any) -> None:
            for column, cell in zip(self.columns, cells):
                column.min_width = max(column.min_width or 0, _longest_word(cell))
            super().add_row(*cells, **kw)

        def __rich_console__(self, console: Any, opts: Any) -> Any:
            need = sum(max(c.min_width or 0, _longest_word(c.header)) + 2 for c in self.columns)
            if need - 2 > opts.max_width:
                opts = opts.update(max_width=need - 2)
            yield from super().__rich_console__(console, opts)

    style = {"box": None, "header_style": "bold", "pad_edge": False, "title_justify": "left"}
    return WholeWords(title=title, **(style | options))


def _longest_word(cell: Any) -> int:
    from rich.cells import cell_len
    from rich.text import Text

    if isinstance(cell, Text):
        text = cell.plain
    elif isinstance(cell, str):
        text = cell
        if "[" in cell:
            from rich.errors import MarkupError

            try:
                text = Text.from_markup(cell).plain
            except MarkupError:
                pass
    else:
        return 0
    return max((cell_len(word) for word in text.split()), default=0)


def err_console():
    return _console(stderr=True)


def out_console():
    return _console(stderr=False)


def _console(stderr: bool):
    """A terminal gets tables fitted to its width; a file or a pipe gets every cell whole."""
    terminal = _terminal(sys.stderr if stderr else sys.stdout)
    return console(uncropped=True, stderr=stderr, width=None if terminal else UNBOUNDED_WIDTH)


def console(uncropped: bool = False, **kwargs: Any):
    """A rich Console that shows text from outside systems (names and labels from the API
    server, Prometheus, NVML) and never obeys it: every character a terminal would act on is
    shown escaped (gpuctl.common.text.printable). Text, strings and table cells are made
    printable before rich lays them out (so their width is the width shown); whatever else
    reaches the terminal is escaped once laid out. Every table and view prints through one.
    UNCROPPED (the consoles of commands' output and messages, gpuctl.cli.output.err_console
    and out_console): prose wraps at spaces to the terminal's width (not at all in a pipe,
    where the width is unbounded); a line it cannot wrap at a space (a table of whole words
    wider than the terminal) is printed whole, for the terminal to wrap, instead of cropped;
    and no line ends in the spaces of rich's layout."""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def render(self, renderable, options=None):
            segments = self._shown_segments(renderable, options)
            yield from _without_trailing_spaces(segments) if uncropped else segments

        def _shown_segments(self, renderable, options):
            for segment in super().render(_shown(renderable), options):
                if segment.control or not segment.text or segment.text.isprintable():
                    yield segment
                else:  # the line breaks are rich's layout; everything else is shown
                    yield Segment(_lines_shown(segment.text), segment.style, segment.control)

        def print(self, *objects: Any, crop: bool = not uncropped, **kw: Any) -> None:
            super().print(*objects, crop=crop, **kw)

    return SafeConsole(**kwargs)


def _without_trailing_spaces(segments: Any) -> Any:
    """SEGMENTS with the spaces at the end of each line left out (the space a line was wrapped
    at, a table cell's padding): a copied line, or one written to a file, ends in its text."""
    from rich.segment import Segment

    pending: list[Any] = []  # the line's last segment with text, and blank ones after it
    for segment in segments:
        if segment.control:
            yield from pending
            pending = []
            yield segment
            continue
        for i, part in enumerate(segment.text.split("\n")):
            if i:  # a line ends here
                while pending and not pending[-1].text.strip(" "):
                    pending.pop()
                if pending:
                    last = pending.pop()
                    yield from pending
                    yield Segment(last.text.rstrip(" "), last.style)
                pending = []
                yield Segment("\n")
            if part.strip(" "):
                yield from pending
                pending = [Segment(part, segment.style)]
            elif part:
                pending.append(Segment(part, segment.style))
    yield from pending


def _lines_shown(text: str) -> str:
    from gpuctl.common.text import printable

    return "\n".join(printable(line) for line in text.split("\n"))


def _shown(renderable: Any) -> Any:
    """RENDERABLE with the text in it printable: a str, a Text, the cells of a Table, the
    parts of a Group."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if isinstance(renderable, str):
        renderable = redact(renderable)
        return renderable if renderable.isprintable() else _lines_shown(renderable)
    if isinstance(renderable, Text):
        plain = renderable.plain
        if plain.replace("\n", "").isprintable() and redact(plain) == plain:
            return renderable
        shown = _lines_shown(redact(plain))
        return Text(shown, style=renderable.style, justify=renderable.justify)
    if isinstance(renderable, Table):
        for column in renderable.columns:
            column._cells[:] = [_shown(cell) for cell in column._cells]
    elif isinstance(renderable, Group):
        renderable.renderables[:] = [_shown(r) for r in renderable.renderables]
    return renderable
