"""The site's "Getting started" project, run as written: its app, cdk.json, conftest.py and test
are taken from ``docs/getting-started.md`` (the blocks marked ``<!-- example: file PATH -->``).
The test passes when the deployed cleanup works, and fails when nothing is cleaned (the same app
with the cleanup switched off), so the example proves what it claims."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from docsite.doc_examples import DOCS, examples

from cdk_session_expiry.testing import Invocation, PollReport

REPO = Path(__file__).resolve().parents[2]
PAGE = DOCS / "getting-started.md"
#: The files of the page's project, each from its own block.
FILES = ("infra/app.py", "infra/cdk.json", "conftest.py", "test_sessions.py")


def _getting_started_files() -> dict[str, str]:
    """The project files the page shows, by path."""
    files = {b.target: b.code for b in examples(PAGE) if b.kind == "file"}
    assert sorted(files) == sorted(FILES), f"{PAGE.name} lost one of {FILES}: {sorted(files)}"
    return files


def _consumer_project(root: Path, *, cleanup_enabled: bool) -> Path:
    files = _getting_started_files()
    assert 'Path(__file__).parent / "infra"' in files["conftest.py"]
    if not cleanup_enabled:
        # The same app with the kill switch pulled: nothing is cleaned.
        anchor = 'SessionExpiry(\n    stack,\n    "Sessions",\n'
        assert anchor in files["infra/app.py"], "the page's app no longer builds SessionExpiry"
        files["infra/app.py"] = files["infra/app.py"].replace(
            anchor, anchor + "    cleanup_enabled=False,\n", 1
        )
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def _run_pytest(project: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTEST_"))}
    # The CDK CLI this repository pins, found on PATH as a consumer's global install would be.
    env["PATH"] = os.pathsep.join([str(REPO / "node_modules" / ".bin"), env.get("PATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sessions.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


@pytest.mark.slow
def test_the_getting_started_test_passes_when_sessions_are_cleaned(tmp_path: Path) -> None:
    result = _run_pytest(_consumer_project(tmp_path, cleanup_enabled=True))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout


@pytest.mark.slow
def test_the_getting_started_test_fails_when_nothing_is_cleaned(tmp_path: Path) -> None:
    result = _run_pytest(_consumer_project(tmp_path, cleanup_enabled=False))
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 failed" in result.stdout
    # It fails on the cleanup's effect: the expired session's connection is still open.
    assert "conn-expired" in result.stdout, result.stdout[-4000:]


def test_poll_report_counts_invocations_by_outcome() -> None:
    report = PollReport(
        invocations=[
            Invocation("shard-1", ("1", "2"), "function_error", 0),
            Invocation("shard-1", ("1",), "success", 0),
            Invocation("shard-1", ("2",), "partial", 0),
            Invocation("shard-1", ("2",), "success", 1),
        ]
    )
    assert report.outcomes() == {"function_error": 1, "success": 2, "partial": 1}
    assert (report.function_errors, report.partial_failures) == (1, 1)
