"""The documentation site builds with ``mkdocs build --strict`` (a broken link or anchor, a page
missing from the nav, a snippet not found or a docstring griffe cannot parse fails it), and the
props reference it renders from ``SessionExpiry``'s docstring has an entry for every prop."""

from __future__ import annotations

import dataclasses
import html
import inspect
import logging
import os
import subprocess
import sys
from pathlib import Path

import griffe
import pytest

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry.props import SessionExpiryProps

from .doc_examples import REPO, page_section

#: Positional parameters of every construct, documented like the props.
_POSITIONAL = ("scope", "id")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def documented_parameters(docstring: str) -> tuple[list[str], list[str]]:
    """The parameter names of a Google-style docstring's ``Args:`` section, parsed as
    mkdocstrings parses it (griffe), and griffe's warnings about entries it could not read.

    Parsed without the function it belongs to, griffe also notes every parameter's missing
    annotation; mkdocstrings reads those from the signature, so those notes are left out.
    """
    collect = _Collect()
    griffe_logger = logging.getLogger("griffe")
    griffe_logger.addHandler(collect)
    try:
        parsed = griffe.Docstring(docstring, lineno=1).parse("google")
    finally:
        griffe_logger.removeHandler(collect)
    names = [
        parameter.name
        for section in parsed
        if section.kind is griffe.DocstringSectionKind.parameters
        for parameter in section.value
    ]
    return names, [m for m in collect.messages if "No type or annotation" not in m]


def undocumented_props(cls: type, fields: list[str] | None = None) -> dict[str, list[str]]:
    """What the docstring of ``cls`` lacks or has too much of: keyword-only parameters of
    ``cls.__init__`` (and ``fields``) without an ``Args:`` entry, entries naming no parameter,
    entries griffe could not read."""
    signature = inspect.signature(cls.__init__)  # type: ignore[misc]
    props = [n for n, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY]
    names, warnings = documented_parameters(inspect.getdoc(cls) or "")
    return {
        "missing": [p for p in [*props, *(fields or [])] if p not in names],
        "unknown": [n for n in names if n not in props and n not in _POSITIONAL],
        "unreadable": warnings,
    }


def test_every_prop_of_session_expiry_has_its_own_docstring_entry() -> None:
    fields = [f.name for f in dataclasses.fields(SessionExpiryProps)]
    assert undocumented_props(SessionExpiry, fields) == {
        "missing": [],
        "unknown": [],
        "unreadable": [],
    }
    names, _ = documented_parameters(inspect.getdoc(SessionExpiry) or "")
    assert len(names) >= 60 and names[:2] == ["scope", "id"]


class _Example:
    """A construct-like class with three props.

    Args:
        scope: parent.
        id: id.
        documented: has its entry. Default: none.
        gone: names no parameter. Default: none.
        first, second,
            third: three props in one entry, which griffe cannot read.
        fourth, fifth: two props in one entry, read as one name.
    """

    def __init__(
        self,
        scope: object,
        id: str,
        *,
        documented: int = 0,
        forgotten: int = 0,
        first: int = 0,
        second: int = 0,
        third: int = 0,
        fourth: int = 0,
        fifth: int = 0,
    ) -> None:
        del scope, id, documented, forgotten, first, second, third, fourth, fifth


def test_fails_when_a_prop_has_no_docstring_entry() -> None:
    found = undocumented_props(_Example, ["field_only"])
    assert found["missing"] == [
        "forgotten",
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "field_only",
    ]
    assert found["unknown"] == ["gone", "fourth, fifth"]
    (unreadable,) = found["unreadable"]
    assert "Failed to get 'name: description' pair from 'first, second,'" in unreadable


@pytest.mark.slow
def test_mkdocs_build_strict_passes(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-6000:]
    construct = html.unescape((tmp_path / "site" / "construct" / "index.html").read_text())
    # The props reference is rendered from the docstring: a prop's description is on the page.
    assert "max_record_age" in construct and "24 hours (the stream's retention)" in construct
    # README sections are included, not copied: the resources table reaches the page.
    assert "Sessions/CleanupEventSourceMapping" in construct
    for page in ("getting-started", "operating", "benchmarks", "changelog", "faq", "security"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


def test_the_install_section_says_python_m_build_needs_the_build_package() -> None:
    lines = page_section(REPO / "README.md", "## Install").splitlines()
    # The command `python -m build` comes after the `pip install build` it needs.
    build = next(i for i, line in enumerate(lines) if line.startswith("python -m build"))
    assert any(line.startswith("pip install build") for line in lines[:build]), lines


def test_session_store_create_says_where_a_custom_steps_attributes_go() -> None:
    from session_expiry_runtime.store import SessionStore

    names = {
        p.name: p.description
        for section in griffe.Docstring(inspect.getdoc(SessionStore.create) or "").parse("google")
        if section.kind is griffe.DocstringSectionKind.parameters
        for p in section.value
    }
    assert "custom" in names["attributes"] and 'attributes={"secretName": name}' in names[
        "attributes"
    ].replace("``", "")
    assert "attach_resource" in names["attributes"]
    page = (REPO / "docs" / "custom-steps.md").read_text()
    assert "## Recording what the step acts on" in page and "attach_resource(" in page
    assert "attributes={" in page
