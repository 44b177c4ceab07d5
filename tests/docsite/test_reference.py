"""The reference is complete: every public name of a documented module is on the built site,
and no docstring of the two packages holds a Sphinx role (``:meth:`x```), which mkdocstrings
renders literally. Cross-references are Markdown (``[`create`][session_expiry_runtime.store.
SessionStore.create]``), checked by ``mkdocs build --strict``."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import griffe
import pytest

from .doc_examples import REPO

#: The modules the site's reference renders, by their public names: ``__all__`` where the module
#: has one, else every public class and function defined in it (pytest's hooks, ``pytest_*``,
#: are called by pytest, not by the reader).
DOCUMENTED = (
    "cdk_session_expiry",
    "cdk_session_expiry.testing",
    "cdk_session_expiry.testing.pytest_plugin",
    "cdk_session_expiry.testing.app_function",
    "cdk_session_expiry.testing.agentcore",
    "cdk_session_expiry.testing.athena",
    "session_expiry_runtime.store",
)
#: Whose docstrings must be Markdown throughout (documented or not: a docstring moves).
PACKAGES = ("cdk_session_expiry", "session_expiry_runtime")

SPHINX_ROLE = re.compile(r":(?:py:)?(?:meth|class|func|data|mod|attr|exc|obj|const):`")
_ID = re.compile(r'\bid="([A-Za-z_][\w.]*)"')


def _load(name: str) -> griffe.Module:
    loaded = griffe.load(name, search_paths=[REPO, REPO / "lambda_src"])
    assert isinstance(loaded, griffe.Module)
    return loaded


def public_names(module: griffe.Module) -> list[str]:
    """``__all__`` of ``module``, else its public classes and functions defined in it."""
    if module.exports is not None:
        return [str(name) for name in module.exports]
    return [
        name
        for name, member in module.members.items()
        if not name.startswith(("_", "pytest_"))
        and not member.is_alias
        and (member.is_class or member.is_function)
    ]


def site_ids(site: Path) -> set[str]:
    """Every ``id`` of every page of a built site."""
    return {found for page in site.rglob("*.html") for found in _ID.findall(page.read_text())}


def missing_from_site(site: Path, modules: dict[str, list[str]]) -> list[str]:
    ids = site_ids(site)
    return [
        f"{module}.{name}"
        for module, names in modules.items()
        for name in names
        if f"{module}.{name}" not in ids
    ]


def _docstrings(obj: griffe.Object) -> Iterator[tuple[str, str]]:
    if obj.docstring is not None:
        yield obj.path, obj.docstring.value
    for member in obj.members.values():
        if not member.is_alias:
            yield from _docstrings(member)  # type: ignore[arg-type]


def sphinx_roles(obj: griffe.Object) -> list[str]:
    """``path: the line`` of each docstring line under ``obj`` holding a Sphinx role."""
    return [
        f"{path}: {line.strip()}"
        for path, text in _docstrings(obj)
        for line in text.splitlines()
        if SPHINX_ROLE.search(line)
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-6000:]
    return out


@pytest.mark.slow
def test_every_public_name_of_a_documented_module_is_on_the_site(site: Path) -> None:
    modules = {name: public_names(_load(name)) for name in DOCUMENTED}
    assert "ResourceOwnedError" in modules["session_expiry_runtime.store"]
    assert "AgentCoreSessions" in modules["cdk_session_expiry.testing.agentcore"]
    assert missing_from_site(site, modules) == []


@pytest.mark.slow
def test_session_store_shows_its_inherited_methods_and_defaults_as_values(site: Path) -> None:
    ids = site_ids(site)
    for method in ("create", "get", "touch", "end", "create_grant", "attach_connection"):
        assert f"session_expiry_runtime.store.SessionStore.{method}" in ids, method
    page = html.unescape((site / "construct" / "index.html").read_text())
    construct = re.sub(r"<[^>]+>", "", page)  # the signature's text, without its highlighting
    assert "contract.DEFAULT_" not in construct
    # connection_id_attribute's default, contract.DEFAULT_CONNECTION_ID_ATTRIBUTE, as its value.
    assert re.search(r"connection_id_attribute: str = [\"']connectionId[\"']", construct)


def test_no_docstring_holds_a_sphinx_role() -> None:
    found = [line for package in PACKAGES for line in sphinx_roles(_load(package))]
    assert found == []


def test_fails_when_a_docstring_holds_a_sphinx_role() -> None:
    module = griffe.visit(
        "example",
        Path("example.py"),
        'def f():\n    """See :meth:`g` and [`h`][example.h]."""\n\n\n'
        'Y = 1\n"""Like :data:`X`."""\n',
    )
    assert sphinx_roles(module) == [
        "example.f: See :meth:`g` and [`h`][example.h].",
        "example.Y: Like :data:`X`.",
    ]


def test_fails_when_a_public_name_is_not_on_the_site(tmp_path: Path) -> None:
    (tmp_path / "page").mkdir()
    (tmp_path / "page" / "index.html").write_text('<h2 id="pkg.Shown">Shown</h2>')
    assert missing_from_site(tmp_path, {"pkg": ["Shown", "Forgotten"]}) == ["pkg.Forgotten"]
