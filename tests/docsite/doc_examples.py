"""The fenced examples of README.md and docs/*.md, and the marker that says how each is checked.

Every fenced ``python`` block carries, in an HTML comment on the nearest non-blank line before
its opening fence, one of::

    <!-- example: run -->                    executed as it is
    <!-- example: run, given: NAME ... -->   executed with each NAME bound to a real object
                                             (GIVEN in test_examples.py; NAME=OTHER binds NAME
                                             to the given OTHER)
    <!-- example: file PATH -->              written to PATH of the page's project (any language)
    <!-- example: fragment REASON -->        not run here; REASON says what runs it instead

The markers are HTML comments, so neither PyPI, GitHub nor the site shows them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`\n]*)$")
_MARKER = re.compile(r"^\s*<!--\s*example:\s*(?P<body>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Example:
    """One fenced block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str  # dedented to the fence's indentation
    marker: str | None  # the marker comment's body ("run", "file infra/app.py", ...), if any

    @property
    def where(self) -> str:
        path = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path.name
        return f"{path}:{self.line}"

    @property
    def kind(self) -> str:
        return (self.marker or "").split(",")[0].split()[0] if self.marker else ""

    @property
    def given(self) -> dict[str, str]:
        """The names a ``run, given: ...`` marker binds, each to the given that provides it:
        ``given: store`` binds ``store`` to the given ``store``; ``given: store=sorted_store``
        binds ``store`` to the given ``sorted_store``."""
        if self.marker is None or "given:" not in self.marker:
            return {}
        pairs = (word.partition("=") for word in self.marker.split("given:", 1)[1].split())
        return {name: provider or name for name, _, provider in pairs}

    @property
    def target(self) -> str:
        """The path of a ``file PATH`` marker."""
        assert self.kind == "file", self.where
        return self.marker.split(None, 1)[1].strip() if self.marker else ""


def markdown_files() -> list[Path]:
    """README.md and every page of the site."""
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def examples(path: Path) -> list[Example]:
    """Every fenced block of ``path``, in order, with its marker."""
    lines = path.read_text().split("\n")
    found: list[Example] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence) and lines[end].strip().strip("`") == ""
        ):
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        ]
        before = i - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = _MARKER.match(lines[before]) if before >= 0 else None
        found.append(
            Example(
                path=path,
                line=i + 1,
                language=opening["info"].strip().split(" ")[0],
                code="\n".join(body) + "\n",
                marker=marker["body"] if marker else None,
            )
        )
        i = end + 1
    return found


def all_examples() -> list[Example]:
    return [example for path in markdown_files() for example in examples(path)]


def page_section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a whole heading line, e.g. ``"## Replay"``) up to the next
    heading of the same or a higher level."""
    text = path.read_text()
    assert f"\n{heading}\n" in f"\n{text}", f"{path.name} lost its section {heading!r}"
    section = f"\n{text}".split(f"\n{heading}\n", 1)[1]
    level = heading.split(" ", 1)[0]
    stops = [f"\n{'#' * n} " for n in range(1, len(level) + 1)]
    cut = min((section.find(stop) for stop in stops if stop in section), default=len(section))
    return section[:cut]
