"""Every flag of every command-line tool the library ships is on a page of the documentation
site (issue 39): each CLI's ``--help`` is run as a user runs it (a subprocess) and each option it
prints must appear on some page under ``docs/`` — the page's own text or what it includes
(``--8<--`` snippets of README.md, BENCHMARKS.md, ...). A flag added to a parser without a word
in the docs fails here, naming the CLI and the flag."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache

import pytest

from .doc_examples import DOCS, REPO

#: Each CLI (``python -m MODULE ARGS --help``) the documentation promises.
CLIS: list[tuple[str, ...]] = [
    ("session_expiry_runtime.ops.kill_switch",),
    ("session_expiry_runtime.ops.kill_switch", "flags"),
    ("session_expiry_runtime.recovery.replay",),
    ("cdk_session_expiry.cost",),
    ("session_expiry_runtime.ops.status",),
]
_OPTION_LINE = re.compile(r"^  (?:-\w, )?(--[a-z][a-z0-9-]*)", re.MULTILINE)
_SNIPPET = re.compile(r'--8<-- "([^":]+)(?::[^"]*)?"')


@cache
def _help(cli: tuple[str, ...]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", *cli, "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def flags_of(help_text: str) -> list[str]:
    """The options ``--help`` lists (``--help`` itself left out), in its order."""
    return [f for f in dict.fromkeys(_OPTION_LINE.findall(help_text)) if f != "--help"]


@cache
def _site_text() -> str:
    """Every page under docs/ and every file a page includes."""
    parts = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        parts.append(text)
        for included in _SNIPPET.findall(text):
            path = REPO / included
            if path.is_file():
                parts.append(path.read_text())
    return "\n".join(parts)


def undocumented(flags: list[str], site: str) -> list[str]:
    """The ``flags`` that appear on no page of ``site`` (as a whole word)."""
    return [f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", site)]


@pytest.mark.parametrize("cli", CLIS, ids=[" ".join(c) for c in CLIS])
def test_every_flag_of_each_cli_is_on_a_page(cli: tuple[str, ...]) -> None:
    flags = flags_of(_help(cli))
    assert flags, f"python -m {' '.join(cli)} --help listed no option"
    missing = undocumented(flags, _site_text())
    assert not missing, f"python -m {' '.join(cli)}: {missing} appear on no page under docs/"


def test_every_subcommand_of_the_console_script_is_on_a_page() -> None:
    """``session-expiry SUBCOMMAND`` (each runs a CLI above, with the same flags)."""
    from cdk_session_expiry.cli import COMMANDS

    site = _site_text()
    missing = [n for n in COMMANDS if not re.search(rf"session-expiry {n}(?![\w-])", site)]
    assert not missing, f"session-expiry {missing} appear on no page under docs/"


def test_fails_a_flag_on_no_page() -> None:
    help_text = "options:\n  -h, --help  show\n  --documented X  yes\n  --forgotten  no\n"
    assert flags_of(help_text) == ["--documented", "--forgotten"]
    site = "Use `--documented X`; `--forgotten-not` is another flag."
    assert undocumented(flags_of(help_text), site) == ["--forgotten"]
