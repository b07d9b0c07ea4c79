"""Print docs/commands.md: every gpuctl command's help page as the command itself prints it
on a terminal 80 columns wide, under a heading of its own, with a list of them on top.

    make docs    # PYTHONPATH=. python docs/commands.py > docs/commands.md

tests/test_commands_doc.py fails when docs/commands.md is not what this prints.
"""

from __future__ import annotations

import sys

from gpuctl import app

WIDTH = 78  # click's help on a terminal of 80 columns or more

HEAD = """# Command reference

Every command's `--help` page, generated from the CLI itself by `make docs`
([commands.py](commands.py)); do not edit it by hand. The other pages in docs/ say what
the commands do, with examples; [conventions.md](conventions.md) what holds for all of them.
"""


def pages() -> list[tuple[list[str], str]]:
    """(the command's words after `gpuctl`, its help page) of the root and of every command
    under it that is not hidden, in the order the help pages list them."""
    root = app.command()
    found: list[tuple[list[str], str]] = []

    def walk(cmd, ctx, words: list[str]) -> None:
        found.append((words, cmd.get_help(ctx)))
        for name in cmd.list_commands(ctx) if hasattr(cmd, "list_commands") else []:
            sub = cmd.get_command(ctx, name)
            if not sub.hidden:
                walk(
                    sub,
                    sub.make_context(name, [], parent=ctx, resilient_parsing=True),
                    [*words, name],
                )

    walk(root, root.make_context("gpuctl", [], resilient_parsing=True, terminal_width=WIDTH), [])
    return found


def _anchor(words: list[str]) -> str:
    return "-".join(["gpuctl", *words])


def markdown() -> str:
    found = pages()
    index = [
        f"{'  ' * (len(words) - 1)}- [gpuctl {' '.join(words)}](#{_anchor(words)})"
        for words, _ in found
        if words
    ]
    sections = [
        f"{'#' * (2 + (len(words) > 1))} {' '.join(['gpuctl', *words])}\n\n```text\n{page}\n```"
        for words, page in found
    ]
    return "\n\n".join([HEAD.strip(), "\n".join(index), *sections]) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
