"""The "Testing your code" page documents the whole public API of ``cdk_session_expiry.testing``
(its reference is rendered from the docstrings: a public name without one would be missing from
it), every fixture of the plugin, and shows the consumer project exactly as it is tested
(``bench/consumer_project``, run from the wheel by tests/sandbox/test_consumer_project.py)."""

from __future__ import annotations

import inspect
from typing import Any

import cdk_session_expiry.testing as testing
from cdk_session_expiry.testing import pytest_plugin

from .doc_examples import DOCS, REPO, examples

PAGE = DOCS / "testing.md"
PROJECT = REPO / "bench" / "consumer_project"


def undocumented(namespace: Any, names: list[str]) -> list[str]:
    """Public names (and their public methods and properties) of ``namespace`` without a
    docstring of their own."""
    missing = []
    for name in names:
        obj = getattr(namespace, name)
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if not inspect.isclass(obj):
            continue
        for member, value in vars(obj).items():
            if member.startswith("_"):
                continue
            function = value.fget if isinstance(value, property) else value
            function = getattr(function, "__func__", function)
            if callable(function) and not (function.__doc__ or "").strip():
                missing.append(f"{name}.{member}")
    return missing


def test_every_public_name_of_the_testing_package_has_a_docstring() -> None:
    assert undocumented(testing, sorted(testing.__all__)) == []
    assert "::: cdk_session_expiry.testing\n" in PAGE.read_text()


def test_fails_a_public_method_without_a_docstring() -> None:
    class Documented:
        """A class."""

        def fine(self) -> None:
            """Documented."""

        def forgotten(self) -> None:
            pass

        def _private(self) -> None:
            pass

    space = type("Space", (), {"Documented": Documented})
    assert undocumented(space, ["Documented"]) == ["Documented.forgotten"]


def test_every_fixture_is_in_the_fixtures_table() -> None:
    fixtures = [
        name
        for name, value in vars(pytest_plugin).items()
        if name.startswith("session_expiry_") and callable(value)
    ]
    assert len(fixtures) == 6
    table = PAGE.read_text().split("## Fixtures", 1)[1].split("\n## ", 1)[0]
    assert [f for f in fixtures if f"| `{f}` |" not in table] == []


def test_the_page_shows_the_consumer_project_as_it_is_tested() -> None:
    shown = {block.target: block.code for block in examples(PAGE) if block.kind == "file"}
    files = {
        str(path.relative_to(PROJECT)): path.read_text()
        for path in PROJECT.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert sorted(shown) == sorted(files)
    for path, text in files.items():
        assert shown[path].rstrip() == text.rstrip(), f"docs/testing.md shows another {path}"
