"""The README a newcomer reads, and the links between the pages: every relative link in
README.md, CONTRIBUTING.md and docs/*.md names a file that exists and, after '#', a heading
of that file as GitHub anchors it; the README keeps its size and its two commands."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from tests import ROOT

PAGES = [
    Path(ROOT, "README.md"),
    Path(ROOT, "CONTRIBUTING.md"),
    *sorted(Path(ROOT, "docs").glob("*.md")),
]
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
README_WORDS = 1500  # issue 35: read in two minutes
CELL_CHARS = 120


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (a '#' comment there is no heading)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces → '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()  # a link: its text
    kept = (c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return "".join(kept).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    for heading in HEADING.findall(_prose(page)):
        slug, n = _slug(heading), 0
        while (slug if n == 0 else f"{slug}-{n}") in anchors:  # repeats get -1, -2, …
            n += 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _relative_links(page: Path) -> list[tuple[str, str]]:
    """(path, anchor) of each link that is not a URL; path "" is the page itself."""
    links = []
    for target in LINK.findall(_prose(page)):
        if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            path, _, anchor = target.partition("#")
            links.append((path, anchor))
    return links


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading(page):
    broken = []
    for path, anchor in _relative_links(page):
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{path}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{path}#{anchor}: no such heading in {target.name}")
    assert broken == [], f"{page.relative_to(ROOT)}: {broken}"


def test_the_anchor_rule_is_githubs():
    """Headings as these pages write them, and the anchors GitHub gives them."""
    assert _slug("Deployment settings: who holds a GPU") == "deployment-settings-who-holds-a-gpu"
    assert _slug("`--drain`: evicting GPU pods by policy") == "--drain-evicting-gpu-pods-by-policy"
    assert _slug("`gpuctl mig` — MIG layouts") == "gpuctl-mig--mig-layouts"
    assert _slug("Limits") == "limits"


def test_the_readme_is_read_in_two_minutes():
    readme = Path(ROOT, "README.md").read_text(encoding="utf-8")
    assert len(readme.split()) <= README_WORDS  # as wc -w counts
    cells = [c.strip() for row in re.findall(r"^\|(.+)\|$", readme, re.M) for c in row.split("|")]
    assert [c for c in cells if len(c) > CELL_CHARS] == []


def test_the_readme_keeps_its_two_commands_and_ci_runs_the_test_one():
    """The README's contract: `make demo` runs the main job on the sandbox, `make test` the
    suite; both are Makefile targets, and CI runs `make test`."""
    readme = Path(ROOT, "README.md").read_text(encoding="utf-8")
    makefile = Path(ROOT, "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test"):
        assert re.search(rf"^make {target}\b", readme, re.M), target
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert "examples/demo-cluster.sh" in makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "source .venv/bin/activate" in readme
    assert re.search(r"^make test$", Path(ROOT, ".ci", "run").read_text(), re.M)
